"""Reductions and ArgMax/ArgMin (``reduce_op_builder.cc``, ``argmax_argmin_op_builder.cc``)."""

from __future__ import annotations

from ._base import SUPPORTED, QnnRule, Support, attr


class Reduce(QnnRule):
    op_types = ("ReduceMax", "ReduceMean", "ReduceMin", "ReduceSum", "ReduceL2")
    constant_inputs = {1: "axes"}

    def check(self, unit, ctx):
        """float32/float16 or a QDQ unit; constant axes; noop_with_empty_axes=0."""
        if attr(unit.target, "noop_with_empty_axes", 0):
            return Support.no("noop_with_empty_axes=1: the QNN EP reduces with noop_with_empty_axes=0 only")
        return SUPPORTED


class ArgMaxMin(QnnRule):
    op_types = ("ArgMax", "ArgMin")
    #: The HTP refuses these on rank-5 tensors (error 3110 from its op validation).
    max_rank = 4

    def check(self, unit, ctx):
        """select_last_index=0."""
        if attr(unit.target, "select_last_index", 0):
            return Support.no("select_last_index=1: QNN's Argmax/Argmin return the first index")
        return SUPPORTED
