"""Gather, GatherElements, GatherND, ScatterElements, ScatterND (``gather_op_builder.cc``,
``gathernd_op_builder.cc``, ``simple_op_builder.cc``)."""

from __future__ import annotations

from ._base import FLOATS, INTS, SUPPORTED, DataType, QnnRule, Support, attr
from .reshape import ANY_DATA


class Gather(QnnRule):
    op_types = ("Gather", "GatherElements")
    input_types = {0: ANY_DATA, 1: INTS}

    def check(self, unit, ctx):
        """int32 or int64 indices (negative ones when constant)."""
        return SUPPORTED


class GatherND(QnnRule):
    op_types = ("GatherND",)
    #: The real EP (onnxruntime-qnn 2.7, HTP) takes float32, float16 and int32 data only: bool, int64, 8- and
    #: 16-bit integer data stay on the CPU (the oracle: ``test_gathernd_data_types_and_ranks_as_the_real_ep``).
    input_types = {0: FLOATS | {DataType.INT32}, 1: INTS}
    #: ... and data and indices of rank 4 at most (a rank-5 one stays on the CPU, as Neg's does).
    max_rank = 4

    def check(self, unit, ctx):
        """batch_dims=0; float32, float16 or int32 data (bool, int64, 8- and 16-bit data stay on the CPU)."""
        if attr(unit.target, "batch_dims", 0) != 0:
            return Support.no("batch_dims other than 0: QNN's GatherNd is built with batch_dims=0")
        return SUPPORTED


class ScatterElements(QnnRule):
    op_types = ("ScatterElements",)
    input_types = {0: ANY_DATA, 1: INTS}

    def check(self, unit, ctx):
        """No reduction."""
        reduction = attr(unit.target, "reduction", "none")
        if reduction != "none":
            return Support.no(f"reduction={reduction}: the QNN EP takes ScatterElements without reduction")
        return SUPPORTED


class ScatterND(QnnRule):
    op_types = ("ScatterND",)
    input_types = {0: ANY_DATA, 1: INTS}

    def check(self, unit, ctx):
        """No reduction, add or mul."""
        reduction = attr(unit.target, "reduction", "none")
        if reduction not in ("none", "add", "mul"):
            return Support.no(f"reduction={reduction}: QNN's ScatterNd reduces with add or mul only")
        return SUPPORTED
