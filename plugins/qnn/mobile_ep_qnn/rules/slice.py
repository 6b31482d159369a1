"""Slice, Pad, Tile, Expand, TopK (``slice_op_builder.cc``, ``pad_op_builder.cc``, ``tile_op_builder.cc``,
``expand_op_builder.cc``, ``topk_op_builder.cc``, ``cumsum_op_builder.cc``): their parameters are read when the graph is built."""

from __future__ import annotations

from ._base import FLOATS, INTS, MAX_RANK, SUPPORTED, DataType, QnnRule, Support, attr
from .reshape import ANY_DATA, MOVED_DATA, not_quantized_by_the_ep, rank_limit


class Slice(QnnRule):
    op_types = ("Slice",)
    input_types = {0: ANY_DATA}
    constant_inputs = {1: "starts", 2: "ends", 3: "axes", 4: "steps"}

    def check(self, unit, ctx):
        """Constant starts, ends, axes and steps; not of a quantized uint8 tensor the EP makes."""
        return not_quantized_by_the_ep(unit, ctx)


class Pad(QnnRule):
    op_types = ("Pad",)
    constant_inputs = {1: "pads", 2: "constant value", 3: "axes"}

    def check(self, unit, ctx):
        """Constant pads; no axes input; constant, reflect or edge mode (constant only at rank 5); reflect pads of
        each axis at most its length less one."""
        if len(unit.target.inputs) > 3 and unit.target.inputs[3] is not None:
            return Support.no("an axes input (input 3): QNN's Pad pads every axis; the QNN EP takes no axes")
        mode = attr(unit.target, "mode", "constant")
        if mode not in ("constant", "reflect", "edge"):
            return Support.no(f"mode {mode!r}: QNN pads in constant, reflect or edge mode")
        if mode != "constant" and ctx.rank(unit.target.inputs[0]) == MAX_RANK:
            return Support.no(f"mode {mode!r} on a rank-5 tensor: the HTP pads rank 5 in constant mode only")
        if mode == "reflect":
            pads, shape = ctx.constant(unit.target.inputs[1]), ctx.static_shape(unit.target.inputs[0])
            if pads is not None and shape is not None and len(pads) == 2 * len(shape):
                pads = [int(v) for v in pads.reshape(-1)]
                if any(max(pads[i], pads[i + len(shape)]) > dim - 1 for i, dim in enumerate(shape)):
                    return Support.no("reflect padding wider than an axis less one: the QNN EP refuses it")
        return SUPPORTED


class Tile(QnnRule):
    op_types = ("Tile",)
    input_types = {0: MOVED_DATA}
    constant_inputs = {1: "repeats"}

    def check(self, unit, ctx):
        """Constant repeats; float32, float16 (or a QDQ unit) of any rank, int32, int64 or bool of rank 4 at most."""
        return rank_limit(unit, ctx, {DataType.INT32: 4, DataType.INT64: 4, DataType.BOOL: 4})


class Expand(QnnRule):
    op_types = ("Expand",)
    input_types = {0: MOVED_DATA}
    constant_inputs = {1: "shape"}

    def check(self, unit, ctx):
        """A constant shape; float32, float16 (or a QDQ unit), int32, int64; bool of rank 4 at most."""
        return rank_limit(unit, ctx, {DataType.BOOL: 4})


class TopK(QnnRule):
    op_types = ("TopK",)
    input_types = {0: FLOATS | INTS}
    constant_inputs = {1: "k"}
    #: The HTP refuses TopK of rank 5.
    max_rank = 4

    def check(self, unit, ctx):
        """float32, float16, int32 or int64; constant k; any axis given as -1 or not negative (int64: the last
        only), largest or smallest (the EP transposes the axis last and negates for the smallest); rank 4 at
        most."""
        axis = attr(unit.target, "axis", -1)
        if axis < -1:
            return Support.no(f"axis={axis}: onnxruntime-qnn 2.7 takes TopK on a negative axis only as -1 (the same "
                              "axis counted from the front is taken)")
        rank = ctx.rank(unit.target.inputs[0])
        if ctx.dtype(unit.target.inputs[0]) == DataType.INT64 and rank is not None and axis not in (-1, rank - 1):
            return Support.no("int64 TopK on an axis other than the last: the QNN EP fails to create the Transpose it "
                              "inserts")
        return SUPPORTED


class CumSum(QnnRule):
    op_types = ("CumSum",)
    input_types = {0: FLOATS | INTS}
    constant_inputs = {1: "axis"}
    #: The HTP refuses CumSum of rank 5.
    max_rank = 4

    def check(self, unit, ctx):
        """float32, float16, int32 or int64; a constant axis; exclusive=0 and reverse=0 (QNN's CumulativeSum);
        rank 4 at most."""
        node = unit.target
        for name in ("exclusive", "reverse"):
            if attr(node, name, 0):
                return Support.no(f"{name}=1: the QNN EP takes CumSum with exclusive=0 and reverse=0 only")
        return SUPPORTED
