"""LpNormalization with p=2 (compile_ops=extended only): L2_NORMALIZATION (the axis argument from feature level 3)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule, rank_between

COMPILE_ONLY = True


class LpNormalizationRule(NnapiRule):
    op_types = ("LpNormalization",)
    min_feature_level = 3

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """p=2; input rank 1–4."""
        if attr(unit.target, "p", 2) != 2:
            return Support.no(f"p={attr(unit.target, 'p', 2)} (L2_NORMALIZATION is p=2 only)")
        result = rank_between(ctx, unit, 1, 4)
        return result if not result else SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        x_value = unit.target.inputs[0]
        axis = int(attr(unit.target, "axis", -1)) % b.rank(x_value)
        x = b.get(x_value, b.preferred(x_value))
        y = b.new(unit.target.outputs[0], x.perm)
        b.op(OperationCode.L2_NORMALIZATION, [x.index, b.i32(x.perm.index(axis))], [y.index])
