"""DepthToSpace (ORT ``depthtospace_op_builder.cc``)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import FLOAT16, CoreMLRule, coreml_version, is_mlprogram


class DepthToSpace(CoreMLRule):
    op_types = ("DepthToSpace",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """NeuralNetwork: mode DCR only. ML Program: mode CRD needs a static input shape; DCR with a
        float16 input needs Core ML 7 (iOS 17)."""
        node = unit.target
        mode = attr(node, "mode", "DCR")
        if not is_mlprogram(ctx):
            if mode != "DCR":
                return Support.no(f"NeuralNetwork: mode {mode}; only DCR (use model_format=MLProgram)")
            return SUPPORTED
        if mode == "CRD" and ctx.static_shape(node.inputs[0]) is None:
            return Support.no("mode CRD needs a static input shape (ORT lowers it through reshapes)")
        if mode == "DCR" and coreml_version(ctx) < 7 and ctx.dtype(node.inputs[0]) == FLOAT16:
            return Support.no(
                "mode DCR with a float16 input needs Core ML 7 (deployment_target=iOS17 or later); "
                "Core ML 6 returns zeros"
            )
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        """DCR is Core ML's depth_to_space; CRD is its pixel_shuffle (PyTorch's order)."""
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        block = int(attr(node, "blocksize"))
        if attr(node, "mode", "DCR") == "CRD":
            b.set(y, b.mb.pixel_shuffle(x=b.var(x), upscale_factor=block, name=b.name(y)))
        else:
            b.set(y, b.mb.depth_to_space(x=b.var(x), block_size=block, name=b.name(y)))
