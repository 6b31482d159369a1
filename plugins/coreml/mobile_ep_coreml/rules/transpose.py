"""Transpose (ORT ``transpose_op_builder.cc``)."""

from __future__ import annotations

from mobile_ep import NodeUnit, RuleContext, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import CoreMLRule


class Transpose(CoreMLRule):
    """Base checks only."""

    op_types = ("Transpose",)
    trivial = True

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        perm = attr(node, "perm")
        perm = [int(p) for p in perm] if perm is not None else list(reversed(range(b.rank(x))))
        b.set(y, b.mb.transpose(x=b.var(x), perm=perm, name=b.name(y)))
