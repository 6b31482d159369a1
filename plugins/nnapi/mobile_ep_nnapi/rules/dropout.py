"""Dropout at inference (compile_ops=extended only): the identity (no operation)."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support

from ._base import NnapiRule

COMPILE_ONLY = True


class DropoutRule(NnapiRule):
    op_types = ("Dropout",)
    min_opset = 7

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Inference only: no mask output in use, training_mode (input 2) absent or a constant false."""
        node = unit.target
        if len(node.outputs) > 1 and (ctx.consumers(node.outputs[1]) or ctx.is_graph_output(node.outputs[1])):
            return Support.no("the mask output is used")
        if len(node.inputs) > 2 and node.inputs[2] is not None:
            mode = ctx.constant(node.inputs[2])
            if mode is None or bool(np.asarray(mode).reshape(-1)[0]):
                return Support.no("training_mode is not a constant false")
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        b.alias(unit.target.outputs[0], unit.target.inputs[0])
