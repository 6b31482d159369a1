"""GridSample (ORT ``gridsample_op_builder.cc``)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr

from ._base import CoreMLRule


class GridSample(CoreMLRule):
    op_types = ("GridSample",)
    neuralnetwork = False

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """4-D input; mode linear (bilinear); not padding_mode=reflection with align_corners=0."""
        node = unit.target
        rank = ctx.rank(node.inputs[0])
        if rank != 4:
            return Support.no(f"rank-{rank} input; ORT takes 4-D only")
        # ORT's mode check also lets through "zeros", a padding mode no valid GridSample has as mode.
        mode = attr(node, "mode", "linear")
        if mode not in ("linear", "bilinear", "zeros"):
            return Support.no(f"mode {mode}; Core ML's resample takes linear (bilinear) only")
        if attr(node, "padding_mode", "zeros") == "reflection" and attr(node, "align_corners", 0) == 0:
            return Support.no(
                "padding_mode=reflection with align_corners=0 gives wrong results on Core ML; ORT rejects it"
            )
        return SUPPORTED
