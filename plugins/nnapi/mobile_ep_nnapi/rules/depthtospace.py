"""DepthToSpace (ORT ``depthtospace_op_builder.cc``): DEPTH_TO_SPACE."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr

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
