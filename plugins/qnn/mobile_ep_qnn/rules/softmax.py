"""Softmax and LogSoftmax (``softmax_op_builder.cc``): on the last axis, other axes through transposes."""

from __future__ import annotations

from ._base import SUPPORTED, QnnRule


class Softmax(QnnRule):
    op_types = ("Softmax", "LogSoftmax")

    def check(self, unit, ctx):
        """Any axis."""
        return SUPPORTED
