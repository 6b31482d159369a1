"""LRN (ORT ``LRN_op_builder.cc``; the builder has no ML Program support)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import CoreMLRule


class LRN(CoreMLRule):
    op_types = ("LRN",)
    mlprogram = False

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input rank 3 or 4 (Core ML treats further leading dims as batch)."""
        rank = ctx.rank(unit.target.inputs[0])
        if rank not in (3, 4):
            return Support.no(
                f"input rank {rank}; Core ML treats extra leading dims as batch, so only rank 3 or 4 matches ONNX"
            )
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        b.set(y, b.mb.local_response_norm(
            x=b.var(x), size=int(attr(node, "size")), alpha=b.scalar(attr(node, "alpha", 1e-4), x),
            beta=b.scalar(attr(node, "beta", 0.75), x), k=b.scalar(attr(node, "bias", 1.0), x), name=b.name(y)))
