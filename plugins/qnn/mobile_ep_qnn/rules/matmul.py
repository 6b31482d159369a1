"""MatMul and Gemm (``matmul_op_builder.cc``, ``gemm_op_builder.cc``): QNN MatMul and FullyConnected."""

from __future__ import annotations

from ._base import SUPPORTED, QnnRule, Support, attr


class MatMul(QnnRule):
    op_types = ("MatMul",)

    def check(self, unit, ctx):
        """float32/float16 or a QDQ unit; both operands may be activations; broadcasting batch dims."""
        return SUPPORTED


class Gemm(QnnRule):
    op_types = ("Gemm",)

    def check(self, unit, ctx):
        """alpha = beta = 1 (FullyConnected has no scaling); transA/transB as the EP transposes them."""
        node = unit.target
        if attr(node, "alpha", 1.0) != 1.0 or attr(node, "beta", 1.0) != 1.0:
            return Support.no("alpha or beta is not 1: QNN's FullyConnected has no scaling")
        return SUPPORTED
