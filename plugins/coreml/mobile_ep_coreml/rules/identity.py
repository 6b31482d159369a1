"""Identity (ORT ``identity_op_builder.cc``)."""

from __future__ import annotations

from mobile_ep import NodeUnit, RuleContext
from mobile_ep_coreml.mil import MILBuilder

from ._base import CoreMLRule


class Identity(CoreMLRule):
    """Base checks only."""

    op_types = ("Identity",)
    trivial = True

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        b.set(node.outputs[0], b.mb.identity(x=b.var(node.inputs[0]), name=b.name(node.outputs[0])))
