"""LSTM and GRU (``lstm_op_builder.cc``): unrolled into QNN ops over the static sequence length."""

from __future__ import annotations

from ._base import SUPPORTED, QnnRule, Support


class LSTM(QnnRule):
    op_types = ("LSTM",)

    def check(self, unit, ctx):
        """No peephole weights (input 7); forward, reverse or bidirectional."""
        node = unit.target
        if len(node.inputs) > 7 and node.inputs[7] is not None:
            return Support.no("peephole weights (input 7): the QNN EP builds LSTM without peepholes")
        return SUPPORTED


class GRU(QnnRule):
    op_types = ("GRU",)

    def check(self, unit, ctx):
        """float32/float16, any direction."""
        return SUPPORTED
