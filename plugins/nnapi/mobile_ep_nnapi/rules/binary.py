"""Elementwise binary ops (ORT ``binary_op_builder.cc``): ADD, SUB, MUL, DIV, POW, with fused activations."""

from __future__ import annotations

from mobile_ep import SUPPORTED, DataType, NodeUnit, RuleContext, Support
from mobile_ep_nnapi.nnapi import OperationCode as Op

from ._base import NnapiRule, input_value, rank_between
from ._quant import (
    check_binary_quantized_types,
    check_quantized_io,
    dtype_name,
    quantized_op_type,
    unit_inputs,
    unit_outputs,
)

#: NNAPI operation of each op, and whether it takes a fused-activation code.
BINARY_OPS = {"Add": (Op.ADD, True), "Sub": (Op.SUB, True), "Mul": (Op.MUL, True), "Div": (Op.DIV, True),
              "Pow": (Op.POW, False), "QLinearAdd": (Op.ADD, True), "QLinearMul": (Op.MUL, True),
              "Max": (Op.MAXIMUM, False), "Min": (Op.MINIMUM, False), "PRelu": (Op.PRELU, False)}


def emit_binary(unit: NodeUnit, b, op_type: str | None = None) -> None:
    """A broadcasting binary op in the inputs' layout (NHWC when they have it; lower-rank constants are
    broadcast on the host), with a following Relu/Clip folded in when the op takes a fused activation."""
    code, fuses = BINARY_OPS[op_type or unit.op_type]
    a_io, b_io = unit_inputs(unit)[:2]
    out = unit_outputs(unit)[0].value
    perm = b.elementwise_layout([a_io.value, b_io.value], out)
    a = b.broadcast(a_io, perm)
    c = b.broadcast(b_io, perm)
    if fuses:
        y, fuse = b.new_fused(out, perm)
        b.op(code, [a.index, c.index, fuse], [y.index])
    else:
        y = b.new(out, perm)
        b.op(code, [a.index, c.index], [y.index])

QUANTIZED_BINARY = frozenset({"QLinearAdd", "QLinearMul", "QDQAdd", "QDQMul"})


def check_quantized_binary_io(unit: NodeUnit, ctx: RuleContext) -> Support:
    """Input A uint8, B uint8 (int8 for a weight), output uint8, with constant per-tensor scale/zero point."""
    result = check_binary_quantized_types(unit, ctx)
    if result:
        result = check_quantized_io(unit, ctx, (0, 1))
    if result:
        result = check_quantized_io(unit, ctx, (0,), output=True)
    return result


def check_binary_ranks(unit: NodeUnit, ctx: RuleContext) -> Support:
    """Both inputs of rank ≤4."""
    for index in (0, 1):
        result = rank_between(ctx, unit, 0, 4, index)
        if not result:
            return result
    return SUPPORTED


class BinaryRule(NnapiRule):
    op_types = ("Add", "Sub", "Mul", "Div", "Pow")
    feature_levels = {"Sub": 2, "Div": 2, "Pow": 3}
    # opset 6 and below have broadcast attributes
    min_opset = 7
    qdq_op_types = frozenset({"Add", "Mul"})

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        if quantized_op_type(unit) in QUANTIZED_BINARY:
            return check_quantized_binary_io(unit, ctx)
        if unit.op_type == "Pow":
            a, b = ctx.dtype(input_value(unit, 0)), ctx.dtype(input_value(unit, 1))
            if a != DataType.FLOAT or b != a:
                return Support.no(f"inputs are {dtype_name(a)} and {dtype_name(b)}; both must be float32")
            return SUPPORTED
        return super().check_io(unit, ctx)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Both inputs rank ≤4; Pow: both inputs float32; QDQ Add/Mul unit with uint8 per-tensor
        inputs and output."""
        return check_binary_ranks(unit, ctx)

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        emit_binary(unit, b)
