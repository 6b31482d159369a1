"""Flatten (ORT ``flatten_op_builder.cc``; the builder has no ML Program support)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support
from mobile_ep_coreml.mil import MILBuilder

from ._base import CoreMLRule, reshape_target


class Flatten(CoreMLRule):
    op_types = ("Flatten",)
    mlprogram = False
    trivial = True

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input not a scalar."""
        if ctx.rank(unit.target.inputs[0]) == 0:
            return Support.no("the input is a scalar")
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        b.set(y, b.mb.reshape(x=b.var(x), shape=reshape_target(ctx, y), name=b.name(y)))
