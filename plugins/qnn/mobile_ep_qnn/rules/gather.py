"""Gather, GatherElements, GatherND, ScatterElements, ScatterND (``gather_op_builder.cc``,
``gathernd_op_builder.cc``, ``simple_op_builder.cc``)."""

from __future__ import annotations

from ._base import FLOATS, INTS, SUPPORTED, DataType, QnnRule, Support, attr
from .reshape import MOVED_DATA


class Gather(QnnRule):
    op_types = ("Gather",)
    input_types = {0: MOVED_DATA, 1: INTS}

    def check(self, unit, ctx):
        """int32 or int64 indices (negative ones when constant); not int64 data of rank 2 or more gathered with a
        scalar index into a graph output."""
        node = unit.target
        if ctx.dtype(node.inputs[0]) == DataType.INT64 and ctx.rank(node.inputs[1]) == 0 and \
                (ctx.rank(node.inputs[0]) or 0) >= 2 and ctx.is_graph_output(node.outputs[0]):
            return Support.no("int64 data of rank 2 or more gathered with a scalar index into a graph output: the HTP "
                              "refuses it (a 1-D index, or a node reading the result, is taken)")
        return SUPPORTED


class GatherElements(QnnRule):
    op_types = ("GatherElements",)
    input_types = {0: MOVED_DATA, 1: INTS}

    def check(self, unit, ctx):
        """int32 or int64 indices; at rank 5 not along axis 0 (the HTP refuses it)."""
        node = unit.target
        rank = ctx.rank(node.inputs[0])
        if rank == 5 and attr(node, "axis", 0) % rank == 0:
            return Support.no("axis 0 of a rank-5 tensor: the HTP takes GatherElements of rank 5 along other axes "
                              "only")
        return SUPPORTED


class GatherND(QnnRule):
    op_types = ("GatherND",)
    input_types = {0: FLOATS | {DataType.INT32}, 1: INTS}
    #: The HTP refuses GatherNd of rank 5.
    max_rank = 4

    def check(self, unit, ctx):
        """float32, float16 (or a QDQ unit) or int32 data (the HTP refuses int64 and bool); batch_dims=0."""
        if attr(unit.target, "batch_dims", 0) != 0:
            return Support.no("batch_dims other than 0: QNN's GatherNd is built with batch_dims=0")
        return SUPPORTED


class ScatterElements(QnnRule):
    op_types = ("ScatterElements",)
    input_types = {0: FLOATS | INTS | {DataType.UINT8, DataType.UINT16}, 1: INTS}
    #: The HTP refuses ScatterElements of rank 5.
    max_rank = 4

    def check(self, unit, ctx):
        """float32, float16, int32, int64, uint8 or uint16 data (no int8 or bool); no reduction, or add or mul on
        integer data, max on int32, int64 or uint8 (not on float or uint16, no min)."""
        node = unit.target
        reduction = attr(node, "reduction", "none")
        if reduction == "none":
            return SUPPORTED
        dtype = ctx.dtype(node.inputs[0])
        if reduction == "min" or dtype not in INTS | {DataType.UINT8, DataType.UINT16} or (
                reduction == "max" and dtype == DataType.UINT16):
            return Support.no(f"reduction={reduction} on {dtype.name.lower()} data: the QNN EP takes ScatterElements "
                              "with add or mul on int32, int64, uint8 or uint16, max on int32, int64 or uint8 only")
        return SUPPORTED


class ScatterND(QnnRule):
    op_types = ("ScatterND",)
    input_types = {0: MOVED_DATA, 1: INTS}

    def check(self, unit, ctx):
        """No reduction, add or mul."""
        reduction = attr(unit.target, "reduction", "none")
        if reduction not in ("none", "add", "mul"):
            return Support.no(f"reduction={reduction}: QNN's ScatterNd reduces with add or mul only")
        return SUPPORTED
