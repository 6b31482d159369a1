"""Legalizing rewrites: a node a backend cannot take becomes equivalent nodes it can.

A :class:`Rewrite` is a pattern (one op), a check (:meth:`Rewrite.match`, a :class:`Support` with a
reason) and a replacement (:meth:`Rewrite.replace`, building nodes with a :class:`Builder`).  Backends
list the rewrites they want in ``Backend.rewrites()``; the legalize pass applies one only where the
backend then claims every node it produced, and undoes it otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import onnx_ir as ir

from mobile_ep.contract.rules import RuleContext
from mobile_ep.contract.support import Support, attr

__all__ = ["Rewrite", "Builder", "broadcast_shapes", "float_input", "int_list"]


#: The element types arithmetic rewrites work in.
FLOAT_TYPES = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.DOUBLE)


def float_input(node: ir.Node, ctx: RuleContext, index: int = 0) -> Support:
    """Yes when input *index* of *node* is a float tensor (float32, float16 or double)."""
    value = node.inputs[index] if index < len(node.inputs) else None
    return Support.check(ctx.dtype(value) in FLOAT_TYPES, f"input {index} is not a float tensor")


def int_list(ctx: RuleContext, node: ir.Node, index: int, attribute: str) -> list[int] | None:
    """A node's int list given as its constant input *index* (newer opsets) or as its attribute *attribute*
    (older ones): Slice's starts, Squeeze's axes ...; None when neither is there (or the input is not a
    constant)."""
    if len(node.inputs) > index and node.inputs[index] is not None:
        value = ctx.constant(node.inputs[index])
        return None if value is None else [int(v) for v in value.reshape(-1)]
    found = attr(node, attribute)
    return None if found is None else [int(v) for v in found]


def broadcast_shapes(*shapes: tuple[int | None, ...] | None) -> tuple[int | None, ...] | None:
    """Numpy broadcasting over shapes with unknown dims (``None``); ``None`` if any rank is unknown."""
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)  # type: ignore[arg-type]
    result: list[int | None] = []
    for axis in range(rank):
        dims = [s[len(s) - rank + axis] for s in shapes if len(s) - rank + axis >= 0]  # type: ignore[arg-type]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise ValueError(f"shapes {shapes} do not broadcast")
        if known:
            result.append(known.pop())
        elif any(d is None for d in dims):
            result.append(None)
        else:
            result.append(1)
    return tuple(result)


#: Attribute makers for plain Python values, by type (what onnx_ir's convert_attribute makes of them).
_PLAIN_ATTRIBUTES: dict[type, Callable[[str, Any], ir.Attr]] = {
    int: ir.AttrInt64, bool: ir.AttrInt64, float: ir.AttrFloat32, str: ir.AttrString}
_PLAIN_LISTS: dict[type, Callable[[str, Any], ir.Attr]] = {
    int: ir.AttrInt64s, float: ir.AttrFloat32s, str: ir.AttrStrings}


def _attribute(name: str, value: Any) -> ir.Attr:
    """``ir.convenience.convert_attribute(name, value)``, without its type tests (protocol checks among
    them: a tenth of a millisecond per list) for ints, floats, strings and non-empty lists of one of those."""
    make = _PLAIN_ATTRIBUTES.get(type(value))
    if make is not None:
        return make(name, value)
    if type(value) in (list, tuple) and value:
        kinds = set(map(type, value))
        make = _PLAIN_LISTS.get(kinds.pop()) if len(kinds) == 1 else None
        if make is not None:
            return make(name, value)
    return ir.convenience.convert_attribute(name, value)


class Builder:
    """Creates the replacement nodes of one rewrite, named after the node they replace."""

    def __init__(self, node: ir.Node, rewrite: str) -> None:
        self.node = node
        self.prefix = f"{node.name or node.op_type}/{rewrite}"
        self.nodes: list[ir.Node] = []
        self.initializers: list[ir.Value] = []
        self._count = 0

    def _name(self, hint: str) -> str:
        self._count += 1
        return f"{self.prefix}/{hint}_{self._count}"

    def const(self, array: Any, hint: str = "const", dtype: ir.DataType | None = None) -> ir.Value:
        array = np.asarray(array)
        if dtype is not None:
            array = array.astype(dtype.numpy())
        if array.base is not None:  # a view (of a weight's memory map, say) would keep that memory pinned
            array = array.copy()
        name = self._name(hint)
        # ir.Tensor, not ir.tensor: for an array that is what ir.tensor makes, after protocol checks taking
        # ten times as long (60 us; channel-shuffle rewrites make a constant each)
        value = ir.Value(name=name, shape=ir.Shape(array.shape), type=ir.TensorType(ir.DataType.from_numpy(array.dtype)),
                         const_value=ir.Tensor(array, name=name))
        self.initializers.append(value)
        return value

    def op(self, op_type: str, inputs: Sequence[ir.Value | None], *, shape: Sequence[int | None] | None,
           dtype: ir.DataType | None, num_outputs: int = 1, domain: str = "", **attributes: Any
           ) -> ir.Value:
        """Add a node; returns its (first) output, with the given shape and dtype."""
        name = self._name(op_type)
        outputs = [
            ir.Value(name=f"{name}:{i}" if num_outputs > 1 else name,
                     shape=None if shape is None else ir.Shape([d if d is not None else ir.SymbolicDim(None)
                                                               for d in shape]),
                     type=None if dtype is None else ir.TensorType(dtype))
            for i in range(num_outputs)
        ]
        attrs = [_attribute(k, v) for k, v in attributes.items() if v is not None]
        node = ir.Node(domain, op_type, list(inputs), attrs, outputs=outputs, name=name)
        self.nodes.append(node)
        return outputs[0]

    def reshape(self, x: ir.Value, shape: Sequence[int], dtype: ir.DataType | None, hint: str = "shape") -> ir.Value:
        """A Reshape of *x* to the constant *shape* (its int64 constant named after *hint*), which is also its
        output's shape."""
        return self.op("Reshape", [x, self.const(np.array(shape, np.int64), hint)], shape=tuple(shape), dtype=dtype)

    def ops(self, op_type: str, inputs: Sequence[ir.Value | None], *, shapes: Sequence[Sequence[int | None]],
            dtype: ir.DataType | None, domain: str = "", **attributes: Any) -> list[ir.Value]:
        """A node with several outputs."""
        first = self.op(op_type, inputs, shape=shapes[0], dtype=dtype, num_outputs=len(shapes), domain=domain,
                        **attributes)
        node = self.nodes[-1]
        for value, shape in zip(node.outputs, shapes, strict=True):
            value.shape = ir.Shape([d if d is not None else ir.SymbolicDim(None) for d in shape])
        return list(node.outputs) if first is not None else []


class Rewrite:
    """Turns one node into equivalent nodes.  Subclass: set ``op_types`` and implement both methods."""

    #: Short identifier shown in reports (``sum-to-add``).
    name: ClassVar[str] = ""
    domain: ClassVar[str] = ""
    op_types: ClassVar[tuple[str, ...]] = ()
    #: None for a rewrite that is exact or equal within floating-point rounding; else the largest absolute
    #: error of its result (an approximate rewrite, which says so in its name and description).
    max_abs_error: ClassVar[float | None] = None
    #: Whether the rewrite may make nodes the backend does not take that read nothing but graph inputs and
    #: constants (a Cast of an int64 input): they run on the CPU before any partition and cannot split one.
    #: Every other node it makes must be taken.
    cpu_at_inputs: ClassVar[bool] = False
    #: The onnxruntime optimization level (``"disable"``, ``"basic"`` ...) at which the original model computes
    #: what this rewrite writes, when onnxruntime's default level computes something else: ``convert``
    #: verifies a model this rewrite changed against the original run at that level, with the same
    #: tolerances, and says so with :attr:`reference_why`.  None: the default level.
    reference_level: ClassVar[str | None] = None
    #: Why (a clause after "because"), for the report.
    reference_why: ClassVar[str] = ""

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        """Whether this rewrite can replace *node* exactly (attributes, known shapes, constant inputs)."""
        return Support.yes()

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        """Build the replacement with *b*; return values replacing ``node.outputs``, in order."""
        raise NotImplementedError

    def describe(self) -> str:
        doc = (type(self).__doc__ or "").strip().split("\n\n")[0]
        return " ".join(doc.split())
