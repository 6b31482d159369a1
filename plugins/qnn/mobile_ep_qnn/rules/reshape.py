"""Reshape, Flatten, Squeeze, Unsqueeze (``reshape_op_builder.cc``): QNN Reshape to the static output shape."""

from __future__ import annotations

from ._base import FLOATS, INTS, QUANTIZED, SUPPORTED, DataType, QnnRule

ANY_DATA = FLOATS | INTS | QUANTIZED | {DataType.BOOL}


class Reshape(QnnRule):
    op_types = ("Reshape",)
    input_types = {0: ANY_DATA}

    def check(self, unit, ctx):
        """The output shape is static (the shape input may be computed)."""
        return SUPPORTED


class Flatten(QnnRule):
    op_types = ("Flatten",)
    input_types = {0: ANY_DATA}

    def check(self, unit, ctx):
        """Any axis."""
        return SUPPORTED


class SqueezeUnsqueeze(QnnRule):
    op_types = ("Squeeze", "Unsqueeze")
    input_types = {0: ANY_DATA}

    def check(self, unit, ctx):
        """Any axes (the output shape is static)."""
        return SUPPORTED
