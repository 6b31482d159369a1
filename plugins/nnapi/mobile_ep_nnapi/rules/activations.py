"""Activations ORT's NNAPI EP does not take, as NNAPI ops or short chains of them (compile_ops=extended
only): HardSwish (HARD_SWISH), HardSigmoid, Ceil, Cos, Reciprocal, Softsign, Softplus, Selu, Celu,
ThresholdedRelu, Mish."""

from __future__ import annotations

import math

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperandCode
from mobile_ep_nnapi.nnapi import OperationCode as Op

from ._base import NnapiRule, rank_between
from ._chain import Chain

COMPILE_ONLY = True


class ExtendedActivationRule(NnapiRule):
    op_types = ("HardSwish", "HardSigmoid", "Ceil", "Cos", "Reciprocal", "Softsign", "Softplus", "Selu", "Celu",
                "ThresholdedRelu", "Mish")
    min_feature_level = 3
    feature_levels = {"HardSwish": 4, "Selu": 4, "Celu": 4, "Reciprocal": 2}
    min_opsets = {"Ceil": 6, "HardSigmoid": 6, "Reciprocal": 6, "Selu": 6}

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input rank ≤4 (compile_ops=extended: lowered by mobile-ep, never taken by ORT's NNAPI EP)."""
        result = rank_between(ctx, unit, 0, 4)
        if not result:
            return result
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        c = Chain(b, x)
        op = unit.op_type
        if op == "HardSwish":
            c.unary(Op.HARD_SWISH, out=c.output(y))
        elif op == "HardSigmoid":
            alpha, beta = float(attr(node, "alpha", 0.2)), float(attr(node, "beta", 0.5))
            c.with_scalar(Op.MUL, alpha).with_scalar(Op.ADD, beta).with_scalar(Op.MAXIMUM, 0.0)
            c.with_scalar(Op.MINIMUM, 1.0, out=c.output(y))
        elif op == "Ceil":  # -floor(-x)
            c.unary(Op.NEG).unary(Op.FLOOR).unary(Op.NEG, out=c.output(y))
        elif op == "Cos":  # sin(x + pi/2)
            c.with_scalar(Op.ADD, math.pi / 2).unary(Op.SIN, out=c.output(y))
        elif op == "Reciprocal":
            c.with_scalar(Op.DIV, 1.0, first=True, out=c.output(y))
        elif op == "Softsign":  # x / (1 + |x|)
            source = c.current
            c.unary(Op.ABS).with_scalar(Op.ADD, 1.0).binary(Op.DIV, source, first=True, out=c.output(y))
        elif op == "Softplus":  # log(exp(x) + 1)
            c.unary(Op.EXP).with_scalar(Op.ADD, 1.0).unary(Op.LOG, out=c.output(y))
        elif op == "Selu":  # gamma * elu(x, alpha)
            alpha = float(attr(node, "alpha", 1.67326319217681884765625))
            gamma = float(attr(node, "gamma", 1.05070102214813232421875))
            c.op(Op.ELU, [b.f32(alpha)]).with_scalar(Op.MUL, gamma, out=c.output(y))
        elif op == "Celu":  # alpha * elu(x / alpha, 1)
            alpha = float(attr(node, "alpha", 1.0))
            c.with_scalar(Op.DIV, alpha).op(Op.ELU, [b.f32(1.0)]).with_scalar(Op.MUL, alpha, out=c.output(y))
        elif op == "ThresholdedRelu":  # SELECT(x > alpha, x, 0)
            source = c.current
            mask = c.op(Op.GREATER, [c.scalar_tensor(float(attr(node, "alpha", 1.0)))],
                        out_code=OperandCode.TENSOR_BOOL8).current
            out = c.output(y)
            zeros = b.constant(np.zeros(b.model.operands[out].dims, np.float32), OperandCode.TENSOR_FLOAT32)
            b.op(Op.SELECT, [mask, source, zeros], [out])
        elif op == "Mish":  # x * tanh(log(exp(x) + 1))
            source = c.current
            c.unary(Op.EXP).with_scalar(Op.ADD, 1.0).unary(Op.LOG).unary(Op.TANH)
            c.binary(Op.MUL, source, out=c.output(y))
        else:  # pragma: no cover - op_types lists every case
            raise b.fail(f"no lowering for {op}")
