"""BatchNormalization (ORT ``batch_norm_op_builder.cc``)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder, numpy_for_mil

from ._base import CoreMLRule, initializer_value, is_initializer


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

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        dtype = b.np_dtype(x)
        scale, bias, mean, var = (numpy_for_mil(initializer_value(ctx, v)).astype(dtype).reshape(-1)
                                  for v in node.inputs[1:5])
        b.set(y, b.mb.batch_norm(x=b.var(x), mean=mean, variance=var, gamma=scale, beta=bias,
                                 epsilon=b.scalar(attr(node, "epsilon", 1e-5), x), name=b.name(y)))
