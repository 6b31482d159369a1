"""Elu (ORT ``elu_op_builder.cc``): ELU."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule


class EluRule(NnapiRule):
    op_types = ("Elu",)
    min_feature_level = 4
    # Elu-1 has the consumed_inputs attribute
    min_opset = 6

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Nothing beyond the common checks."""
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        x = b.get(unit.target.inputs[0], "any")
        y = b.new(unit.target.outputs[0], x.perm)
        b.op(OperationCode.ELU, [x.index, b.f32(attr(unit.target, "alpha", 1.0))], [y.index])
