"""Softmax (ORT ``softmax_op_builder.cc``)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support

from ._base import CoreMLRule, shape_text


class Softmax(CoreMLRule):
    op_types = ("Softmax",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Before opset 13 (2-D coercion semantics) the input shape must be static."""
        node = unit.target
        if ctx.node_opset(node) < 13 and ctx.static_shape(node.inputs[0]) is None:
            return Support.no(
                f"dynamic input shape {shape_text(ctx, node.inputs[0])} before opset 13; fix the shape or "
                "use opset 13+"
            )
        return SUPPORTED
