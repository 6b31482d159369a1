"""Transpose (ORT ``transpose_op_builder.cc``)."""

from __future__ import annotations

from ._base import CoreMLRule


class Transpose(CoreMLRule):
    """Base checks only."""

    op_types = ("Transpose",)
    trivial = True
