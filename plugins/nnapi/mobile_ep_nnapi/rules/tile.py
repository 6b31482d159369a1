"""Tile and Expand (compile_ops=extended only): TILE, feature level 3 (Expand: RESHAPE to the output rank,
then TILE by output / input dims)."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, DataType, NodeUnit, RuleContext, Support
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule, constant_input, input_value, rank_between

COMPILE_ONLY = True


class TileRule(NnapiRule):
    op_types = ("Tile", "Expand")
    min_feature_level = 3
    min_opsets = {"Tile": 6, "Expand": 8}
    input_dtypes = (DataType.FLOAT, DataType.INT32)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input and output rank 1–4 without zero dims; repeats / shape a constant initializer."""
        result = rank_between(ctx, unit, 1, 4)
        if result:
            result = constant_input(ctx, unit, 1, "repeats" if unit.op_type == "Tile" else "shape")
        if not result:
            return result
        out = ctx.static_shape(unit.target.outputs[0])
        if out is None or not 1 <= len(out) <= 4 or 0 in out or 0 in (ctx.static_shape(input_value(unit, 0)) or ()):
            return Support.no(f"the output shape {out} is not 1–4-D without zero dims")
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        node = unit.target
        x_value, out = node.inputs[0], node.outputs[0]
        in_shape, out_shape = b.shape(x_value), b.shape(out)
        x = b.get(x_value, "onnx")
        if unit.op_type == "Tile":
            repeats = [int(r) for r in np.asarray(ctx.constant(node.inputs[1])).reshape(-1)]
        else:
            padded = (1,) * (len(out_shape) - len(in_shape)) + tuple(in_shape)
            if len(padded) != len(in_shape):
                reshaped = b.scratch(b.model.operands[x.index].type, padded, like=x.index)
                b.op(OperationCode.RESHAPE, [x.index, b.i32s(padded)], [reshaped])
                x = type(x)(reshaped, tuple(range(len(padded))))
            repeats = [o // i for o, i in zip(out_shape, padded, strict=True)]
        y = b.like(out, x_value, "onnx")
        if all(r == 1 for r in repeats):
            b.op(OperationCode.RESHAPE, [x.index, b.i32s(out_shape)], [y.index])
        else:
            b.op(OperationCode.TILE, [x.index, b.i32s(repeats)], [y.index])
