"""Clip (ORT ``clip_op_builder.cc``): RELU6 or RELU1, or fused into the producer."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule, extended, needs_feature_level

_LOWEST = float(np.finfo(np.float32).min)
_HIGHEST = float(np.finfo(np.float32).max)


def clip_bounds(unit: NodeUnit, ctx: RuleContext) -> tuple[float, float] | Support:
    """(min, max) as float32 values, or the reason they are not known."""
    node = unit.target
    if ctx.node_opset(node) < 11:  # Clip-1/6 take min and max as attributes
        return float(np.float32(attr(node, "min", _LOWEST))), float(np.float32(attr(node, "max", _HIGHEST)))
    bounds = [_LOWEST, _HIGHEST]
    for index, name in ((1, "min"), (2, "max")):
        value = node.inputs[index] if index < len(node.inputs) else None
        if value is None:
            continue
        array = ctx.constant(value)
        if array is None:
            return Support.no(f"{name} (input {index}) is not a constant initializer")
        if array.size == 0:
            return Support.no(f"{name} (input {index}) is empty")
        bounds[index - 1] = float(np.float32(np.asarray(array).reshape(-1)[0]))
    return bounds[0], bounds[1]


class ClipRule(NnapiRule):
    op_types = ("Clip",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """min/max constant (attributes before opset 11) and equal to (0, 6) or (-1, 1)."""
        bounds = clip_bounds(unit, ctx)
        if isinstance(bounds, Support):
            return bounds
        if bounds in ((0.0, 6.0), (-1.0, 1.0)):
            return SUPPORTED
        if extended(ctx):  # compile_ops=extended: MAXIMUM/MINIMUM with constants
            return needs_feature_level(ctx, 3, "Clip to other bounds (MAXIMUM/MINIMUM)")
        low, high = (f"{b:g}" if abs(b) < 1e30 else ("-inf" if b < 0 else "inf") for b in bounds)
        return Support.no(f"min/max ({low}, {high}) is not supported; only (0, 6) → RELU6 and (-1, 1) → RELU1")

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """RELU6 or RELU1 (or fused into the producer); other bounds: MAXIMUM then MINIMUM."""
        bounds = clip_bounds(unit, ctx)
        assert not isinstance(bounds, Support)
        x = b.get(unit.target.inputs[0], "any")
        y = b.new(unit.target.outputs[0], x.perm)
        if bounds == (0.0, 6.0):
            b.op(OperationCode.RELU6, [x.index], [y.index])
        elif bounds == (-1.0, 1.0):
            b.op(OperationCode.RELU1, [x.index], [y.index])
        else:
            low, high = bounds
            dims = b.model.operands[y.index].dims
            current = x.index
            if low > _LOWEST:
                raised = b.scratch(b.model.operands[x.index].type, dims) if high < _HIGHEST else y.index
                b.op(OperationCode.MAXIMUM, [current, b.constant(np.float32([low]), 3)], [raised])
                current = raised
            if high < _HIGHEST or current == x.index:
                b.op(OperationCode.MINIMUM, [current, b.constant(np.float32([high]), 3)], [y.index])
