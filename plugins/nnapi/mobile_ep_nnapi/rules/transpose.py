"""Transpose, plain or as a QDQ unit (ORT ``transpose_op_builder.cc``): TRANSPOSE."""

from __future__ import annotations

from mobile_ep import NodeUnit, RuleContext, Support

from ._base import FLOAT_OR_UINT8, NnapiRule, rank_between
from ._quant import check_quantized_io


class TransposeRule(NnapiRule):
    op_types = ("Transpose",)
    qdq_op_types = frozenset({"Transpose"})
    min_feature_level = 2
    input_dtypes = FLOAT_OR_UINT8
    internal_uint8 = frozenset({"Transpose"})

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        result = super().check_io(unit, ctx)
        if not result or unit.kind != "qdq":
            return result
        result = check_quantized_io(unit, ctx, (0,))
        return check_quantized_io(unit, ctx, (0,), output=True) if result else result

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input rank 1–4; QDQ unit: uint8 per-tensor input and output."""
        return rank_between(ctx, unit, 1, 4)
