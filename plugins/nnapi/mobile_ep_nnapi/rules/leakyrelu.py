"""LeakyRelu (ORT ``leakyrelu_op_builder.cc``): LESS + MUL + SELECT."""

from __future__ import annotations

import numpy as np

from mobile_ep import NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import FuseCode, OperandCode, OperationCode

from ._base import NnapiRule, rank_between


class LeakyReluRule(NnapiRule):
    op_types = ("LeakyRelu",)
    # LeakyRelu-1 has the consumed_inputs attribute
    min_opset = 6

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input rank 1–4 (ORT declares no feature level, although SELECT and LESS are FL3 ops)."""
        return rank_between(ctx, unit, 1, 4)

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """PRELU with a constant slope (feature level 3); below it RELU(x)·(1−alpha) + alpha·x (FL1 ops)."""
        alpha = float(attr(unit.target, "alpha", 0.01))
        x = b.get(unit.target.inputs[0], "any")
        y = b.new(unit.target.outputs[0], x.perm)
        if b.feature_level >= 3:
            b.op(OperationCode.PRELU, [x.index, b.constant(np.float32([alpha]), OperandCode.TENSOR_FLOAT32)], [y.index])
            return
        dims = b.model.operands[y.index].dims
        none = b.i32(FuseCode.NONE)
        relu = b.scratch(OperandCode.TENSOR_FLOAT32, dims)
        b.op(OperationCode.RELU, [x.index], [relu])
        scaled_relu = b.scratch(OperandCode.TENSOR_FLOAT32, dims)
        b.op(OperationCode.MUL, [relu, b.constant(np.float32([1 - alpha]), OperandCode.TENSOR_FLOAT32), none],
             [scaled_relu])
        scaled = b.scratch(OperandCode.TENSOR_FLOAT32, dims)
        b.op(OperationCode.MUL, [x.index, b.constant(np.float32([alpha]), OperandCode.TENSOR_FLOAT32), none], [scaled])
        b.op(OperationCode.ADD, [scaled_relu, scaled, none], [y.index])
