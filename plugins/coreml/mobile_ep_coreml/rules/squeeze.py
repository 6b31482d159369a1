"""Squeeze and Unsqueeze (ORT ``squeeze_op_builder.cc``)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr

from ._base import MAX_RANK, CoreMLRule, is_constant


def _check_axes_input(unit: NodeUnit, ctx: RuleContext) -> Support:
    node = unit.target
    if ctx.node_opset(node) >= 13 and len(node.inputs) > 1 and not is_constant(ctx, node.inputs[1]):
        return Support.no("axes (input 1) is not a constant initializer")
    return SUPPORTED


class Squeeze(CoreMLRule):
    op_types = ("Squeeze",)
    trivial = True

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """axes, if an input (opset 13+), a constant initializer."""
        return _check_axes_input(unit, ctx)


class Unsqueeze(CoreMLRule):
    op_types = ("Unsqueeze",)
    neuralnetwork = False
    trivial = True

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """axes (input from opset 13) a constant initializer; output rank <= 5."""
        result = _check_axes_input(unit, ctx)
        if not result:
            return result
        node = unit.target
        if ctx.node_opset(node) >= 13:
            axes_shape = ctx.shape(node.inputs[1]) if len(node.inputs) > 1 else None
            added = axes_shape[0] if axes_shape else 0
            added = added or 0
        else:
            added = len(attr(node, "axes", ()))
        rank = ctx.rank(node.inputs[0])
        assert rank is not None
        if rank + added > MAX_RANK:
            return Support.no(f"output rank {rank + added}; Core ML takes rank <= {MAX_RANK}")
        return SUPPORTED
