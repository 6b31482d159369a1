"""MaxPool (2-D): the NPU's MAXPOOL2D."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_example.builder import ProgramBuilder
from mobile_ep_example.enpu import Op

from ._base import AUTO_PADS, ExampleRule, explicit_pads, pair


class MaxPool(ExampleRule):
    op_types = ("MaxPool",)
    #: MaxPool-1 has no dilations or ceil_mode; the rule follows opset 8 and later.
    min_opset = 8

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """2-D only (4-D input), no Indices output; any padding, strides, dilations, ceil_mode"""
        if len(unit.target.outputs) > 1 and unit.target.outputs[1].name:
            return Support.no("the Indices output is not supported")
        rank = len(ctx.static_shape(unit.inputs[0].value))  # type: ignore[union-attr,arg-type]
        if rank != 4:
            return Support.no(f"only 2-D pooling (4-D input) is supported, not {rank - 2}-D")
        if attr(unit.target, "auto_pad", "NOTSET") not in AUTO_PADS:
            return Support.no(f"auto_pad {attr(unit.target, 'auto_pad')!r} is not supported")
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, builder: ProgramBuilder) -> None:
        node = unit.target
        kernel = pair(attr(node, "kernel_shape"))
        strides, dilations = pair(attr(node, "strides")), pair(attr(node, "dilations"))
        pads = explicit_pads(unit, ctx, kernel, strides, dilations)
        builder.op(Op.MAXPOOL2D, [unit.inputs[0].value], [unit.outputs[0].value],  # type: ignore[union-attr]
                   (*kernel, *strides, *pads, *dilations))
