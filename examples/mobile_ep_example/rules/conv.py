"""Conv (2-D): the NPU's CONV2D, weights and bias compiled into the program."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_example.builder import ProgramBuilder
from mobile_ep_example.enpu import Op

from ._base import AUTO_PADS, ExampleRule, explicit_pads, pair


class Conv(ExampleRule):
    op_types = ("Conv",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """2-D only (4-D input); weight and bias constant; any padding, strides, dilations and groups"""
        x, w = unit.inputs[0], unit.inputs[1]
        b = unit.inputs[2] if len(unit.inputs) > 2 else None
        x_shape = ctx.static_shape(x.value)  # type: ignore[union-attr]
        if len(x_shape) != 4:  # type: ignore[arg-type]
            return Support.no(f"only 2-D convolutions (4-D input) are supported, not {len(x_shape) - 2}-D")  # type: ignore[arg-type]
        if not ctx.is_constant(w.value):  # type: ignore[union-attr]
            return Support.no("the weight (input 1) is not a constant initializer")
        if b is not None and not ctx.is_constant(b.value):
            return Support.no("the bias (input 2) is not a constant initializer")
        if attr(unit.target, "auto_pad", "NOTSET") not in AUTO_PADS:
            return Support.no(f"auto_pad {attr(unit.target, 'auto_pad')!r} is not supported")
        w_shape = ctx.static_shape(w.value)  # type: ignore[union-attr]
        group = int(attr(unit.target, "group", 1))
        if x_shape[1] != w_shape[1] * group:  # type: ignore[index]
            return Support.no(f"{x_shape[1]} input channels do not match weights {list(w_shape)} with group {group}")  # type: ignore[index,arg-type]
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, builder: ProgramBuilder) -> None:
        node = unit.target
        w_shape = ctx.static_shape(unit.inputs[1].value)  # type: ignore[union-attr]
        kernel = (w_shape[2], w_shape[3])  # type: ignore[index]
        strides, dilations = pair(attr(node, "strides")), pair(attr(node, "dilations"))
        pads = explicit_pads(unit, ctx, kernel, strides, dilations)
        params = (*strides, *pads, *dilations, int(attr(node, "group", 1)))
        builder.op(Op.CONV2D, [io.value if io is not None else None for io in unit.inputs],
                   [unit.outputs[0].value], params)
