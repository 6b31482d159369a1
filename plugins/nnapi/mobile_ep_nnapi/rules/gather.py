"""Gather (ORT ``gather_op_builder.cc``): GATHER."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, DataType, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperandCode, OperationCode

from ._base import NnapiRule, constant_input, input_value, rank_between


class GatherRule(NnapiRule):
    op_types = ("Gather",)
    min_feature_level = 3

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Data rank 1–4 without zero dims; indices int32, or any type as a constant initializer."""
        result = rank_between(ctx, unit, 1, 4, what="data (input 0)")
        if not result:
            return result
        shape = ctx.static_shape(input_value(unit, 0)) or ()
        if 0 in shape:
            return Support.no(f"data (input 0) has a zero dim {list(shape)}")
        indices = input_value(unit, 1)
        dtype = ctx.dtype(indices)
        if dtype is None:
            return Support.no("indices (input 1) has no element type")
        if dtype != DataType.INT32:
            result = constant_input(ctx, unit, 1, "indices")
            if not result:
                return Support.no(f"{result.reason}; only int32 indices may be computed at run time")
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """GATHER with int32 indices (constant int64 indices converted, negative ones made positive); scalar
        indices gather [1] and RESHAPE the axis away."""
        node = unit.target
        data, indices_value, out = node.inputs[0], node.inputs[1], node.outputs[0]
        shape = b.shape(data)
        axis = int(attr(node, "axis", 0)) % len(shape)
        x = b.get(data, "onnx")
        constant = ctx.constant(indices_value)
        if constant is not None:
            indices = np.asarray(constant).astype(np.int64)
            indices = np.where(indices < 0, indices + shape[axis], indices).astype(np.int32)
            scalar = indices.ndim == 0
            index_op = b.constant(indices.reshape(-1) if scalar else indices, OperandCode.TENSOR_INT32)
        else:
            scalar = b.rank(indices_value) == 0
            index_op = b.get(indices_value, "onnx").index
        if scalar:
            dims = list(shape)
            dims[axis] = 1
            gathered = b.scratch(b.model.operands[x.index].type, dims, like=x.index)
            b.op(OperationCode.GATHER, [x.index, b.i32(axis), index_op], [gathered])
            y = b.like(out, data, "onnx")
            b.op(OperationCode.RESHAPE, [gathered, b.i32s(b.dims(b.shape(out), ()))], [y.index])
        else:
            y = b.like(out, data, "onnx")
            b.op(OperationCode.GATHER, [x.index, b.i32(axis), index_op], [y.index])
