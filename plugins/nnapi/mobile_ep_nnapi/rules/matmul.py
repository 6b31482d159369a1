"""MatMul and QLinearMatMul (ORT ``gemm_op_builder.cc``, ``op_builder_helpers.cc`` ``BuildBatchMatMul``)."""

from __future__ import annotations

from mobile_ep import NodeUnit, RuleContext, Support

from ._base import NnapiRule
from .gemm import check_gemm, check_gemm_io


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
