"""Softmax and LogSoftmax (``softmax_op_builder.cc``): on the last axis, other axes through transposes."""

from __future__ import annotations

from ._base import SUPPORTED, QnnRule


class Softmax(QnnRule):
    op_types = ("Softmax",)

    def check(self, unit, ctx):
        """Any axis."""
        return SUPPORTED


class LogSoftmax(QnnRule):
    op_types = ("LogSoftmax",)
    #: The HTP refuses it on rank-5 tensors (error 3110 from its op validation).
    max_rank = 4

    def check(self, unit, ctx):
        """Any axis."""
        return SUPPORTED
