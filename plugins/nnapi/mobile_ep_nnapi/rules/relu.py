"""Relu (ORT ``relu_op_builder.cc``): RELU, or fused into the producer's activation."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support

from ._base import NnapiRule


class ReluRule(NnapiRule):
    op_types = ("Relu",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Nothing beyond the common checks."""
        return SUPPORTED
