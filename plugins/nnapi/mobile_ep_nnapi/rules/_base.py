"""The base of every NNAPI rule: ONNX Runtime's ``BaseOpBuilder`` checks, in ORT's order, and helpers.

``NnapiRule.check_common`` runs, like ``BaseOpBuilder::IsOpSupported``:

1. the op's minimum NNAPI feature level against the target's (option ``api_level``);
2. the node unit kind: a QDQ unit only for the op types a rule lists in ``qdq_op_types``;
3. a fully static shape on every input the unit has, including quantization scales and zero points;
4. the input types (:meth:`NnapiRule.check_io`; by default input 0 must be float32);
5. the opset range (``min_opset``/``min_opsets`` .. ``max_opset``);

then ``check`` (the builder's ``IsOpSupportedImpl``), and finally, for the ops that may run on uint8
data outside QDQ form (Transpose, Resize, Concat, MaxPool), that the uint8 input comes from inside the
partition (``helper.cc`` ``IsInternalQuantizationSupported``).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

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
    doc_summary,
    op_label,
    shape_text,
)

from ._quant import QUANTIZED_LAYOUT, dtype_name, unit_inputs

__all__ = [
    "NnapiRule",
    "api_for",
    "dtype_name",
    "shape_text",
    "needs_feature_level",
    "rank_between",
    "constant_input",
    "input_count",
    "input_value",
    "extended",
    "FLOAT_OR_UINT8",
]

FLOAT_OR_UINT8 = (DataType.FLOAT, DataType.UINT8)


def api_for(feature_level: int) -> int:
    """The first Android API level with an NNAPI feature level (FL1 = API 27 ... FL5 = API 31)."""
    return {6: 33, 7: 34, 8: 35}.get(feature_level, 26 + feature_level)


def needs_feature_level(ctx: RuleContext, level: int, what: str = "") -> Support:
    """``Support.no`` unless the target reaches NNAPI feature level *level*."""
    if ctx.options.feature_level >= level:
        return SUPPORTED
    prefix = f"{what} needs" if what else "needs"
    return Support.no(
        f"{prefix} NNAPI feature level {level} (Android API {api_for(level)}); target is API {ctx.options.api_level}"
    )


def input_value(unit: NodeUnit, index: int) -> ir.Value | None:
    """The unit's input *index* as ORT's NodeUnit lists it (the quantized tensor for a QDQ unit)."""
    if unit.kind == "single":
        node = unit.target
        if node.op_type not in QUANTIZED_LAYOUT:  # the common case, without building the UnitIO list
            ins = node.inputs
            return ins[index] if index < len(ins) else None
    inputs = unit_inputs(unit)
    io = inputs[index] if index < len(inputs) else None
    return io.value if io is not None else None


def rank_between(ctx: RuleContext, unit: NodeUnit, lo: int, hi: int, index: int = 0, what: str = "") -> Support:
    """Input *index* has a rank in [lo, hi]."""
    value = input_value(unit, index)
    rank = ctx.rank(value)
    if rank is None:
        return Support.no(f"input {index} has no shape")
    if lo <= rank <= hi:
        return SUPPORTED
    label = what or f"input {index}"
    wanted = f"rank {lo}" if lo == hi else f"rank {lo}–{hi}" if lo > 0 else f"rank ≤{hi}"
    return Support.no(f"{label} has rank {rank}; needs {wanted}")


def extended(ctx: RuleContext) -> bool:
    """True with compile_ops=extended: claims beyond ORT's NNAPI EP (for convert --compile) are allowed."""
    return getattr(ctx.options, "compile_ops", "ort") == "extended"


def input_count(unit: NodeUnit) -> int:
    """How many inputs ORT's NodeUnit lists (omitted inputs given as empty names included)."""
    if unit.kind == "single" and unit.target.op_type not in QUANTIZED_LAYOUT:
        return len(unit.target.inputs)
    return len(unit_inputs(unit))


def constant_input(ctx: RuleContext, unit: NodeUnit, index: int, what: str, shown: int | None = None) -> Support:
    """Input *index* is a constant initializer (an input listed with an empty name is not).

    *shown* is the node's own input index when it differs from ORT's NodeUnit index (QLinear ops).
    """
    label = f"{what} (input {index if shown is None else shown})"
    value = input_value(unit, index)
    if value is None:
        return Support.no(f"{label} is given as an empty name, which ORT's NNAPI EP does not accept here")
    if not ctx.is_constant(value):
        return Support.no(f"{label} is not a constant initializer")
    return SUPPORTED


class NnapiRule(OpRule):
    """Base of the NNAPI rules: ORT's ``BaseOpBuilder`` checks before the op's own :meth:`check`.

    Subclasses declare what ORT's builders declare: ``min_feature_level`` (or per op ``feature_levels``),
    ``min_opset`` (or per op ``min_opsets``), ``qdq_op_types`` for the op types taken as QDQ node units,
    ``input_dtypes`` for the default type check of input 0, and ``internal_uint8`` for the ops that may
    take uint8 data from inside their partition.
    """

    max_opset: ClassVar[int] = MAX_OPSET
    #: Minimum NNAPI feature level (1 = Android API 27 ... 5 = API 31).
    min_feature_level: ClassVar[int] = 1
    #: Per-op-type feature levels for rules covering a family.
    feature_levels: ClassVar[Mapping[str, int]] = {}
    #: Per-op-type minimum opsets for rules covering a family.
    min_opsets: ClassVar[Mapping[str, int]] = {}
    #: Op types of this rule NNAPI takes as QDQ node units (DequantizeLinear → op → QuantizeLinear).
    qdq_op_types: ClassVar[frozenset[str]] = frozenset()
    #: Accepted types of input 0 for the default :meth:`check_io`.
    input_dtypes: ClassVar[Sequence[ir.DataType]] = (DataType.FLOAT,)
    #: The input type condition shown in the docs; ``None`` renders ``input_dtypes``, ``""`` shows nothing.
    dtype_doc: ClassVar[str | None] = None
    #: Layout-sensitive ops needing feature level 3 with NNAPI_FLAG_USE_NCHW (ORT: Conv and pooling).
    nchw_feature_level: ClassVar[bool] = False
    #: Op types taking uint8 input 0 outside QDQ form, only from a node of their own partition.
    internal_uint8: ClassVar[frozenset[str]] = frozenset()
    #: The rules read the graph only through the context (the partitioner asks them once per node signature).
    signature_memo: ClassVar[bool] = True

    # -- hooks ----------------------------------------------------------------------------------------
    def feature_level(self, unit: NodeUnit, ctx: RuleContext) -> int:
        """The minimum feature level for this unit (ORT's ``GetMinSupportedNNAPIFeatureLevel``)."""
        level = self.feature_levels.get(unit.target.op_type, self.min_feature_level)
        if self.nchw_feature_level and ctx.options.use_nchw:
            level = max(level, 3)
        return level

    def opset_floor(self, op_type: str) -> int:
        return self.min_opsets.get(op_type, self.min_opset)

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input types (ORT's ``HasSupportedInputOutputsImpl``): by default input 0 in ``input_dtypes``."""
        return self.check_input_dtype(unit, ctx, 0, self.input_dtypes)

    @staticmethod
    def check_input_dtype(unit: NodeUnit, ctx: RuleContext, index: int, allowed: Sequence[ir.DataType]) -> Support:
        value = input_value(unit, index)
        dtype = ctx.dtype(value)
        if dtype is None:
            return Support.no(f"input {index} has no element type")
        if dtype not in allowed:
            wanted = " or ".join(dtype_name(d) for d in allowed)
            return Support.no(f"input {index} is {dtype_name(dtype)}; needs {wanted}")
        return SUPPORTED

    # -- the common checks ----------------------------------------------------------------------------
    def accepts_qdq(self, unit: NodeUnit, ctx: RuleContext) -> bool:
        """Whether NNAPI takes this QDQ unit's op type as a unit (:attr:`qdq_op_types`; a rule may take more
        with compile_ops=extended)."""
        return unit.op_type in self.qdq_op_types

    def check_common(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        level = self.feature_level(unit, ctx)
        if ctx.options.feature_level < level:
            return needs_feature_level(ctx, level)
        if unit.kind == "qdq" and not self.accepts_qdq(unit, ctx):
            return Support.no(
                "NNAPI does not take this op as a QDQ node unit (DequantizeLinear → op → QuantizeLinear); "
                "the whole unit stays on the CPU"
            )
        result = self._check_static_shapes(unit, ctx)
        if result is not SUPPORTED and not result:  # (the identity test spares a __bool__ call per node)
            return result
        result = self.check_io(unit, ctx)
        if result is not SUPPORTED and not result:
            return result
        opset = ctx.node_opset(unit.target)
        floor = self.opset_floor(unit.target.op_type)
        if opset < floor:
            return Support.no(f"opset {opset} is not supported (needs opset {floor} or later)")
        if opset > self.max_opset:
            return Support.no(f"opset {opset} is above the highest supported opset {self.max_opset}")
        return SUPPORTED

    def _check_static_shapes(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        if unit.kind == "single" and unit.target.op_type not in QUANTIZED_LAYOUT:
            # The common case (no quantization parameters), asked for every node: the inputs as they are.
            shape_of = ctx.shape
            for value in unit.target.inputs:
                if value is not None:
                    shape = shape_of(value)
                    if shape is None or None in shape:
                        break
            else:
                return SUPPORTED
        for index, io in enumerate(unit_inputs(unit)):
            if io is None:
                continue
            for value, what in ((io.value, f"input {index}"), (io.scale, f"input {index} scale"),
                                (io.zero_point, f"input {index} zero point")):
                if value is None:
                    continue
                shape = ctx.shape(value)
                if shape is None:
                    return Support.no(f"{what} has no shape information: run shape inference or fix it with --shape")
                if any(d is None for d in shape):
                    fix = "fix it with --shape" if value.is_graph_input() else "fix the input shapes with --shape"
                    return Support.no(f"{what} has a dynamic shape {shape_text(value, ctx)}: {fix}")
        return SUPPORTED

    def supports(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        result = super().supports(unit, ctx)
        if result and self.internal_uint8 and unit.target.op_type in self.internal_uint8:
            return self._check_internal_uint8(unit, ctx)
        return result

    def _check_internal_uint8(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """A plain node on uint8 data must read it from a node of its own partition (no graph inputs).

        ORT records the outputs of each claimed unit's *target* node for the partition being built and
        forgets them when the partition closes.  While partitioning, the context's ``group_values`` are
        exactly those; asked outside the partitioner (one node alone), "produced by a target node this
        backend claims" stands in for it.
        """
        if unit.kind != "single" or not unit.target.inputs:
            return SUPPORTED
        if ctx.dtype(unit.target.inputs[0]) != DataType.UINT8:
            return SUPPORTED
        checked = unit.target.inputs if unit.op_type == "Concat" else unit.target.inputs[:1]
        for index, value in enumerate(checked):
            producer = ctx.producer(value)
            # (a producer in no graph yet is a node the same rewrite adds: it will be in this graph)
            if producer is None or producer.graph is not ctx.graph and producer.graph is not None:
                return Support.no(
                    f"uint8 input {index} is a graph input or initializer; NNAPI takes uint8 data outside QDQ form "
                    "only from a node in the same partition (it carries no scale/zero point)"
                )
            if ctx.unit_of(producer).target is not producer:
                return Support.no(
                    f"uint8 input {index} is produced by the QuantizeLinear of a QDQ unit, which ORT does not count "
                    "as inside the partition"
                )
            answer = ctx.claims(producer)
            if not answer:
                return Support.no(
                    f"uint8 input {index} comes from {op_label(producer)} {producer.name!r}, which NNAPI does not "
                    "take, so it would be a partition input"
                )
            group = getattr(ctx, "group_values", None)
            if group is not None and value not in group:
                ctx.reads_graph()
                return Support.no(
                    f"uint8 input {index} comes from {op_label(producer)} {producer.name!r}, which is in an earlier "
                    "partition: NNAPI takes uint8 data outside QDQ form only from the partition being built"
                )
        return SUPPORTED

    # -- lowering (convert --compile) -----------------------------------------------------------------
    def lower(self, unit: NodeUnit, ctx: RuleContext, builder: Any) -> None:
        """Add the unit to the NNAPI model being built (``lower_units`` re-asserted support): :meth:`emit`.

        A Relu/Clip unit its producer folded into a fused-activation code adds nothing.
        """
        if unit.target in builder.fused:
            return
        with builder.lowering(unit):
            self.emit(unit, ctx, builder)

    def emit(self, unit: NodeUnit, ctx: RuleContext, b: Any) -> None:
        """The rule's NNAPI operations for *unit*, written into the builder *b*."""
        raise CompileError(f"{type(self).__name__} has no NNAPI lowering")

    # -- documentation --------------------------------------------------------------------------------
    def conditions(self, op_type: str) -> list[str]:
        items = []
        level = self.feature_levels.get(op_type, self.min_feature_level)
        if level > 1 or self.nchw_feature_level:
            text = f"feature level {level}+ (API {api_for(level)}+)"
            if self.nchw_feature_level:
                text += ", 3+ with use_nchw"
            items.append(text)
        floor = self.opset_floor(op_type)
        if floor > 1 or self.max_opset != MAX_OPSET:
            items.append(f"opset {floor}–{self.max_opset}")
        if op_type in self.qdq_op_types:
            items.append("also as a QDQ unit")
        if self.dtype_doc is None and not op_type.startswith("QLinear"):
            items.append("input 0 " + " or ".join(dtype_name(d) for d in self.input_dtypes))
        elif self.dtype_doc:
            items.append(self.dtype_doc)
        doc = inspect.getdoc(type(self).check) if type(self).check is not OpRule.check else None
        if doc:
            text = doc_summary(doc)
            if text:
                items.append(text)
        if op_type in self.internal_uint8:
            items.append("a plain uint8 input only from a node of the same partition")
        return items
