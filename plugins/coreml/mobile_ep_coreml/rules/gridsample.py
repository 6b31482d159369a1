"""GridSample (ORT ``gridsample_op_builder.cc``)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

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

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, grid, y = node.inputs[0], node.inputs[1], node.outputs[0]
        padding = {"zeros": "constant", "border": "border", "reflection": "reflection"}[
            attr(node, "padding_mode", "zeros")]
        b.set(y, b.mb.resample(x=b.var(x), coordinates=b.var(grid), sampling_mode="bilinear",
                               padding_mode=padding, padding_value=b.scalar(0.0, x),
                               coordinates_mode="normalized_minus_one_to_one",
                               align_corners=bool(attr(node, "align_corners", 0)), name=b.name(y)))
