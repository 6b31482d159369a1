"""Relu: the NPU's RELU."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support
from mobile_ep_example.builder import ProgramBuilder
from mobile_ep_example.enpu import Op

from ._base import ExampleRule


class Relu(ExampleRule):
    op_types = ("Relu",)
    min_opset = 6

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """any float32 tensor of rank <= 4 with a static shape"""
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, builder: ProgramBuilder) -> None:
        builder.op(Op.RELU, [unit.inputs[0].value], [unit.outputs[0].value])  # type: ignore[union-attr]
