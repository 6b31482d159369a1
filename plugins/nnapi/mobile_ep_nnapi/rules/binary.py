"""Elementwise binary ops (ORT ``binary_op_builder.cc``): ADD, SUB, MUL, DIV, POW, with fused activations."""

from __future__ import annotations

from mobile_ep import SUPPORTED, DataType, NodeUnit, RuleContext, Support

from ._base import NnapiRule, input_value, rank_between
from ._quant import check_binary_quantized_types, check_quantized_io, dtype_name, quantized_op_type

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
