"""Logical ops (ORT ``logical_op_builder.cc``): And."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support
from mobile_ep_coreml.mil import MILBuilder

from ._base import BOOL, CoreMLRule, check_type, input_label


class And(CoreMLRule):
    op_types = ("And",)
    neuralnetwork = False

    def check_types(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Both inputs bool."""
        node = unit.target
        for index in (0, 1):
            result = check_type(ctx, node.inputs[index], {BOOL}, input_label(node, index), "Core ML's logical_and")
            if not result:
                return result
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        y = node.outputs[0]
        b.set(y, b.mb.logical_and(x=b.var(node.inputs[0]), y=b.var(node.inputs[1]), name=b.name(y)))
