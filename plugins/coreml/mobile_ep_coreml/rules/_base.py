"""The checks every op goes through in ONNX Runtime's CoreML EP, and helpers the op rules share.

ORT's ``BaseOpBuilder::IsOpSupported`` (``coreml/builders/impl/base_op_builder.cc``) runs, in order:

1. format: under ML Program, builders that do not support it are rejected (Flatten, LRN);
2. opset: the op's version must lie in the builder's [min, 27];
3. every present input (``helper.cc`` ``IsInputSupported``): a known shape; all dims static if
   RequireStaticInputShapes is set; no 0 dim unless the builder takes empty inputs (Resize); rank <= 5;
4. input types (``HasSupportedInputsImpl``): by default input 0 must be float32 (NeuralNetwork) or
   float32 / float16 / int64 (ML Program); builders replace this with their own type rules;
5. the op's own conditions (``IsOpSupportedImpl``), :meth:`CoreMLRule.check` here.

:class:`CoreMLRule` reproduces 1-4 in :meth:`~CoreMLRule.check_common` from declarative class
attributes, which the ``ops`` documentation renders too.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import numpy as np
import onnx_ir as ir

from mobile_ep import (
    MAX_OPSET,
    SUPPORTED,
    CompileError,
    DataType,
    NodeUnit,
    OpRule,
    RuleContext,
    Support,
    attr,
    doc_summary,
    op_label,
)
from mobile_ep import shape_text as contract_shape_text

__all__ = [
    "CoreMLRule",
    "NN_INPUT0_TYPES",
    "MLP_INPUT0_TYPES",
    "MAX_RANK",
    "CONV_MAX_DIM",
    "is_mlprogram",
    "coreml_version",
    "type_name",
    "types_text",
    "shape_text",
    "input_label",
    "is_constant",
    "constant_value",
    "is_initializer",
    "initializer_value",
    "check_type",
    "check_conv_dims",
    "normalize_axis",
    "present",
    "window_pads",
    "reshape_target",
]

FLOAT, FLOAT16, INT32, INT64, BOOL = (DataType.FLOAT, DataType.FLOAT16, DataType.INT32, DataType.INT64,
                                      DataType.BOOL)

#: Input-0 element types of ORT's default type check, per format.
NN_INPUT0_TYPES = frozenset({FLOAT})
MLP_INPUT0_TYPES = frozenset({FLOAT, FLOAT16, INT64})
#: Core ML tensors have at most 5 dims (apple/coremltools#832).
MAX_RANK = 5
#: Core ML fails to load convolutions with a dim above this (apple/coremltools#1003, texture width).
CONV_MAX_DIM = 16384

_TYPE_NAMES = {
    DataType.FLOAT: "float32",
    DataType.FLOAT16: "float16",
    DataType.DOUBLE: "float64",
    DataType.BFLOAT16: "bfloat16",
}


# --------------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------------
def is_mlprogram(ctx: RuleContext) -> bool:
    return ctx.options.model_format == "MLProgram"


def coreml_version(ctx: RuleContext) -> int:
    """The Core ML version every device of the deployment target has."""
    return int(ctx.options.coreml_version)


def format_name(ctx: RuleContext) -> str:
    return "ML Program" if is_mlprogram(ctx) else "NeuralNetwork"


# --------------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------------
def type_name(dtype: DataType | None) -> str:
    if dtype is None:
        return "of unknown type"
    return _TYPE_NAMES.get(dtype, dtype.name.lower())


def types_text(types: Iterable[DataType]) -> str:
    """``float32, float16 or int64`` in a stable order."""
    order = [FLOAT, FLOAT16, INT32, INT64, BOOL]
    names = [type_name(t) for t in sorted(types, key=lambda t: (order.index(t) if t in order else 99, t.name))]
    if len(names) == 1:
        return f"{names[0]} only"
    return ", ".join(names[:-1]) + " or " + names[-1]


def shape_text(ctx: RuleContext, value: ir.Value | None) -> str:
    """:func:`mobile_ep.contract.shape_text`; ``unknown`` for no value."""
    return "unknown" if value is None else contract_shape_text(value, ctx)


def input_label(node: ir.Node, index: int, what: str | None = None) -> str:
    """``weight (input 1)``; or ``input 1 ('w')`` when *what* is not given."""
    if what:
        return f"{what} (input {index})"
    value = node.inputs[index] if index < len(node.inputs) else None
    name = value.name if value is not None else ""
    return f"input {index} ({name!r})" if name else f"input {index}"


# --------------------------------------------------------------------------------------------------
# Constants.  ORT turns ``Constant`` nodes into initializers when it loads a model, so their outputs
# count as constant initializers here too.
# --------------------------------------------------------------------------------------------------
def present(node: ir.Node, index: int) -> bool:
    """Whether optional input *index* is given (ORT ``NodeArg::Exists``)."""
    return index < len(node.inputs) and node.inputs[index] is not None


def _constant_node_value(value: ir.Value) -> np.ndarray | None:
    producer = value.producer()
    if producer is None or producer.op_type != "Constant" or producer.domain not in ("", "ai.onnx"):
        return None
    for name in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        data = attr(producer, name)
        if data is None:
            continue
        if hasattr(data, "numpy"):
            return np.asarray(data.numpy())
        if name.startswith("value_float"):
            return np.asarray(data, dtype=np.float32)
        return np.asarray(data, dtype=np.int64)
    return None


def _from_constant_node(value: ir.Value | None) -> bool:
    if value is None:
        return False
    producer = value.producer()
    return producer is not None and producer.op_type == "Constant" and producer.domain in ("", "ai.onnx")


def is_constant(ctx: RuleContext, value: ir.Value | None) -> bool:
    """A constant initializer (ORT ``GetConstantInitializer``): not overridable through a graph input."""
    return ctx.is_constant(value) or _from_constant_node(value)


def constant_value(ctx: RuleContext, value: ir.Value | None) -> np.ndarray | None:
    if value is None:
        return None
    if ctx.is_constant(value):
        return ctx.constant(value)
    ctx.reads_graph()  # (a Constant node's value)
    return _constant_node_value(value)


def is_initializer(ctx: RuleContext, value: ir.Value | None) -> bool:
    """Any initializer, overridable ones included (ORT ``GetAllInitializedTensors``)."""
    if value is None:
        return False
    return (value.is_initializer() and value.const_value is not None) or _from_constant_node(value)


def initializer_value(ctx: RuleContext, value: ir.Value | None) -> np.ndarray | None:
    if not is_initializer(ctx, value):
        return None
    assert value is not None
    ctx.reads_graph()  # (the values themselves)
    if value.const_value is not None:
        return value.const_value.numpy()
    return _constant_node_value(value)


# --------------------------------------------------------------------------------------------------
# Small checks
# --------------------------------------------------------------------------------------------------
def check_type(ctx: RuleContext, value: ir.Value | None, allowed: Iterable[DataType], what: str,
               by: str | None = None) -> Support:
    """``what`` must have one of the ``allowed`` element types; *by* names who requires it."""
    allowed = frozenset(allowed)
    dtype = ctx.dtype(value)
    if dtype is None:
        return Support.no(f"{what} has no known element type")
    if dtype not in allowed:
        return Support.no(f"{what} is {type_name(dtype)}; {by or format_name(ctx)} takes {types_text(allowed)}")
    return SUPPORTED


def check_conv_dims(ctx: RuleContext, checks: Sequence[tuple[str, tuple[int | None, ...] | None]]) -> Support:
    """ORT ``CheckShapeForConvMemoryLimit`` over (label, shape) pairs."""
    for label, shape in checks:
        if not shape or (None not in shape and max(shape) <= CONV_MAX_DIM):
            continue  # the usual case, without a loop over the dims
        for dim in shape:
            if dim is not None and dim > CONV_MAX_DIM:
                return Support.no(
                    f"{label} has a dim of {dim}; Core ML fails to load convolutions with a dim over {CONV_MAX_DIM}"
                )
    return SUPPORTED


def normalize_axis(axis: int, rank: int) -> int | None:
    """``axis`` in [0, rank), or ``None`` when outside [-rank, rank - 1] (where ORT's HandleNegativeAxis throws)."""
    if not -rank <= axis <= rank - 1:
        return None
    return axis + rank if axis < 0 else axis


# --------------------------------------------------------------------------------------------------
# Lowering helpers
# --------------------------------------------------------------------------------------------------
def window_pads(node: ir.Node, ctx: RuleContext, kernel: Sequence[int], strides: Sequence[int],
                dilations: Sequence[int]) -> tuple[str, list[int]]:
    """MIL ``pad_type`` and ``pad`` ([begin0, end0, begin1, end1, ...]) for a Conv/Pool node.

    ``auto_pad`` SAME_* becomes explicit pads when the spatial input dims are static (from the
    ONNX output size), else MIL's ``same`` / ``same_lower``; NOTSET takes ``pads``
    ([begin..., end...] in ONNX order).
    """
    spatial = len(kernel)
    auto_pad = attr(node, "auto_pad", "NOTSET")
    if auto_pad == "VALID":
        return "valid", [0] * (2 * spatial)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        x_shape = ctx.shape(node.inputs[0]) or ()
        sizes = list(x_shape[2:])
        if len(sizes) != spatial or any(d is None for d in sizes):
            return ("same" if auto_pad == "SAME_UPPER" else "same_lower"), [0] * (2 * spatial)
        pads = []
        for size, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
            out = -(-int(size) // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - int(size), 0)
            small, big = total // 2, total - total // 2
            pads += [small, big] if auto_pad == "SAME_UPPER" else [big, small]
        return "custom", pads
    onnx_pads = [int(p) for p in (attr(node, "pads") or [0] * (2 * spatial))]
    return "custom", [v for i in range(spatial) for v in (onnx_pads[i], onnx_pads[i + spatial])]


def reshape_target(ctx: RuleContext, value: ir.Value) -> list[int]:
    """The static shape of *value* for a MIL ``reshape``, with at most one unknown dim as -1."""
    shape = ctx.shape(value)
    if shape is None or sum(d is None for d in shape) > 1:
        raise CompileError(f"the shape of {value.name!r} is not known well enough to reshape to it")
    return [-1 if d is None else int(d) for d in shape]


def _lowering(lower: Any) -> Any:
    """Name the node in any error a lowering raises (coremltools' builder raises ValueError & co.)."""
    @functools.wraps(lower)
    def wrapped(self: Any, unit: NodeUnit, ctx: RuleContext, builder: Any) -> None:
        try:
            lower(self, unit, ctx, builder)
        except CompileError as exc:
            label = f"{op_label(unit.target)} node {unit.name!r}"
            if label in str(exc):
                raise
            raise CompileError(f"coreml: {label}: {exc}") from exc
        except Exception as exc:
            raise CompileError(f"coreml: {op_label(unit.target)} node {unit.name!r} cannot be lowered: "
                               f"{type(exc).__name__}: {' '.join(str(exc).split())}") from exc

    wrapped._names_failures = True  # type: ignore[attr-defined]
    return wrapped


# --------------------------------------------------------------------------------------------------
# The rule base
# --------------------------------------------------------------------------------------------------
class CoreMLRule(OpRule):
    """An ORT CoreML op builder: shared checks in ORT's order, then :meth:`check`.

    Subclasses set ``op_types`` and the declarative attributes below, override :meth:`check_types` when
    the builder has its own type rules (ORT ``HasSupportedInputsImpl``) and :meth:`check` for the op's
    own conditions (``IsOpSupportedImpl``), whose docstring's first paragraph documents them.

    ``lower(unit, ctx, builder)`` adds the node to a :class:`mobile_ep_coreml.mil.MILBuilder` (used by
    ``compile``, after support is re-asserted); any error it raises is reported as a CompileError naming
    the node.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        lower = cls.__dict__.get("lower")
        if lower is not None and not getattr(lower, "_names_failures", False):
            cls.lower = _lowering(lower)  # type: ignore[attr-defined]

    #: The rules read the graph only through the context and the helpers above (which announce what a node's
    #: signature does not hold): the partitioner asks them once per node signature.
    signature_memo: ClassVar[bool] = True
    #: ORT builds the op into a NeuralNetwork model.
    neuralnetwork: ClassVar[bool] = True
    #: ORT builds the op into an ML Program (``SupportsMLProgram``).
    mlprogram: ClassVar[bool] = True
    #: The builder accepts inputs with a 0 dim (``allow_empty_tensor_as_input``, only Resize).
    allow_empty_inputs: ClassVar[bool] = False
    #: A cheap op: ORT drops a partition made only of trivial ops (``IsTrivial``).
    trivial: ClassVar[bool] = False
    #: Element types of input 0 under the default type check, per format.
    input0_types_nn: ClassVar[frozenset[DataType]] = NN_INPUT0_TYPES
    input0_types_mlp: ClassVar[frozenset[DataType]] = MLP_INPUT0_TYPES

    # -- the shared checks ----------------------------------------------------------------------------
    def check_common(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        node = unit.target
        result = self.check_format(ctx)
        if not result:
            return result
        opset = ctx.node_opset(node)
        if opset < self.min_opset:
            return Support.no(f"opset {opset}; ORT's CoreML EP takes it from opset {self.min_opset}")
        if opset > self.max_opset:
            return Support.no(f"opset {opset}; ORT's CoreML EP takes opsets up to {self.max_opset}")
        static_only = bool(ctx.options.require_static_input_shapes)
        for index, value in enumerate(node.inputs):
            if value is None:
                continue  # an omitted optional input
            result = self.check_input(node, index, value, ctx, static_only)
            if result is not SUPPORTED and not result:  # (the identity test spares a __bool__ call)
                return result
        return self.check_types(unit, ctx)

    def check_format(self, ctx: RuleContext) -> Support:
        if is_mlprogram(ctx) and not self.mlprogram:
            return Support.no(
                "needs model_format=NeuralNetwork; ORT's CoreML EP has no ML Program builder for it"
            )
        if not is_mlprogram(ctx) and not self.neuralnetwork:
            return Support.no(
                "needs the ML Program format (model_format=MLProgram); ORT's CoreML EP builds it only "
                "into ML Programs"
            )
        return SUPPORTED

    def check_input(self, node: ir.Node, index: int, value: ir.Value, ctx: RuleContext,
                    static_only: bool) -> Support:
        shape = ctx.shape(value)
        if (shape is not None and not (static_only and None in shape) and (self.allow_empty_inputs or 0 not in shape)
                and len(shape) <= MAX_RANK):
            return SUPPORTED  # (asked for every input of every node: no label unless it is needed)
        label = input_label(node, index)
        if shape is None:
            return _no_shape(label, value, ctx)
        if static_only and any(d is None for d in shape):
            return Support.no(
                f"{label} has dynamic shape {shape_text(ctx, value)} and require_static_input_shapes is "
                "set (fix it with --shape or --dim)"
            )
        if not self.allow_empty_inputs and 0 in shape:
            return Support.no(f"{label} has a 0 dim {shape_text(ctx, value)}; Core ML takes no empty tensors")
        if len(shape) > MAX_RANK:
            return Support.no(f"{label} has rank {len(shape)}; Core ML takes rank <= {MAX_RANK}")
        return SUPPORTED

    def check_types(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Element types of the inputs (ORT ``HasSupportedInputsImpl``); by default input 0 only."""
        node = unit.target
        allowed = self.input0_types_mlp if is_mlprogram(ctx) else self.input0_types_nn
        if node.inputs and ctx.dtype(node.inputs[0]) in allowed:
            return SUPPORTED  # the common case, without building the answer's text
        result = check_type(ctx, node.inputs[0] if node.inputs else None, allowed, input_label(node, 0))
        if not result and not is_mlprogram(ctx) and ctx.dtype(node.inputs[0]) in self.input0_types_mlp:
            return Support.no(f"{result.reason} (ML Program also takes {type_name(ctx.dtype(node.inputs[0]))})")
        return result

    # -- partition filter -------------------------------------------------------------------------------
    def is_trivial(self, node: ir.Node) -> bool:
        return self.trivial

    # -- documentation --------------------------------------------------------------------------------
    def conditions(self, op_type: str) -> list[str]:
        items: list[str] = []
        if self.neuralnetwork and not self.mlprogram:
            items.append("NeuralNetwork only")
        elif self.mlprogram and not self.neuralnetwork:
            items.append("ML Program only")
        if self.min_opset > 1 or self.max_opset != MAX_OPSET:
            items.append(f"opset {self.min_opset}–{self.max_opset}")
        if type(self).check_types is CoreMLRule.check_types:
            parts = []
            if self.neuralnetwork:
                parts.append(f"NeuralNetwork {types_text(self.input0_types_nn)}")
            if self.mlprogram:
                parts.append(f"ML Program {types_text(self.input0_types_mlp)}")
            items.append("input 0: " + "; ".join(parts))
        elif type(self).check_types.__doc__:
            items.append(doc_summary(inspect.cleandoc(type(self).check_types.__doc__)))
        if self.allow_empty_inputs:
            items.append("inputs may have 0 dims")
        if self.trivial:
            items.append("trivial (a partition of only trivial ops is dropped)")
        doc = inspect.getdoc(type(self).check) if type(self).check is not OpRule.check else None
        doc = doc or inspect.getdoc(type(self))
        if doc and doc != inspect.getdoc(CoreMLRule):
            items.append(doc_summary(doc))
        return items


def _no_shape(label: str, value: ir.Value, ctx: RuleContext) -> Support:
    """An input without a shape: fixed with --shape or --dim where the model has a symbolic input dim; where it
    has none (onnxruntime inserted the node, or did not infer the shape), named after the op that made it."""
    inputs = [v for v in ctx.model.graph.inputs if not v.is_initializer()] if ctx.model is not None else []
    if inputs and all(v.shape is not None and all(isinstance(d, int) for d in v.shape) for v in inputs):
        producer = value.producer()
        after = f"{op_label(producer)} {producer.name!r}" if producer is not None else "the graph's input"
        return Support.no(f"{label}: shape unknown after {after} (the model's inputs are all of fixed size: "
                          "input sizes cannot give it); ORT's CoreML EP needs every input's shape")
    return Support.no(f"{label} has no known shape; ORT's CoreML EP needs every input's shape "
                      "(fix the input shapes with --shape or --dim)")
