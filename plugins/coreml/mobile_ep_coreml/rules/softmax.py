"""Softmax (ORT ``softmax_op_builder.cc``)."""

from __future__ import annotations

import math

from mobile_ep import SUPPORTED, CompileError, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import CoreMLRule, normalize_axis, shape_text


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

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        """Before opset 13 the input is seen as 2-D ([prod(dims before axis), prod(the rest)])."""
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        rank = b.rank(x)
        opset = ctx.node_opset(node)
        axis = normalize_axis(int(attr(node, "axis", -1 if opset >= 13 else 1)), rank)
        if axis is None:
            raise CompileError(f"axis {attr(node, 'axis')} is out of range for rank {rank}")
        if opset >= 13 or axis == rank - 1:
            b.set(y, b.mb.softmax(x=b.var(x), axis=axis, name=b.name(y)))
            return
        shape = b.static_shape(x)
        flat = b.mb.reshape(x=b.var(x), shape=[math.prod(shape[:axis]), math.prod(shape[axis:])],
                            name=b.tmp(f"{y.name}_2d"))
        soft = b.mb.softmax(x=flat, axis=1, name=b.tmp(f"{y.name}_softmax"))
        b.set(y, b.mb.reshape(x=soft, shape=list(shape), name=b.name(y)))
