"""ReduceMean, the only reduction NNAPI's EP takes (ORT ``reduction_op_builder.cc``): MEAN."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr

from ._base import NnapiRule, constant_input, input_value, rank_between


class ReduceMeanRule(NnapiRule):
    op_types = ("ReduceMean",)
    min_feature_level = 2

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input rank 1–4; axes (input 1, opset 18+) a constant initializer when given; opset 18+
        with noop_with_empty_axes=1 rejected."""
        result = rank_between(ctx, unit, 1, 4)
        if not result:
            return result
        if input_value(unit, 1) is not None:
            result = constant_input(ctx, unit, 1, "axes")
            if not result:
                return result
        if ctx.node_opset(unit.target) >= 18 and attr(unit.target, "noop_with_empty_axes", 0) != 0:
            return Support.no("noop_with_empty_axes=1 is not supported (opset 18+)")
        return SUPPORTED
