"""Elementwise unary ops (ORT ``unary_op_builder.cc``)."""

from __future__ import annotations

from ._base import CoreMLRule


class Unary(CoreMLRule):
    """Base checks only."""

    op_types = ("Sqrt", "Reciprocal")


class MLProgramUnary(CoreMLRule):
    """Base checks only."""

    op_types = ("Erf", "Round", "Exp", "Sin", "Cos")
    neuralnetwork = False


class Ceil(CoreMLRule):
    """Base checks only."""

    op_types = ("Ceil",)
    neuralnetwork = False
    trivial = True
