"""Cast, Identity, Clip (``cast_op_builder.cc``, ``clip_op_builder.cc``)."""

from __future__ import annotations

from ._base import FLOATS, INTS, SUPPORTED, DataType, QnnRule, Support, type_name

CASTABLE = FLOATS | INTS | {DataType.BOOL, DataType.INT8, DataType.UINT8, DataType.INT16, DataType.UINT16,
                            DataType.UINT32}


class Cast(QnnRule):
    op_types = ("Cast", "CastLike")
    input_types = {0: CASTABLE}

    def check(self, unit, ctx):
        """Between float32, float16, bool and 8- to 64-bit integers, and float64 inside the graph (computed as
        float32); no bfloat16, 4-bit or float8."""
        dtype = ctx.dtype(unit.target.outputs[0])
        if dtype not in CASTABLE and dtype != DataType.DOUBLE:
            return Support.no(f"casts to {type_name(dtype)}: QNN has no such type")
        return SUPPORTED


class Identity(QnnRule):
    op_types = ("Identity",)
    input_types = {0: FLOATS | INTS | {DataType.BOOL}}

    def check(self, unit, ctx):
        """A tensor of float32, float16, int32, int64 or bool (not a sequence or optional)."""
        return SUPPORTED


class Clip(QnnRule):
    op_types = ("Clip",)
    constant_inputs = {1: "min", 2: "max"}

    def check(self, unit, ctx):
        """float32/float16 or a QDQ unit; constant min and max."""
        return SUPPORTED
