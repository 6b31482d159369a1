"""Elementwise unary ops (ORT ``unary_op_builder.cc``): ABS, EXP, FLOOR, LOG, LOGISTIC, NEG, SIN, SQRT, TANH."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support
from mobile_ep_nnapi.nnapi import OperationCode as Op

from ._base import NnapiRule, rank_between

_NNAPI = {"Abs": Op.ABS, "Exp": Op.EXP, "Floor": Op.FLOOR, "Log": Op.LOG, "Neg": Op.NEG, "Sigmoid": Op.LOGISTIC,
          "Sin": Op.SIN, "Sqrt": Op.SQRT, "Tanh": Op.TANH}


class UnaryRule(NnapiRule):
    op_types = ("Abs", "Exp", "Floor", "Log", "Neg", "Sigmoid", "Sin", "Sqrt", "Tanh")
    feature_levels = {"Abs": 3, "Exp": 3, "Log": 3, "Neg": 3, "Sin": 3, "Sqrt": 3}
    # opset 5 and below use the consumed_inputs attribute
    min_opset = 6

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Sigmoid: input rank 1–4."""
        if unit.op_type == "Sigmoid":
            return rank_between(ctx, unit, 1, 4)
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        x = b.get(unit.target.inputs[0], "any")
        y = b.new(unit.target.outputs[0], x.perm)
        b.op(_NNAPI[unit.op_type], [x.index], [y.index])
