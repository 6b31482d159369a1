"""If: the QNN EP builds an If whose branches give tensors of static shapes (as a select between them)."""

from __future__ import annotations

from ._base import SUPPORTED, DataType, QnnRule


class If(QnnRule):
    op_types = ("If",)
    input_types = {0: frozenset({DataType.BOOL})}

    def check(self, unit, ctx):
        """A bool condition; tensor outputs of static shapes."""
        return SUPPORTED
