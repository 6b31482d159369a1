"""PRelu (ORT ``binary_op_builder.cc``): PRELU."""

from __future__ import annotations

from mobile_ep import NodeUnit, RuleContext, Support

from ._base import NnapiRule
from .binary import check_binary_ranks, emit_binary


class PReluRule(NnapiRule):
    op_types = ("PRelu",)
    min_feature_level = 3

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """X and slope rank ≤4."""
        return check_binary_ranks(unit, ctx)

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        emit_binary(unit, b)
