"""Squeeze and Unsqueeze (ORT ``squeeze_op_builder.cc``, ``unsqueeze_op_builder.cc``): SQUEEZE, RESHAPE."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support

from ._base import NnapiRule, constant_input, input_count, rank_between
from .flatten import emit_reshape


def check_squeeze_like(unit: NodeUnit, ctx: RuleContext) -> Support:
    result = rank_between(ctx, unit, 1, 4)
    if not result:
        return result
    # from opset 13 the axes are input 1
    if ctx.node_opset(unit.target) > 12 and input_count(unit) > 1:
        return constant_input(ctx, unit, 1, "axes")
    return SUPPORTED


class SqueezeRule(NnapiRule):
    op_types = ("Squeeze",)
    min_feature_level = 2

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input rank 1–4; axes (opset 13+, when given) a constant initializer."""
        return check_squeeze_like(unit, ctx)

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """RESHAPE to the static output shape (what SQUEEZE computes, from feature level 1)."""
        emit_reshape(b, unit.target.inputs[0], unit.target.outputs[0])


class UnsqueezeRule(NnapiRule):
    op_types = ("Unsqueeze",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input rank 1–4; axes (opset 13+) a constant initializer."""
        return check_squeeze_like(unit, ctx)

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        emit_reshape(b, unit.target.inputs[0], unit.target.outputs[0])
