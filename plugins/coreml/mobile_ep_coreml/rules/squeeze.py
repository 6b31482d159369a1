"""Squeeze and Unsqueeze (ORT ``squeeze_op_builder.cc``)."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import MAX_RANK, CoreMLRule, constant_value, is_constant


def _axes(unit: NodeUnit, ctx: RuleContext) -> list[int] | None:
    node = unit.target
    if ctx.node_opset(node) >= 13:
        if len(node.inputs) > 1 and node.inputs[1] is not None:
            return [int(a) for a in np.asarray(constant_value(ctx, node.inputs[1])).reshape(-1)]
        return None
    raw = attr(node, "axes")
    return None if raw is None else [int(a) for a in raw]


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

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        axes = _axes(unit, ctx)
        if axes is None:  # every dim of size 1 (known statically)
            axes = [i for i, d in enumerate(b.static_shape(x)) if d == 1]
        b.set(y, b.mb.squeeze(x=b.var(x), axes=axes, name=b.name(y)))


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

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        axes = _axes(unit, ctx) or []
        rank = b.rank(x) + len(axes)
        b.set(y, b.mb.expand_dims(x=b.var(x), axes=sorted(a + rank if a < 0 else a for a in axes), name=b.name(y)))
