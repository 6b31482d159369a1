"""Elu (ORT ``elu_op_builder.cc``): ELU."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support

from ._base import NnapiRule


class EluRule(NnapiRule):
    op_types = ("Elu",)
    min_feature_level = 4
    # Elu-1 has the consumed_inputs attribute
    min_opset = 6

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Nothing beyond the common checks."""
        return SUPPORTED
