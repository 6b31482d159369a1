"""ArgMax (ORT ``argmax_op_builder.cc``)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, DataType, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import CoreMLRule, is_mlprogram


class ArgMax(CoreMLRule):
    op_types = ("ArgMax",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """select_last_index=0. NeuralNetwork: rejected when the output has several consumers and one of
        them is a Cast to int32 (ORT fuses ArgMax->Cast(int32) only when the Cast is the sole consumer)."""
        node = unit.target
        if attr(node, "select_last_index", 0) != 0:
            return Support.no("select_last_index=1; Core ML's argmax returns the first maximum")
        if is_mlprogram(ctx):
            return SUPPORTED
        consumers = ctx.consumers(node.outputs[0])
        if len(consumers) > 1:
            for consumer in consumers:
                if consumer.op_type == "Cast" and attr(consumer, "to") == DataType.INT32.value:
                    return Support.no(
                        "NeuralNetwork: the output feeds a Cast to int32 and other nodes; ORT can only fuse "
                        "the Cast when it is the sole consumer"
                    )
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        axis = int(attr(node, "axis", 0))
        b.set(y, b.mb.reduce_argmax(x=b.var(x), axis=axis, keep_dims=bool(attr(node, "keepdims", 1)),
                                    name=b.name(y)))
