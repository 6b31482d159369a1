"""LeakyRelu (ORT ``leakyrelu_op_builder.cc``): LESS + MUL + SELECT."""

from __future__ import annotations

from mobile_ep import NodeUnit, RuleContext, Support

from ._base import NnapiRule, rank_between


class LeakyReluRule(NnapiRule):
    op_types = ("LeakyRelu",)
    # LeakyRelu-1 has the consumed_inputs attribute
    min_opset = 6

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input rank 1–4 (ORT declares no feature level, although SELECT and LESS are FL3 ops)."""
        return rank_between(ctx, unit, 1, 4)
