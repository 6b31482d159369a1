"""BatchNormalization (ORT ``batch_norm_op_builder.cc``)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr

from ._base import CoreMLRule, is_initializer


class BatchNormalization(CoreMLRule):
    op_types = ("BatchNormalization",)
    min_opset = 7

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """One output (inference mode); 4-D input; spatial=1; scale, B, mean and var initializers."""
        node = unit.target
        if len(node.outputs) != 1:
            return Support.no(f"{len(node.outputs)} outputs (training mode); export the model for inference")
        rank = ctx.rank(node.inputs[0])
        if rank != 4:
            return Support.no(f"rank-{rank} input; ORT takes 4-D only")
        if attr(node, "spatial", 1) != 1:
            return Support.no("spatial=0 (per-activation statistics) is not supported")
        for index, name in ((1, "scale"), (2, "B"), (3, "mean"), (4, "var")):
            value = node.inputs[index] if index < len(node.inputs) else None
            if not is_initializer(ctx, value):
                return Support.no(f"{name} (input {index}) is not an initializer")
        return SUPPORTED
