"""Reshape, Flatten, Squeeze, Unsqueeze (``reshape_op_builder.cc``): QNN Reshape to the static output shape."""

from __future__ import annotations

from ._base import FLOATS, INTS, QUANTIZED, SUPPORTED, DataType, QnnRule, Support

ANY_DATA = FLOATS | INTS | QUANTIZED | {DataType.BOOL}


def rank_at_most_5(unit, ctx) -> Support:
    """QNN's Reshape and Transpose take tensors of rank 5 at most."""
    for value in (unit.target.inputs[0], unit.target.outputs[0]):
        rank = ctx.rank(value)
        if rank is not None and rank > 5:
            return Support.no(f"a rank-{rank} tensor: QNN reshapes and transposes tensors of rank 5 at most")
    return SUPPORTED


class Reshape(QnnRule):
    op_types = ("Reshape",)
    input_types = {0: ANY_DATA}

    def check(self, unit, ctx):
        """Rank 5 at most; the output shape is static (the shape input may be computed)."""
        return rank_at_most_5(unit, ctx)


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
        """Any axes (the output shape is static); rank 5 at most."""
        return rank_at_most_5(unit, ctx)
