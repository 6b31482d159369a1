"""Elementwise unary ops (ORT ``unary_op_builder.cc``)."""

from __future__ import annotations

from mobile_ep import NodeUnit, RuleContext
from mobile_ep_coreml.mil import MILBuilder

from ._base import CoreMLRule


def lower_unary(unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
    node = unit.target
    x, y = node.inputs[0], node.outputs[0]
    mb = b.mb
    if node.op_type == "Reciprocal":
        b.set(y, mb.inverse(x=b.var(x), epsilon=b.scalar(0.0, x), name=b.name(y)))
        return
    fn = {"Sqrt": mb.sqrt, "Erf": mb.erf, "Round": mb.round, "Exp": mb.exp, "Sin": mb.sin, "Cos": mb.cos,
          "Ceil": mb.ceil}[node.op_type]
    b.set(y, fn(x=b.var(x), name=b.name(y)))


class Unary(CoreMLRule):
    """Base checks only."""

    op_types = ("Sqrt", "Reciprocal")

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        lower_unary(unit, ctx, b)


class MLProgramUnary(CoreMLRule):
    """Base checks only."""

    op_types = ("Erf", "Round", "Exp", "Sin", "Cos")
    neuralnetwork = False

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        lower_unary(unit, ctx, b)


class Ceil(CoreMLRule):
    """Base checks only."""

    op_types = ("Ceil",)
    neuralnetwork = False
    trivial = True

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        lower_unary(unit, ctx, b)
