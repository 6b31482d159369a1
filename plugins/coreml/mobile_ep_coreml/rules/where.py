"""Where (ORT ``where_op_builder.cc``), lowered to Core ML's select."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support
from mobile_ep_coreml.mil import MILBuilder

from ._base import BOOL, FLOAT, FLOAT16, CoreMLRule, check_type, type_name


class Where(CoreMLRule):
    op_types = ("Where",)
    neuralnetwork = False

    def check_types(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """condition bool; X and Y both float32 or both float16."""
        node = unit.target
        if any(ctx.dtype(v) is None for v in node.inputs[:3]):
            return Support.no("an input has no known element type")
        result = check_type(ctx, node.inputs[0], {BOOL}, "condition (input 0)", "Core ML's select")
        if not result:
            return result
        x, y = ctx.dtype(node.inputs[1]), ctx.dtype(node.inputs[2])
        if x not in (FLOAT, FLOAT16) or x != y:
            return Support.no(
                f"X is {type_name(x)} and Y {type_name(y)}; Core ML's select takes both float32 or both float16"
            )
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        """Core ML's select takes its output shape from X and Y alone: where only the condition has the output's
        shape (Where(mask, 0, -inf) of two scalars), a constant X or Y is given that shape."""
        node = unit.target
        y = node.outputs[0]
        a, other = b.var(node.inputs[1]), b.var(node.inputs[2])
        shape = ctx.static_shape(y)
        if shape is not None:
            small = [np.ndim(v) if isinstance(v, np.ndarray) else len(v.shape) for v in (a, other)]
            if max(small) < len(shape) or not any(
                    (v.shape if isinstance(v, np.ndarray) else tuple(v.shape)) == tuple(shape) for v in (a, other)):
                if isinstance(a, np.ndarray):
                    a = np.ascontiguousarray(np.broadcast_to(a, shape))
                elif isinstance(other, np.ndarray):
                    other = np.ascontiguousarray(np.broadcast_to(other, shape))
        b.set(y, b.mb.select(cond=b.var(node.inputs[0]), a=a, b=other, name=b.name(y)))
