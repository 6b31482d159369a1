"""Gather (ORT ``gather_op_builder.cc``): GATHER."""

from __future__ import annotations

from mobile_ep import SUPPORTED, DataType, NodeUnit, RuleContext, Support

from ._base import NnapiRule, constant_input, input_value, rank_between


class GatherRule(NnapiRule):
    op_types = ("Gather",)
    min_feature_level = 3

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Data rank 1–4 without zero dims; indices int32, or any type as a constant initializer."""
        result = rank_between(ctx, unit, 1, 4, what="data (input 0)")
        if not result:
            return result
        shape = ctx.static_shape(input_value(unit, 0)) or ()
        if 0 in shape:
            return Support.no(f"data (input 0) has a zero dim {list(shape)}")
        indices = input_value(unit, 1)
        dtype = ctx.dtype(indices)
        if dtype is None:
            return Support.no("indices (input 1) has no element type")
        if dtype != DataType.INT32:
            result = constant_input(ctx, unit, 1, "indices")
            if not result:
                return Support.no(f"{result.reason}; only int32 indices may be computed at run time")
        return SUPPORTED
