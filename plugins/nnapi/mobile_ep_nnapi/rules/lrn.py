"""LRN (ORT ``LRN_op_builder.cc``): LOCAL_RESPONSE_NORMALIZATION."""

from __future__ import annotations

from mobile_ep import NodeUnit, RuleContext, Support

from ._base import NnapiRule, rank_between


class LRNRule(NnapiRule):
    op_types = ("LRN",)
    min_feature_level = 2

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """4-D input."""
        return rank_between(ctx, unit, 4, 4)
