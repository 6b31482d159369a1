"""Slice (ORT ``slice_op_builder.cc``): SLICE or STRIDED_SLICE."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support

from ._base import NnapiRule, constant_input, input_count, input_value, rank_between


class SliceRule(NnapiRule):
    op_types = ("Slice",)
    min_feature_level = 2
    # Slice-1 takes starts/ends as attributes
    min_opset = 10

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input rank ≤4 without zero dims; starts, ends (and axes, steps when given) constant initializers."""
        result = rank_between(ctx, unit, 0, 4)
        if not result:
            return result
        shape = ctx.static_shape(input_value(unit, 0)) or ()
        if 0 in shape:
            return Support.no(f"input 0 has a zero dim {list(shape)}")
        names = ("starts", "ends", "axes", "steps")
        for index, name in enumerate(names, start=1):
            if index > 2 and input_count(unit) <= index:
                break
            result = constant_input(ctx, unit, index, name)
            if not result:
                return result
        return SUPPORTED
