"""Cast, Identity, Clip (``cast_op_builder.cc``, ``clip_op_builder.cc``)."""

from __future__ import annotations

from ._base import FLOATS, INTS, SUPPORTED, DataType, QnnRule, Support, type_name
from .quantize import after_a_layout_op
from .reshape import rank_limit

CASTABLE = FLOATS | INTS | {DataType.BOOL, DataType.INT8, DataType.UINT8, DataType.INT16, DataType.UINT16,
                            DataType.UINT32}


class Cast(QnnRule):
    op_types = ("Cast", "CastLike")
    input_types = {0: CASTABLE}

    def check(self, unit, ctx):
        """Between float32, float16, bool and 8- to 64-bit integers, and float64 inside the graph (computed as
        float32; to a float64 graph output only after an op the EP takes in NHWC layout); no bfloat16, 4-bit or
        float8; to an int64 graph output only from int32 or int64 (or after an op the EP takes in NHWC layout); not float16 to uint8 or bool."""
        node = unit.target
        dtype = ctx.dtype(node.outputs[0])
        source = ctx.dtype(node.inputs[0])
        if dtype not in CASTABLE and dtype != DataType.DOUBLE:
            return Support.no(f"casts to {type_name(dtype)}: QNN has no such type")
        if source in (DataType.INT8, DataType.UINT16) or (source == DataType.INT16 and dtype not in INTS):
            return Support.no(f"casts {type_name(source)} to {type_name(dtype)}: the HTP refuses it (it casts int16 "
                              "to int32 or int64 only, int8 and uint16 to nothing)")
        if dtype in (DataType.INT8, DataType.INT16, DataType.UINT16):
            return Support.no(f"casts to {type_name(dtype)}: the HTP casts to float32, float16, int32, int64, uint8 "
                              "or bool only")
        if dtype == DataType.DOUBLE and ctx.is_graph_output(node.outputs[0]) and not after_a_layout_op(node, ctx):
            return Support.no("casts to a float64 graph output: the QNN EP leaves such a Cast to the CPU")
        if dtype == DataType.INT64 and source not in INTS and ctx.is_graph_output(node.outputs[0]) and \
                not after_a_layout_op(node, ctx):
            return Support.no(f"casts {type_name(source)} to an int64 graph output: the QNN EP writes int64 graph "
                              "outputs cast from int32 or int64 only")
        if source == DataType.FLOAT16 and dtype in (DataType.UINT8, DataType.BOOL):
            return Support.no(f"casts float16 to {type_name(dtype)}: the HTP refuses it")
        if ctx.rank(node.inputs[0]) == 5 and ((source in (DataType.UINT8, DataType.BOOL) and dtype == DataType.FLOAT)
                                             or (source == DataType.FLOAT and dtype == DataType.BOOL)):
            return Support.no(f"casts {type_name(source)} to {type_name(dtype)} of rank 5: onnxruntime-qnn 2.7 takes it "
                              "and then fails the session ('Failed to finalize QNN graph')")
        return SUPPORTED


class Identity(QnnRule):
    op_types = ("Identity",)
    input_types = {0: FLOATS | INTS | {DataType.BOOL}}

    def check(self, unit, ctx):
        """A tensor of float32, float16, int32, int64 or bool (not a sequence or optional); int32 and int64 of rank
        4 at most."""
        return rank_limit(unit, ctx, {DataType.INT32: 4, DataType.INT64: 4})


class Clip(QnnRule):
    op_types = ("Clip",)
    input_types = {0: FLOATS | INTS}
    constant_inputs = {1: "min", 2: "max"}

    def check(self, unit, ctx):
        """float32, float16, int32, int64 or a QDQ unit; constant min and max."""
        return SUPPORTED
