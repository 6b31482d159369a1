"""com.microsoft QLinear ops (ORT ``binary_op_builder.cc``, ``unary_op_builder.cc``, ``pool_op_builder.cc``):
quantized ADD, MUL, LOGISTIC and AVERAGE_POOL_2D.  (ai.onnx QLinearConv and QLinearMatMul live in conv.py and
matmul.py; com.microsoft QLinearConv is rejected there.)"""

from __future__ import annotations

from mobile_ep import NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule
from ._quant import check_quantized_io, check_scale_and_zero_point, unit_inputs, unit_outputs
from .binary import check_binary_ranks, check_quantized_binary_io, emit_binary
from .pool import check_pool, check_pool_io, emit_pool


class QLinearBinaryRule(NnapiRule):
    domain = "com.microsoft"
    op_types = ("QLinearAdd", "QLinearMul")
    dtype_doc = ""

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        return check_quantized_binary_io(unit, ctx)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """A, B and C uint8 (u8u8) with constant per-tensor scales and zero points; A and B rank ≤4."""
        return check_binary_ranks(unit, ctx)

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        emit_binary(unit, b)


class QLinearSigmoidRule(NnapiRule):
    domain = "com.microsoft"
    op_types = ("QLinearSigmoid",)
    dtype_doc = ""

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        result = check_quantized_io(unit, ctx, (0,))
        return check_quantized_io(unit, ctx, (0,), output=True) if result else result

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """X and Y uint8 with constant per-tensor scale/zero point; Y scale 1/256 and zero point 0."""
        return check_scale_and_zero_point(unit_outputs(unit)[0], ctx, "output", 1.0 / 256, 0)

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        x = b.get(unit_inputs(unit)[0], "any")
        y = b.new(unit_outputs(unit)[0], x.perm)
        b.op(OperationCode.LOGISTIC, [x.index], [y.index])


class QLinearAveragePoolRule(NnapiRule):
    domain = "com.microsoft"
    op_types = ("QLinearAveragePool",)
    dtype_doc = ""
    min_feature_level = 2
    nchw_feature_level = True

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        return check_pool_io(self, unit, ctx)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """X and Y uint8 per-tensor with equal scale and zero point; 4-D; 2-D kernel; count_include_pad=0,
        ceil_mode=0, dilations 1."""
        return check_pool(unit, ctx)

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        if attr(unit.target, "channels_last", 0):
            raise b.fail("channels_last=1 is not lowered")
        emit_pool(unit, ctx, b)
