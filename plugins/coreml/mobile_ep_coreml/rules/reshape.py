"""Reshape (ORT ``reshape_op_builder.cc``)."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import MAX_RANK, CoreMLRule, constant_value, reshape_target, shape_text


class Reshape(CoreMLRule):
    op_types = ("Reshape",)
    min_opset = 5  # before Reshape-5 the shape was an attribute
    trivial = True

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """shape a non-empty constant initializer with <= 5 dims; a static, non-scalar input shape; no 0
        in shape with allowzero=1."""
        node = unit.target
        new_shape = constant_value(ctx, node.inputs[1])
        if new_shape is None:
            return Support.no("shape (input 1) is not a constant initializer")
        new_shape = np.asarray(new_shape).reshape(-1)
        if new_shape.size == 0:
            return Support.no("shape (input 1) is empty")
        in_shape = ctx.static_shape(node.inputs[0])
        if in_shape is None:
            return Support.no(
                f"the input shape {shape_text(ctx, node.inputs[0])} is not static (fix it with --shape or --dim)"
            )
        if not in_shape:
            return Support.no("the input is a scalar")
        if new_shape.size > MAX_RANK:
            return Support.no(f"new shape has {new_shape.size} dims; Core ML takes rank <= {MAX_RANK}")
        if attr(node, "allowzero", 0) == 1 and (new_shape == 0).any():
            return Support.no("allowzero=1 with a 0 in shape; Core ML has no empty tensors")
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        """To the output's static shape: ONNX's 0 (copy the input dim unless allowzero) and -1 resolved."""
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        if ctx.static_shape(y) is not None:
            target = reshape_target(ctx, y)
        else:  # shape inference left the output unknown: resolve it from the constant shape
            in_shape = b.static_shape(x)
            requested = [int(v) for v in np.asarray(constant_value(ctx, node.inputs[1])).reshape(-1)]
            allow_zero = attr(node, "allowzero", 0) == 1
            target = [in_shape[i] if d == 0 and not allow_zero else d for i, d in enumerate(requested)]
        b.set(y, b.mb.reshape(x=b.var(x), shape=target, name=b.name(y)))
