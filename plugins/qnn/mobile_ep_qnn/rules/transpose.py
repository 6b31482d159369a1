"""Transpose, DepthToSpace, SpaceToDepth (``transpose_op_builder.cc``, ``simple_op_builder.cc``)."""

from __future__ import annotations

from ._base import SUPPORTED, QnnRule
from .reshape import ANY_DATA, rank_at_most_5


class Transpose(QnnRule):
    op_types = ("Transpose",)
    input_types = {0: ANY_DATA}

    def check(self, unit, ctx):
        """Any permutation of a tensor of rank 5 at most."""
        return rank_at_most_5(unit, ctx)


class DepthSpace(QnnRule):
    op_types = ("DepthToSpace", "SpaceToDepth")

    def check(self, unit, ctx):
        """float32/float16 or a QDQ unit; DCR and CRD modes."""
        return SUPPORTED
