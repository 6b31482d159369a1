"""Transpose, DepthToSpace, SpaceToDepth (``transpose_op_builder.cc``, ``simple_op_builder.cc``)."""

from __future__ import annotations

from ._base import (
    FLOATS,
    NHWC_REFUSED_INTS,
    QUANTIZED,
    DataType,
    QnnRule,
    Support,
    nhwc_plain_integer,
    type_name,
)
from .reshape import in_rank6_fusion, quantized_in_the_ep, rank_limit


class Transpose(QnnRule):
    op_types = ("Transpose",)
    input_types = {0: FLOATS | QUANTIZED | {DataType.INT32, DataType.BOOL}}

    def builds_at_lower_rank(self, unit, ctx):
        return in_rank6_fusion(unit.target, ctx)

    def check(self, unit, ctx):
        """Any permutation of a tensor of rank 5 at most (rank 6 inside the EP's rank-6 to rank-5 fusion of
        Reshape -> Transpose -> Reshape); float32, float16 (or a QDQ unit), bool; int32 of rank 4 at most (no
        int64); an 8- or 16-bit integer only as a quantized tensor (the output of a QuantizeLinear the EP
        takes)."""
        value = unit.target.inputs[0]
        dtype = ctx.dtype(value)
        if dtype in QUANTIZED and unit.kind != "qdq" and not quantized_in_the_ep(value, ctx):
            return Support.no(f"input 0 is {type_name(dtype)}: QNN transposes 8- and 16-bit integers only as a "
                              "quantized tensor (the output of a QuantizeLinear the EP takes)")
        return rank_limit(unit, ctx, {DataType.INT32: 4})


class DepthSpace(QnnRule):
    op_types = ("DepthToSpace", "SpaceToDepth")
    input_types = {0: FLOATS | NHWC_REFUSED_INTS}

    def check(self, unit, ctx):
        """float32/float16 or a QDQ unit; DCR and CRD modes; a plain int32, int8 or uint8 input fails the session."""
        return nhwc_plain_integer(unit, ctx)
