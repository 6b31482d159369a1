"""Max and Min (ORT ``minmax_op_builder.cc``): MAXIMUM, MINIMUM."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support

from ._base import NnapiRule, input_count


class MinMaxRule(NnapiRule):
    op_types = ("Max", "Min")
    min_feature_level = 3
    # opset 5 and below have the consumed_inputs attribute
    min_opset = 6

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Exactly 2 inputs."""
        count = input_count(unit)
        if count != 2:
            return Support.no(f"has {count} inputs; exactly 2 are supported")
        return SUPPORTED
