"""Relu (ORT ``relu_op_builder.cc``): RELU, or fused into the producer's activation."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule


class ReluRule(NnapiRule):
    op_types = ("Relu",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Nothing beyond the common checks."""
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        x = b.get(unit.target.inputs[0], "any")
        y = b.new(unit.target.outputs[0], x.perm)
        b.op(OperationCode.RELU, [x.index], [y.index])
