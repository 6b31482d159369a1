"""SpaceToDepth (compile_ops=extended only): SPACE_TO_DEPTH in NHWC."""

from __future__ import annotations

from mobile_ep import NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule, rank_between

COMPILE_ONLY = True


class SpaceToDepthRule(NnapiRule):
    op_types = ("SpaceToDepth",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """4-D input."""
        return rank_between(ctx, unit, 4, 4)

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        layout = "onnx" if b.use_nchw else "nhwc"
        x = b.get(unit.target.inputs[0], layout)
        y = b.new(unit.target.outputs[0], layout)
        b.op(OperationCode.SPACE_TO_DEPTH, [x.index, b.i32(attr(unit.target, "blocksize")), *b.layout_flag(b.use_nchw)],
             [y.index])
