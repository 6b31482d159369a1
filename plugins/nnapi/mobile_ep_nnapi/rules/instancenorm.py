"""InstanceNormalization (compile_ops=extended only): INSTANCE_NORMALIZATION (feature level 3) with gamma 1 and
beta 0, then the per-channel scale and bias (MUL, ADD) NNAPI's scalar gamma/beta cannot express."""

from __future__ import annotations

import numpy as np

from mobile_ep import NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import FuseCode, OperandCode, OperationCode

from ._base import NnapiRule, constant_input, rank_between

COMPILE_ONLY = True


class InstanceNormalizationRule(NnapiRule):
    op_types = ("InstanceNormalization",)
    min_feature_level = 3
    min_opset = 6

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """4-D input; scale and B constant initializers."""
        result = rank_between(ctx, unit, 4, 4)
        for index, name in ((1, "scale"), (2, "B")):
            if result:
                result = constant_input(ctx, unit, index, name)
        return result

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        node = unit.target
        nchw = b.use_nchw
        x = b.get(node.inputs[0], "onnx" if nchw else "nhwc")
        dims = b.model.operands[x.index].dims
        normalized = b.scratch(OperandCode.TENSOR_FLOAT32, dims)
        b.op(OperationCode.INSTANCE_NORMALIZATION,
             [x.index, b.f32(1.0), b.f32(0.0), b.f32(attr(node, "epsilon", 1e-5)), b.flag(nchw)], [normalized])
        scale = np.asarray(ctx.constant(node.inputs[1]), np.float32).reshape(-1)
        bias = np.asarray(ctx.constant(node.inputs[2]), np.float32).reshape(-1)
        shape = (-1, 1, 1) if nchw else (-1,)
        scaled = b.scratch(OperandCode.TENSOR_FLOAT32, dims)
        b.op(OperationCode.MUL, [normalized, b.constant(scale.reshape(shape), OperandCode.TENSOR_FLOAT32),
                                 b.i32(FuseCode.NONE)], [scaled])
        y, fuse = b.new_fused(node.outputs[0], x.perm)
        b.op(OperationCode.ADD, [scaled, b.constant(bias.reshape(shape), OperandCode.TENSOR_FLOAT32), fuse], [y.index])
