"""Flatten (ORT ``flatten_op_builder.cc``; the builder has no ML Program support)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support

from ._base import CoreMLRule


class Flatten(CoreMLRule):
    op_types = ("Flatten",)
    mlprogram = False
    trivial = True

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input not a scalar."""
        if ctx.rank(unit.target.inputs[0]) == 0:
            return Support.no("the input is a scalar")
        return SUPPORTED
