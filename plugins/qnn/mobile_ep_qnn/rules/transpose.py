"""Transpose, DepthToSpace, SpaceToDepth (``transpose_op_builder.cc``, ``simple_op_builder.cc``)."""

from __future__ import annotations

from ._base import SUPPORTED, QnnRule
from .reshape import ANY_DATA


class Transpose(QnnRule):
    op_types = ("Transpose",)
    input_types = {0: ANY_DATA}

    def check(self, unit, ctx):
        """Any permutation."""
        return SUPPORTED


class DepthSpace(QnnRule):
    op_types = ("DepthToSpace", "SpaceToDepth")

    def check(self, unit, ctx):
        """float32/float16 or a QDQ unit; DCR and CRD modes."""
        return SUPPORTED
