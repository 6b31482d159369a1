"""Gemm (ORT ``gemm_op_builder.cc``): FULLY_CONNECTED.  Shared with MatMul/QLinearMatMul (matmul.py)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, DataType, NodeUnit, RuleContext, Support, attr

from ._base import NnapiRule, constant_input, input_count, input_value, needs_feature_level
from ._quant import quantized_op_type
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
        return constant_input(ctx, unit, 2, "bias")
    return SUPPORTED


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
