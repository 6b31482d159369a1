"""Shape, ConstantOfShape, Range and NonZero: shape-computing ops the QNN EP builds from static shapes."""

from __future__ import annotations

from ._base import FLOATS, INTS, SUPPORTED, QnnRule, Support
from .reshape import ANY_DATA


class Shape(QnnRule):
    op_types = ("Shape",)
    input_types = {0: ANY_DATA}

    def check(self, unit, ctx):
        """A static input shape (the result is a constant tensor in the QNN graph)."""
        return SUPPORTED


class ConstantOfShape(QnnRule):
    op_types = ("ConstantOfShape",)
    input_types = {0: INTS}

    def check(self, unit, ctx):
        """A shape that is not a graph input (the output shape is static)."""
        if unit.target.inputs[0].is_graph_input():
            ctx.reads_graph()
            return Support.no("the shape (input 0) is a graph input: the QNN EP needs it when it builds the graph")
        return SUPPORTED


class Range(QnnRule):
    op_types = ("Range",)
    input_types = {0: FLOATS | INTS}

    def check(self, unit, ctx):
        """Start, limit and delta computed in the graph, not graph inputs (the output shape depends on them)."""
        if any(v is not None and v.is_graph_input() for v in unit.target.inputs):
            ctx.reads_graph()
            return Support.no("start, limit or delta is a graph input: the output's length is then not known when "
                              "the QNN EP builds the graph")
        return SUPPORTED


class NonZero(QnnRule):
    op_types = ("NonZero",)
    input_types = {0: ANY_DATA}
    static_outputs = False

    def check(self, unit, ctx):
        """A static input (the output's length depends on the data)."""
        return SUPPORTED


class ArrayFeatureExtractor(QnnRule):
    domain = "ai.onnx.ml"
    op_types = ("ArrayFeatureExtractor",)
    input_types = {0: ANY_DATA, 1: INTS}

    def check(self, unit, ctx):
        """int32 or int64 indices (built as a Gather on the last axis)."""
        return SUPPORTED
