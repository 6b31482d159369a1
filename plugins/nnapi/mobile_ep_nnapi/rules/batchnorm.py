"""BatchNormalization (ORT ``batchnorm_op_builder.cc``): precomputed MUL + ADD."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import FuseCode, OperandCode, OperationCode

from ._base import NnapiRule, constant_input, rank_between


class BatchNormalizationRule(NnapiRule):
    op_types = ("BatchNormalization",)
    # opset 6 and below have unsupported attributes
    min_opset = 7

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """One output (inference mode); input rank ≤4; spatial=1; scale, B, mean and var constant initializers."""
        outputs = len(unit.target.outputs)
        if outputs != 1:
            return Support.no(f"has {outputs} outputs (training mode); export the model in inference mode")
        result = rank_between(ctx, unit, 0, 4)
        if not result:
            return result
        if attr(unit.target, "spatial", 1) != 1:
            return Support.no("spatial=0 (non-spatial) is not supported")
        for index, name in ((1, "scale"), (2, "B"), (3, "mean"), (4, "var")):
            result = constant_input(ctx, unit, index, name)
            if not result:
                return result
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """MUL by scale/sqrt(var+eps), ADD of B - mean·that (precomputed), in the input's layout."""
        node = unit.target
        scale, bias, mean, var = (np.asarray(ctx.constant(node.inputs[i]), dtype=np.float64) for i in (1, 2, 3, 4))
        multiplier = scale / np.sqrt(var + float(attr(node, "epsilon", 1e-5)))
        shift = bias - mean * multiplier
        x_value = node.inputs[0]
        rank = b.rank(x_value)
        x = b.get(x_value, b.preferred(x_value))
        shape = [1] * rank
        position = x.perm.index(1) if rank >= 2 else 0
        shape[position] = multiplier.size
        dims = b.model.operands[x.index].dims
        scaled = b.scratch(OperandCode.TENSOR_FLOAT32, dims)
        b.op(OperationCode.MUL, [x.index, b.constant(multiplier.reshape(shape).astype(np.float32), 3),
                                 b.i32(FuseCode.NONE)], [scaled])
        y, fuse = b.new_fused(node.outputs[0], x.perm)
        b.op(OperationCode.ADD, [scaled, b.constant(shift.reshape(shape).astype(np.float32), 3), fuse], [y.index])
