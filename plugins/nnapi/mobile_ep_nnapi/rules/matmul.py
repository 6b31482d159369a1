"""MatMul and QLinearMatMul (ORT ``gemm_op_builder.cc``, ``op_builder_helpers.cc`` ``BuildBatchMatMul``)."""

from __future__ import annotations

import math

import numpy as np

from mobile_ep import NodeUnit, RuleContext, Support
from mobile_ep_nnapi.nnapi import OperandCode, OperationCode

from ._base import NnapiRule
from ._quant import unit_inputs, unit_outputs
from .gemm import _fully_connected, check_gemm, check_gemm_io, quantized_weights


class MatMulRule(NnapiRule):
    op_types = ("MatMul", "QLinearMatMul")
    qdq_op_types = frozenset({"MatMul"})

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        return check_gemm_io(self, unit, ctx)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """2-D × 2-D with B a constant initializer (FULLY_CONNECTED); quantized (QLinearMatMul or a
        QDQ unit: uint8 A, uint8/int8 per-tensor B). Batched: both inputs 3-D+ with equal leading dims, float
        MatMul only, feature level 3."""
        return check_gemm(unit, ctx)

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """2-D: FULLY_CONNECTED with the constant B transposed to [N, K] and a zero bias.  Batched: BATCH_MATMUL
        (feature level 6), else as ORT does: RESHAPE to 3-D, SPLIT per batch, TRANSPOSE B, FULLY_CONNECTED each,
        CONCATENATION, RESHAPE."""
        ins, outs = unit_inputs(unit), unit_outputs(unit)
        a_io, b_io, out = ins[0], ins[1], outs[0].value
        a_shape, b_shape = b.shape(a_io.value), b.shape(b_io.value)
        if len(a_shape) == 2:
            weights_nk = np.ascontiguousarray(np.asarray(ctx.constant(b_io.value)).T)
            if unit.op_type == "QLinearMatMul" or unit.kind == "qdq":
                weights, bias = quantized_weights(unit, ctx, b, weights_nk, None)
            else:
                weights = b.constant(weights_nk.astype(np.float32), OperandCode.TENSOR_FLOAT32)
                bias = b.constant(np.zeros(weights_nk.shape[0], np.float32), OperandCode.TENSOR_FLOAT32)
            _fully_connected(b, ctx, a_io.value, weights, bias, out)
            return
        a = b.get(a_io, "onnx")
        c = b.get(b_io, "onnx")
        y = b.new(out, "onnx")
        if b.feature_level >= 6:
            b.op(OperationCode.BATCH_MATMUL, [a.index, c.index, b.flag(False), b.flag(False)], [y.index])
            return
        f32 = OperandCode.TENSOR_FLOAT32
        batch = math.prod(a_shape[:-2])
        m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
        a3 = b.scratch(f32, (batch, m, k))
        b.op(OperationCode.RESHAPE, [a.index, b.i32s([batch, m, k])], [a3])
        b3 = b.scratch(f32, (batch, k, n))
        b.op(OperationCode.RESHAPE, [c.index, b.i32s([batch, k, n])], [b3])
        bt = b.scratch(f32, (batch, n, k))
        b.op(OperationCode.TRANSPOSE, [b3, b.i32s([0, 2, 1])], [bt])
        a_parts = [b.scratch(f32, (1, m, k)) for _ in range(batch)]
        b_parts = [b.scratch(f32, (1, n, k)) for _ in range(batch)]
        if batch > 1:
            b.op(OperationCode.SPLIT, [a3, b.i32(0), b.i32(batch)], a_parts)
            b.op(OperationCode.SPLIT, [bt, b.i32(0), b.i32(batch)], b_parts)
        else:
            a_parts, b_parts = [a3], [bt]
        zeros = b.constant(np.zeros(n, np.float32), f32)
        products = []
        for a_part, b_part in zip(a_parts, b_parts, strict=True):
            weights = b.scratch(f32, (n, k))
            b.op(OperationCode.RESHAPE, [b_part, b.i32s([n, k])], [weights])
            product = b.scratch(f32, (m, n))
            b.op(OperationCode.FULLY_CONNECTED, [a_part, weights, zeros, b.i32(0)], [product])
            products.append(product)
        if len(products) > 1:
            joined = b.scratch(f32, (batch * m, n))
            b.op(OperationCode.CONCATENATION, [*products, b.i32(0)], [joined])
        else:
            joined = products[0]
        b.op(OperationCode.RESHAPE, [joined, b.i32s(b.shape(out))], [y.index])
