"""Gemm (ORT ``gemm_op_builder.cc``): FULLY_CONNECTED.  Shared with MatMul/QLinearMatMul (matmul.py)."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, DataType, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import FuseCode, OperandCode, OperationCode

from ._base import NnapiRule, constant_input, extended, input_count, input_value, needs_feature_level
from ._quant import check_bias_quantization, quantized_op_type, unit_inputs, unit_outputs
from .binary import check_quantized_binary_io

QUANTIZED_GEMM = frozenset({"QLinearMatMul", "QDQGemm", "QDQMatMul"})


def check_gemm_io(rule: NnapiRule, unit: NodeUnit, ctx: RuleContext) -> Support:
    if quantized_op_type(unit) in QUANTIZED_GEMM:
        return check_quantized_binary_io(unit, ctx)
    return NnapiRule.check_io(rule, unit, ctx)


def check_batch_matmul(unit: NodeUnit, ctx: RuleContext, a_shape: tuple, b_shape: tuple) -> Support:
    """A batched MatMul is built from SPLIT/TRANSPOSE/FULLY_CONNECTED/CONCATENATION (``BuildBatchMatMul``)."""
    result = needs_feature_level(ctx, 3, "a batched (3-D+) MatMul")
    if not result:
        return result
    if unit.kind != "single" or unit.op_type != "MatMul":
        form = "QDQ " + unit.op_type if unit.kind == "qdq" else unit.op_type
        return Support.no(f"3-D+ inputs are supported for a float MatMul only, not {form}")
    if len(a_shape) != len(b_shape) or a_shape[:-2] != b_shape[:-2]:
        return Support.no(f"batched inputs {list(a_shape)} × {list(b_shape)} must have the same rank and the same "
                          "leading (batch) dims")
    if ctx.dtype(input_value(unit, 0)) != DataType.FLOAT:
        return Support.no("a batched MatMul needs float32 inputs")
    return SUPPORTED


def check_gemm(unit: NodeUnit, ctx: RuleContext) -> Support:
    """The checks of ORT's GemmOpBuilder::IsOpSupportedImpl for Gemm, MatMul and QLinearMatMul."""
    a_shape = ctx.static_shape(input_value(unit, 0))
    b_shape = ctx.static_shape(input_value(unit, 1))
    if a_shape is None or b_shape is None:
        return Support.no("inputs A and B need static shapes")
    if len(a_shape) > 2 and len(b_shape) > 2:
        return check_batch_matmul(unit, ctx, a_shape, b_shape)
    if len(a_shape) != 2 or len(b_shape) != 2:
        return Support.no(f"A is {len(a_shape)}-D and B {len(b_shape)}-D; both must be 2-D (or both 3-D+ for a "
                          "batched float MatMul)")
    node = unit.target
    if unit.op_type == "Gemm":
        trans_a = attr(node, "transA", 0)
        trans_b = attr(node, "transB", 0)
        alpha = attr(node, "alpha", 1.0)
        beta = attr(node, "beta", 1.0)
        if (trans_a != 0 or alpha != 1.0 or beta != 1.0) and extended(ctx) and unit.kind == "single":
            # compile_ops=extended: A transposed by TRANSPOSE, alpha and beta folded into B and C (or MUL)
            if trans_a:
                result = needs_feature_level(ctx, 2, "transA=1 (TRANSPOSE)")
                if not result:
                    return result
            trans_a, alpha, beta = 0, 1.0, 1.0
        if trans_a != 0 or alpha != 1.0 or beta != 1.0:
            return Support.no(f"needs transA=0, alpha=1, beta=1 (got transA={trans_a}, alpha={alpha:g}, beta={beta:g})")
        if trans_b == 0:
            result = constant_input(ctx, unit, 1, "B")
            if not result:
                return Support.no(f"{result.reason} (needed unless transB=1)")
        if input_count(unit) == 3:
            c = input_value(unit, 2)
            if c is None:
                return Support.no("C (input 2) is given as an empty name, which ORT's NNAPI EP does not accept")
            c_shape = ctx.static_shape(c)
            if c_shape is None:
                return Support.no("C (input 2) needs a static shape")
            if len(c_shape) == 0:
                return Support.no("C (input 2) is a scalar; needs a 1-D bias")
            if len(c_shape) != 1:
                result = needs_feature_level(ctx, 2, f"a {len(c_shape)}-D C (input 2)")
                if not result:
                    return result
                if any(d != 1 for d in c_shape[:-1]):
                    return Support.no(f"C (input 2) has shape {list(c_shape)}; needs [N] or [1,…,1,N]")
            n = b_shape[1] if trans_b == 0 else b_shape[0]
            if c_shape[-1] != n:
                return Support.no(f"C (input 2) has {c_shape[-1]} elements; needs {n} (the output width)")
    else:  # MatMul, QLinearMatMul
        result = constant_input(ctx, unit, 1, "B", shown=3 if unit.op_type == "QLinearMatMul" else 1)
        if not result:
            return result
    if quantized_op_type(unit) == "QDQGemm" and input_count(unit) > 2:
        result = constant_input(ctx, unit, 2, "bias")
        return check_bias_quantization(unit, ctx) if result else result
    return SUPPORTED


def quantized_weights(unit: NodeUnit, ctx: RuleContext, b, weights_nk: np.ndarray, bias_io) -> tuple[int, int]:
    from .conv import quantized_filter

    ins = unit_inputs(unit)
    return quantized_filter(b, ctx, ins[0], ins[1], bias_io, "fc", weights_nk, weights_nk.shape[0])


def emit_gemm(unit: NodeUnit, ctx: RuleContext, b) -> None:
    """FULLY_CONNECTED with B as [N, K] weights (a constant transposed on the host, or a run-time B with
    transB=1) and C as the bias; extended: transA by TRANSPOSE, alpha/beta folded into constants or MUL."""
    node = unit.target
    ins, outs = unit_inputs(unit), unit_outputs(unit)
    a_io, b_io = ins[0], ins[1]
    c_io = ins[2] if len(ins) > 2 else None
    out = outs[0].value
    trans_a, trans_b = attr(node, "transA", 0), attr(node, "transB", 0)
    alpha, beta = float(attr(node, "alpha", 1.0)), float(attr(node, "beta", 1.0))
    m, n = b.shape(out)
    a_value = a_io.value
    if trans_a:
        a_ref = b.get(a_value, "onnx")
        k = b.shape(a_value)[0]
        moved = b.scratch(OperandCode.TENSOR_FLOAT32, (m, k))
        b.op(OperationCode.TRANSPOSE, [a_ref.index, b.i32s([1, 0])], [moved])
        a_value = _Operand(moved)
    quantized = quantized_op_type(unit) in QUANTIZED_GEMM
    b_const = ctx.constant(b_io.value)
    if quantized:
        weights_nk = np.asarray(b_const) if trans_b else np.asarray(b_const).T
        weights, bias = quantized_weights(unit, ctx, b, np.ascontiguousarray(weights_nk), c_io)
        _fully_connected(b, ctx, a_value, weights, bias, out)
        return
    if b_const is not None:
        weights_nk = (np.asarray(b_const) if trans_b else np.asarray(b_const).T) * np.float32(alpha)
        weights = b.constant(np.ascontiguousarray(weights_nk, dtype=np.float32), OperandCode.TENSOR_FLOAT32)
    else:  # transB=1: B [N, K] computed at run time
        w_ref = b.get(b_io, "onnx")
        weights = w_ref.index
        if alpha != 1.0:
            scaled = b.scratch(OperandCode.TENSOR_FLOAT32, (n, b.shape(b_io.value)[1]))
            b.op(OperationCode.MUL, [weights, b.constant(np.float32([alpha]), 3), b.i32(0)], [scaled])
            weights = scaled
    c_const = None if c_io is None else ctx.constant(c_io.value)
    if c_io is None:
        bias = b.constant(np.zeros(n, np.float32), OperandCode.TENSOR_FLOAT32)
    elif c_const is not None and np.asarray(c_const).size == n:
        bias = b.constant((np.asarray(c_const, np.float32) * np.float32(beta)).reshape(-1), OperandCode.TENSOR_FLOAT32)
    else:
        c_ref = b.get(c_io, "onnx")
        bias = c_ref.index
        if b.rank(c_io.value) != 1:
            flat = b.scratch(OperandCode.TENSOR_FLOAT32, (n,))
            b.op(OperationCode.RESHAPE, [bias, b.i32s([n])], [flat])
            bias = flat
        if beta != 1.0:
            scaled = b.scratch(OperandCode.TENSOR_FLOAT32, (n,))
            b.op(OperationCode.MUL, [bias, b.constant(np.float32([beta]), 3), b.i32(0)], [scaled])
            bias = scaled
    _fully_connected(b, ctx, a_value, weights, bias, out)


class _Operand:
    """An intermediate operand standing in for a value (a transposed A)."""

    def __init__(self, index: int) -> None:
        self.index = index


def _fully_connected(b, ctx: RuleContext, a_value, weights: int, bias: int, out) -> None:
    a_index = a_value.index if isinstance(a_value, _Operand) else b.get(a_value, "onnx").index
    if ctx.dtype(out) == DataType.UINT8:
        y, fuse = b.new(out, "onnx"), b.i32(FuseCode.NONE)
    else:
        y, fuse = b.new_fused(out, "onnx")
    b.op(OperationCode.FULLY_CONNECTED, [a_index, weights, bias, fuse], [y.index])


class GemmRule(NnapiRule):
    op_types = ("Gemm",)
    qdq_op_types = frozenset({"Gemm"})
    # opset 6 and below have a broadcast attribute
    min_opset = 7

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        return check_gemm_io(self, unit, ctx)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """2-D A and B; transA=0, alpha=1, beta=1; B constant unless transB=1; C 1-D of the output width, or
        [1,…,1,N] on feature level 2+; QDQ unit (uint8 A, uint8/int8 B, constant bias)."""
        return check_gemm(unit, ctx)

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        emit_gemm(unit, ctx, b)
