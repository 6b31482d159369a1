"""Shape, Range and NonZero: shape-computing ops (``shape_op_builder.cc``, ``range_op_builder.cc``,
``nonzero_op_builder.cc``).  The EP has no builder for ConstantOfShape."""

from __future__ import annotations

from ._base import FLOATS, INTS, SUPPORTED, QnnRule, Support
from .reshape import ANY_DATA


class Shape(QnnRule):
    op_types = ("Shape",)
    input_types = {0: ANY_DATA}

    def check(self, unit, ctx):
        """Not on the HTP: its op validation refuses QNN's Shape op (error 3110).  (onnxruntime folds the Shape
        of a static tensor into a constant; a Shape stays in the graph only inside the body of a function op
        it inlines.)"""
        return Support.no("the HTP refuses QNN's Shape op (error 3110 from its op validation): the Shape runs on "
                          "the CPU")


class Range(QnnRule):
    op_types = ("Range",)
    input_types = {0: FLOATS | INTS}

    def check(self, unit, ctx):
        """Start, limit and delta constant initializers (the EP's op validation refuses any other: in a session they
        are, unless a graph input gives one, or the Range is in the body of a function op onnxruntime inlined, whose
        values it does not fold)."""
        ctx.reads_graph()
        if any(v is not None and v.is_graph_input() for v in unit.target.inputs):
            return Support.no("start, limit or delta is a graph input: the output's length is then not known when "
                              "the QNN EP builds the graph")
        if not all(ctx.is_constant(v) for v in unit.target.inputs[:3]):
            return Support.no("start, limit or delta is computed in the graph: the QNN EP takes a Range of constant "
                              "initializers only")
        return SUPPORTED


class NonZero(QnnRule):
    op_types = ("NonZero",)
    input_types = {0: ANY_DATA}

    def check(self, unit, ctx):
        """A static input and a static output shape: the EP refuses a NonZero whose output length is unknown (it
        depends on the data), as in detection models' box selection; only a declared shape makes it known."""
        return SUPPORTED


class ArrayFeatureExtractor(QnnRule):
    domain = "ai.onnx.ml"
    op_types = ("ArrayFeatureExtractor",)
    input_types = {0: ANY_DATA, 1: INTS}

    def check(self, unit, ctx):
        """int32 or int64 indices (built as a Gather on the last axis)."""
        return SUPPORTED
