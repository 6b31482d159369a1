"""Concat, plain or as a QDQ unit (ORT ``concat_op_builder.cc``): CONCATENATION."""

from __future__ import annotations

from mobile_ep import SUPPORTED, DataType, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import FLOAT_OR_UINT8, NnapiRule, rank_between
from ._quant import (
    check_quantized_io,
    check_scale_and_zero_point,
    scale_and_zero_point,
    unit_inputs,
    unit_outputs,
)


class ConcatRule(NnapiRule):
    op_types = ("Concat",)
    qdq_op_types = frozenset({"Concat"})
    input_dtypes = FLOAT_OR_UINT8
    internal_uint8 = frozenset({"Concat"})

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        result = super().check_io(unit, ctx)
        if not result or unit.kind != "qdq":
            return result
        inputs = unit_inputs(unit)
        result = check_quantized_io(unit, ctx, tuple(range(len(inputs))))
        if result:
            result = check_quantized_io(unit, ctx, (0,), output=True)
        if not result or ctx.options.feature_level >= 3:
            return result
        # Below feature level 3 NNAPI's quantized CONCATENATION keeps one scale and zero point.
        first = scale_and_zero_point(inputs[0], ctx)
        if first is None:
            return Support.no("input 0 scale/zero point are not constant initializers")
        for index in range(1, len(inputs)):
            result = check_scale_and_zero_point(inputs[index], ctx, f"input {index}", *first)
            if not result:
                return Support.no(f"{result.reason} (all inputs and the output need one scale and zero point "
                                  f"below feature level 3; target is API {ctx.options.api_level})")
        result = check_scale_and_zero_point(unit_outputs(unit)[0], ctx, "output", *first)
        if not result:
            return Support.no(f"{result.reason} (all inputs and the output need one scale and zero point below "
                              f"feature level 3; target is API {ctx.options.api_level})")
        return SUPPORTED

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input 0 rank 1–4; QDQ unit: uint8 per-tensor inputs and output, all with one scale and zero point
        below feature level 3."""
        return rank_between(ctx, unit, 1, 4)

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """CONCATENATION in the inputs' layout (the axis follows it); empty inputs are left out."""
        out = unit_outputs(unit)[0].value
        values = [io.value for io in unit_inputs(unit) if io is not None]
        if 0 in b.shape(out):
            b.empty.add(out)
            return
        values = [v for v in values if v not in b.empty and 0 not in b.shape(v)]
        rank = b.rank(out)
        axis = int(attr(unit.target, "axis", 0)) % rank
        perm = b.elementwise_layout(values, out)
        refs = [b.get(v, perm).index for v in values]
        if ctx.dtype(out) == DataType.UINT8 and unit.kind != "qdq":
            y = b.like(out, values[0], perm)
        else:
            y = b.new(out, perm)
        b.op(OperationCode.CONCATENATION, [*refs, b.i32(perm.index(axis))], [y.index])
