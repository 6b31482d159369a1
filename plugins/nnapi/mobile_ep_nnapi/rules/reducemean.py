"""ReduceMean, the only reduction NNAPI's EP takes (ORT ``reduction_op_builder.cc``): MEAN."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule, constant_input, input_value, rank_between


def reduction_axes(unit: NodeUnit, ctx: RuleContext, rank: int) -> list[int]:
    """The reduced ONNX axes (attribute before opset 18 — 13 for ReduceSum —, else input 1; none = all)."""
    node = unit.target
    axes = attr(node, "axes")
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = np.asarray(ctx.constant(node.inputs[1])).reshape(-1).tolist()
    if not axes:
        return list(range(rank))
    return sorted({int(a) % rank for a in axes})


def emit_reduction(unit: NodeUnit, ctx: RuleContext, b, code: OperationCode, keep_operand) -> None:
    """A reduction in the input's layout: axes mapped through it; without keepdims the output's layout is
    what remains of the input's (often ONNX order again)."""
    node = unit.target
    x_value, out = node.inputs[0], node.outputs[0]
    rank = b.rank(x_value)
    axes = reduction_axes(unit, ctx, rank)
    keep = bool(attr(node, "keepdims", 1))
    x = b.get(x_value, b.preferred(x_value))
    operand_axes = [x.perm.index(a) for a in axes]
    if keep:
        perm = x.perm
    else:
        remaining = [p for p in x.perm if p not in axes]
        order = sorted(remaining)
        perm = tuple(order.index(p) for p in remaining)
    y = b.new(out, perm)
    b.op(code, [x.index, b.i32s(operand_axes), keep_operand(keep)], [y.index])


class ReduceMeanRule(NnapiRule):
    op_types = ("ReduceMean",)
    min_feature_level = 2

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input rank 1–4; axes (input 1, opset 18+) a constant initializer when given; opset 18+
        with noop_with_empty_axes=1 rejected."""
        result = rank_between(ctx, unit, 1, 4)
        if not result:
            return result
        if input_value(unit, 1) is not None:
            result = constant_input(ctx, unit, 1, "axes")
            if not result:
                return result
        if ctx.node_opset(unit.target) >= 18 and attr(unit.target, "noop_with_empty_axes", 0) != 0:
            return Support.no("noop_with_empty_axes=1 is not supported (opset 18+)")
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        emit_reduction(unit, ctx, b, OperationCode.MEAN, lambda keep: b.i32(int(keep)))
