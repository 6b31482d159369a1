"""Reshape, plain or as a QDQ unit (ORT ``reshape_op_builder.cc``): RESHAPE."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr

from ._base import NnapiRule, constant_input, input_value, rank_between
from ._quant import check_quantized_io


class ReshapeRule(NnapiRule):
    op_types = ("Reshape",)
    qdq_op_types = frozenset({"Reshape"})
    # opset 4 and below take the new shape as an attribute
    min_opset = 5

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        if unit.kind != "qdq":
            return super().check_io(unit, ctx)
        result = check_quantized_io(unit, ctx, (0,))
        return check_quantized_io(unit, ctx, (0,), output=True) if result else result

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Shape a constant initializer; input rank 1–4; a 0 in the shape is rejected with allowzero=1 or where
        the input dim is 0."""
        result = constant_input(ctx, unit, 1, "shape")
        if not result:
            return result
        result = rank_between(ctx, unit, 1, 4)
        if not result:
            return result
        input_shape = ctx.static_shape(input_value(unit, 0)) or ()
        new_shape = np.asarray(ctx.constant(input_value(unit, 1))).reshape(-1)
        allow_zero = attr(unit.target, "allowzero", 0) == 1
        for index, dim in enumerate(new_shape.tolist()):
            if dim != 0:
                continue
            if index < len(input_shape) and input_shape[index] == 0:
                return Support.no(f"shape[{index}] is 0 (copy the input dim) but the input dim is 0")
            if allow_zero:
                return Support.no(f"shape[{index}] is 0 with allowzero=1 (an empty dim) is not supported")
        return SUPPORTED
