"""Concat and Split (``concat_op_builder.cc``, ``split_op_builder.cc``)."""

from __future__ import annotations

from ._base import SUPPORTED, QnnRule
from .reshape import MOVED_DATA


class Concat(QnnRule):
    op_types = ("Concat",)
    input_types = {0: MOVED_DATA}

    def check(self, unit, ctx):
        """Any axis."""
        return SUPPORTED


class Split(QnnRule):
    op_types = ("Split",)
    input_types = {0: MOVED_DATA}
    constant_inputs = {1: "split sizes"}

    def check(self, unit, ctx):
        """Constant split sizes (or equal parts)."""
        return SUPPORTED
