"""Concat and Split (``concat_op_builder.cc``, ``split_op_builder.cc``)."""

from __future__ import annotations

from ._base import SUPPORTED, DataType, QnnRule, Support, input_type
from .reshape import MOVED_DATA


class Concat(QnnRule):
    op_types = ("Concat",)
    input_types = {0: MOVED_DATA}

    def check(self, unit, ctx):
        """Any axis."""
        return SUPPORTED


class Split(QnnRule):
    op_types = ("Split",)
    input_types: dict = {}  # (input 0: in check)
    constant_inputs = {1: "split sizes"}

    def check(self, unit, ctx):
        """Constant split sizes (or equal parts); plain uint8 only into one output (a copy); int64 into one output
        not a graph output."""
        node = unit.target
        if len(node.outputs) == 1 and ctx.dtype(node.inputs[0]) == DataType.INT64 and \
                ctx.is_graph_output(node.outputs[0]):
            return Support.no("an int64 Split into one output that is a graph output: onnxruntime-qnn 2.7 builds it as "
                              "a no-op and fails to add it ('Failed to add no-op node')")
        if unit.kind != "qdq" and len(node.outputs) == 1 and ctx.dtype(node.inputs[0]) == DataType.UINT8:
            return SUPPORTED
        return input_type(node.inputs[0], 0, MOVED_DATA, ctx)
