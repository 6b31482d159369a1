"""Sum and Mean of N inputs (compile_ops=extended only): a chain of ADD (Mean: then MUL by 1/N)."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support
from mobile_ep_nnapi.nnapi import FuseCode, OperandCode, OperationCode

from ._base import NnapiRule, rank_between

COMPILE_ONLY = True


class SumRule(NnapiRule):
    op_types = ("Sum", "Mean")
    min_opset = 6

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Every input rank ≤4."""
        for index in range(len(unit.target.inputs)):
            result = rank_between(ctx, unit, 0, 4, index)
            if not result:
                return result
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        inputs, out = list(unit.target.inputs), unit.target.outputs[0]
        if len(inputs) == 1 and unit.op_type == "Sum":
            b.alias(out, inputs[0])
            return
        perm = b.elementwise_layout(inputs, out)
        shape = b.shape(out)
        identity = perm == tuple(range(len(perm)))
        current = b.broadcast(inputs[0], perm).index
        steps = len(inputs) - 1 + (unit.op_type == "Mean")
        for position in range(1, steps + 1):
            last = position == steps
            if position < len(inputs):
                partial = tuple(np.broadcast_shapes(*(b.shape(v) for v in inputs[:position + 1])))
                operand, code = b.broadcast(inputs[position], perm).index, OperationCode.ADD
            else:
                partial = tuple(shape)
                operand = b.constant(np.float32([1.0 / len(inputs)]), OperandCode.TENSOR_FLOAT32)
                code = OperationCode.MUL
            if last:
                target = b.new(out, perm).index
            else:
                if not identity:
                    partial = (1,) * (len(shape) - len(partial)) + partial
                target = b.scratch(OperandCode.TENSOR_FLOAT32, b.dims(partial, perm if len(partial) == len(perm) else ()))
            b.op(code, [current, operand, b.i32(FuseCode.NONE)], [target])
            current = target
