"""Reductions beyond ReduceMean (compile_ops=extended only): ReduceMax/Min/Sum/Prod (REDUCE_*, feature level
3), ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp (chains ending in REDUCE_SUM)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperationCode as Op

from ._base import NnapiRule, constant_input, input_value, rank_between
from ._chain import Chain
from .reducemean import reduction_axes

COMPILE_ONLY = True

_DIRECT = {"ReduceMax": Op.REDUCE_MAX, "ReduceMin": Op.REDUCE_MIN, "ReduceSum": Op.REDUCE_SUM,
           "ReduceProd": Op.REDUCE_PROD}


class ReduceRule(NnapiRule):
    op_types = ("ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2",
                "ReduceLogSum", "ReduceLogSumExp")
    min_feature_level = 3

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input rank 1–4 without zero dims; axes (input 1) a constant initializer when given;
        noop_with_empty_axes=1 rejected."""
        result = rank_between(ctx, unit, 1, 4)
        if not result:
            return result
        shape = ctx.static_shape(input_value(unit, 0)) or ()
        if 0 in shape:
            return Support.no(f"input 0 has a zero dim {list(shape)}")
        if input_value(unit, 1) is not None:
            result = constant_input(ctx, unit, 1, "axes")
            if not result:
                return result
        if attr(unit.target, "noop_with_empty_axes", 0) != 0:
            return Support.no("noop_with_empty_axes=1 is not supported")
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        node = unit.target
        op = unit.op_type
        x_value, out = node.inputs[0], node.outputs[0]
        chain = Chain(b, x_value)
        if op in ("ReduceSumSquare", "ReduceL2"):
            chain.binary(Op.MUL, chain.current)
        elif op == "ReduceL1":
            chain.unary(Op.ABS)
        elif op == "ReduceLogSumExp":
            chain.unary(Op.EXP)
        code = _DIRECT.get(op, Op.REDUCE_SUM)
        rank = b.rank(x_value)
        axes = reduction_axes(unit, ctx, rank)
        keep = bool(attr(node, "keepdims", 1))
        operand_axes = [chain.perm.index(a) for a in axes]
        if keep:
            perm = chain.perm
        else:
            remaining = [p for p in chain.perm if p not in axes]
            order = sorted(remaining)
            perm = tuple(order.index(p) for p in remaining)
        tail = {"ReduceL2": Op.SQRT, "ReduceLogSum": Op.LOG, "ReduceLogSumExp": Op.LOG}.get(op)
        y = b.new(out, perm)
        if tail is None:
            b.op(code, [chain.current, b.i32s(operand_axes), b.flag(keep)], [y.index])
            return
        reduced = b.scratch(b.model.operands[y.index].type, b.model.operands[y.index].dims)
        b.op(code, [chain.current, b.i32s(operand_axes), b.flag(keep)], [reduced])
        b.op(tail, [reduced], [y.index])
