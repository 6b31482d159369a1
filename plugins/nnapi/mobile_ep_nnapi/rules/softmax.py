"""Softmax, plain or as a QDQ unit (ORT ``softmax_op_builder.cc``): SOFTMAX (+ RESHAPE before opset 13)."""

from __future__ import annotations

import math

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule, input_value, rank_between
from ._quant import check_quantized_io, check_scale_and_zero_point, unit_inputs, unit_outputs


def emit_softmax(unit: NodeUnit, ctx: RuleContext, b, code: OperationCode) -> None:
    """SOFTMAX (or LOG_SOFTMAX) with beta 1 over an axis of the input's layout (SOFTMAX's axis argument needs
    feature level 3 unless it is the last axis); before opset 13 the input is coerced to 2-D by RESHAPE."""
    x_io, out = unit_inputs(unit)[0], unit_outputs(unit)[0].value
    rank = b.rank(x_io.value)
    opset = ctx.node_opset(unit.target)
    axis = int(attr(unit.target, "axis", 1 if opset < 13 else -1)) % max(rank, 1)

    def axis_args(operand_axis: int, operand_rank: int) -> list[int]:
        if code == OperationCode.SOFTMAX and operand_axis == operand_rank - 1:
            return []
        b.require(3, "a softmax over an axis that is not the last")
        return [b.i32(operand_axis)]

    if opset < 13 and axis != rank - 1:
        shape = b.shape(x_io.value)
        rows, cols = math.prod(shape[:axis]), math.prod(shape[axis:])
        x = b.get(x_io, "onnx")
        flat = b.scratch(b.model.operands[x.index].type, (rows, cols), like=x.index)
        b.op(OperationCode.RESHAPE, [x.index, b.i32s([rows, cols])], [flat])
        y = b.new(out, "onnx")
        result = b.scratch(b.model.operands[y.index].type, (rows, cols), like=y.index)
        b.op(code, [flat, b.f32(1.0), *axis_args(1, 2)], [result])
        b.op(OperationCode.RESHAPE, [result, b.i32s(b.dims(shape, ()))], [y.index])
        return
    x = b.get(x_io, b.preferred(x_io.value))
    y = b.new(out, x.perm)
    b.op(code, [x.index, b.f32(1.0), *axis_args(x.perm.index(axis) if rank else 0, max(rank, 1))], [y.index])


class SoftmaxRule(NnapiRule):
    op_types = ("Softmax",)
    qdq_op_types = frozenset({"Softmax"})
    min_feature_level = 2

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        if unit.kind != "qdq":
            return super().check_io(unit, ctx)
        result = check_quantized_io(unit, ctx, (0,))
        if result:
            result = check_quantized_io(unit, ctx, (0,), output=True)
        if result:
            # NNAPI's quantized SOFTMAX produces scale 1/256, zero point 0
            result = check_scale_and_zero_point(unit_outputs(unit)[0], ctx, "output", 1.0 / 256, 0)
        return result

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Opset 13+: input rank ≤4, and below feature level 3 rank 2 or 4 with axis the last dim (an absent axis
        counts as 1, as in ORT); before opset 13 the input is coerced to 2-D. QDQ unit: output scale 1/256, zero
        point 0."""
        if ctx.node_opset(unit.target) < 13:
            return SUPPORTED
        result = rank_between(ctx, unit, 0, 4)
        if not result:
            return result
        rank = ctx.rank(input_value(unit, 0)) or 0
        axis = attr(unit.target, "axis", 1)
        if axis < 0:
            axis += rank
        if ctx.options.feature_level < 3:
            api = ctx.options.api_level
            if rank not in (2, 4):
                return Support.no(f"input rank {rank}: below feature level 3 (API 29; target is API {api}) "
                                  "only rank 2 or 4 is supported")
            if axis != rank - 1:
                return Support.no(f"axis {axis} is not the last dim: below feature level 3 (API 29; target is "
                                  f"API {api}) only the last axis is supported")
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        emit_softmax(unit, ctx, b, OperationCode.SOFTMAX)
