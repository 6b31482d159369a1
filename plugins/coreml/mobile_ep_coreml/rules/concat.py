"""Concat (ORT ``concat_op_builder.cc``)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import CoreMLRule, is_mlprogram, normalize_axis


class Concat(CoreMLRule):
    op_types = ("Concat",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """At least 2 inputs. NeuralNetwork: rank-4 inputs joined on the channel axis (1 or -3)."""
        node = unit.target
        if len(node.inputs) < 2:
            return Support.no(f"{len(node.inputs)} input; Core ML's concat takes 2 or more (use Identity)")
        if is_mlprogram(ctx):
            return SUPPORTED
        shape = ctx.shape(node.inputs[0])
        assert shape is not None
        rank = len(shape)
        if rank != 4:
            return Support.no(
                f"NeuralNetwork: rank-{rank} inputs; ORT takes only rank 4 there (Core ML concatenates 3-D "
                "tensors on the wrong axis); use model_format=MLProgram"
            )
        axis = normalize_axis(int(attr(node, "axis", 1)), rank)
        if axis != 1:
            return Support.no(
                f"NeuralNetwork: axis {attr(node, 'axis', 1)}; ORT takes only the channel axis (1 or -3) there; "
                "use model_format=MLProgram"
            )
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        y = node.outputs[0]
        values = [b.var(v) for v in node.inputs]
        b.set(y, b.mb.concat(values=values, axis=int(attr(node, "axis")), name=b.name(y)))
