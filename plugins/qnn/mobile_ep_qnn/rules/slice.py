"""Slice, Pad, Tile, Expand, TopK (``slice_op_builder.cc``, ``pad_op_builder.cc``, ``tile_op_builder.cc``,
``expand_op_builder.cc``, ``topk_op_builder.cc``): their parameters are read when the graph is built."""

from __future__ import annotations

from ._base import SUPPORTED, QnnRule, Support, attr
from .reshape import ANY_DATA


class Slice(QnnRule):
    op_types = ("Slice",)
    input_types = {0: ANY_DATA}
    constant_inputs = {1: "starts", 2: "ends", 3: "axes", 4: "steps"}

    def check(self, unit, ctx):
        """Constant starts, ends, axes and steps."""
        return SUPPORTED


class Pad(QnnRule):
    op_types = ("Pad",)
    constant_inputs = {1: "pads", 2: "constant value", 3: "axes"}

    def check(self, unit, ctx):
        """Constant pads; no axes input; constant, reflect or edge mode."""
        if len(unit.target.inputs) > 3 and unit.target.inputs[3] is not None:
            return Support.no("an axes input (input 3): QNN's Pad pads every axis; the QNN EP takes no axes")
        mode = attr(unit.target, "mode", "constant")
        if mode not in ("constant", "reflect", "edge"):
            return Support.no(f"mode {mode!r}: QNN pads in constant, reflect or edge mode")
        return SUPPORTED


class Tile(QnnRule):
    op_types = ("Tile",)
    input_types = {0: ANY_DATA}
    constant_inputs = {1: "repeats"}

    def check(self, unit, ctx):
        """Constant repeats."""
        return SUPPORTED


class Expand(QnnRule):
    op_types = ("Expand",)
    input_types = {0: ANY_DATA}
    constant_inputs = {1: "shape"}

    def check(self, unit, ctx):
        """A constant shape."""
        return SUPPORTED


class TopK(QnnRule):
    op_types = ("TopK",)
    constant_inputs = {1: "k"}

    def check(self, unit, ctx):
        """Constant k along the last axis, largest=1."""
        node = unit.target
        rank = ctx.rank(node.inputs[0])
        axis = attr(node, "axis", -1)
        if rank is not None and axis not in (-1, rank - 1):
            return Support.no("an axis that is not the last: QNN's TopK works on the last axis")
        if attr(node, "largest", 1) != 1:
            return Support.no("largest=0: QNN's TopK gives the largest values only")
        return SUPPORTED
