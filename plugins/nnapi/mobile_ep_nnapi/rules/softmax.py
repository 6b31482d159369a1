"""Softmax, plain or as a QDQ unit (ORT ``softmax_op_builder.cc``): SOFTMAX (+ RESHAPE before opset 13)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr

from ._base import NnapiRule, input_value, rank_between
from ._quant import check_quantized_io, check_scale_and_zero_point, unit_outputs


class SoftmaxRule(NnapiRule):
    op_types = ("Softmax",)
    qdq_op_types = frozenset({"Softmax"})
    min_feature_level = 2

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        if unit.kind != "qdq":
            return super().check_io(unit, ctx)
        result = check_quantized_io(unit, ctx, (0,))
        if result:
            result = check_quantized_io(unit, ctx, (0,), output=True)
        if result:
            # NNAPI's quantized SOFTMAX produces scale 1/256, zero point 0
            result = check_scale_and_zero_point(unit_outputs(unit)[0], ctx, "output", 1.0 / 256, 0)
        return result

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Opset 13+: input rank ≤4, and below feature level 3 rank 2 or 4 with axis the last dim (an absent axis
        counts as 1, as in ORT); before opset 13 the input is coerced to 2-D. QDQ unit: output scale 1/256, zero
        point 0."""
        if ctx.node_opset(unit.target) < 13:
            return SUPPORTED
        result = rank_between(ctx, unit, 0, 4)
        if not result:
            return result
        rank = ctx.rank(input_value(unit, 0)) or 0
        axis = attr(unit.target, "axis", 1)
        if axis < 0:
            axis += rank
        if ctx.options.feature_level < 3:
            api = ctx.options.api_level
            if rank not in (2, 4):
                return Support.no(f"input rank {rank}: below feature level 3 (API 29; target is API {api}) "
                                  "only rank 2 or 4 is supported")
            if axis != rank - 1:
                return Support.no(f"axis {axis} is not the last dim: below feature level 3 (API 29; target is "
                                  f"API {api}) only the last axis is supported")
        return SUPPORTED
