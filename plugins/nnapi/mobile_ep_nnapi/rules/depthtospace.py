"""DepthToSpace (ORT ``depthtospace_op_builder.cc``): DEPTH_TO_SPACE."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule, needs_feature_level, rank_between


class DepthToSpaceRule(NnapiRule):
    op_types = ("DepthToSpace",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """4-D input; feature level 3 with use_nchw; opset 11+: mode DCR."""
        result = rank_between(ctx, unit, 4, 4)
        if not result:
            return result
        if ctx.options.use_nchw:
            result = needs_feature_level(ctx, 3, "NCHW layout (use_nchw)")
            if not result:
                return result
        if ctx.node_opset(unit.target) >= 11:
            mode = attr(unit.target, "mode", "DCR")
            if mode != "DCR":
                return Support.no(f"mode {mode} is not supported (DCR only)")
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """DEPTH_TO_SPACE in NHWC (ONNX's DCR order is NNAPI's)."""
        layout = "onnx" if b.use_nchw else "nhwc"
        x = b.get(unit.target.inputs[0], layout)
        y = b.new(unit.target.outputs[0], layout)
        b.op(OperationCode.DEPTH_TO_SPACE, [x.index, b.i32(attr(unit.target, "blocksize")), *b.layout_flag(b.use_nchw)],
             [y.index])
