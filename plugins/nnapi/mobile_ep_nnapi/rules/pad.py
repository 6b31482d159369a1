"""Pad (ORT ``pad_op_builder.cc``): PAD_V2."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr

from ._base import NnapiRule, constant_input, input_count, input_value, rank_between


class PadRule(NnapiRule):
    op_types = ("Pad",)
    min_feature_level = 3
    # before Pad-11 pads and value are attributes
    min_opset = 11

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input rank 1–4 without zero dims; mode constant; pads a constant initializer with no
        negative values; constant_value (when given) a constant initializer."""
        result = rank_between(ctx, unit, 1, 4)
        if not result:
            return result
        shape = ctx.static_shape(input_value(unit, 0)) or ()
        if 0 in shape:
            return Support.no(f"input 0 has a zero dim {list(shape)}")
        mode = attr(unit.target, "mode", "constant")
        if mode != "constant":
            return Support.no(f"mode {mode} is not supported (constant only)")
        result = constant_input(ctx, unit, 1, "pads")
        if not result:
            return result
        pads = np.asarray(ctx.constant(input_value(unit, 1))).reshape(-1)
        if np.any(pads < 0):
            return Support.no(f"pads {pads.tolist()} has negative values (cropping is not supported)")
        if input_count(unit) > 2:
            return constant_input(ctx, unit, 2, "constant_value")
        return SUPPORTED
