"""Add and Mul: the NPU's ADD and MUL, with numpy broadcasting (unless the option turns it off)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support
from mobile_ep_example.builder import ProgramBuilder
from mobile_ep_example.enpu import Op

from ._base import ExampleRule


class Binary(ExampleRule):
    op_types = ("Add", "Mul")
    #: Opset 6 and older broadcast through an attribute; the NPU follows opset 7's numpy rules.
    min_opset = 7
    OPCODES: ClassVar[dict[str, Op]] = {"Add": Op.ADD, "Mul": Op.MUL}

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """both inputs float32; shapes equal, or broadcastable when `allow_broadcast` is on"""
        a, b = (ctx.static_shape(io.value) for io in unit.inputs)  # type: ignore[union-attr]
        if a == b:
            return SUPPORTED
        if not ctx.options.allow_broadcast:
            return Support.no(f"inputs have shapes {list(a)} and {list(b)} and allow_broadcast is off")
        try:
            np.broadcast_shapes(a, b)
        except ValueError:
            return Support.no(f"shapes {list(a)} and {list(b)} do not broadcast")
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, builder: ProgramBuilder) -> None:
        builder.op(self.OPCODES[unit.op_type], [io.value for io in unit.inputs],  # type: ignore[union-attr]
                   [unit.outputs[0].value])
