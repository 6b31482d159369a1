"""com.microsoft:QuickGelu (ORT ``quick_gelu_op_builder.cc``), produced by ORT's QuickGeluFusion."""

from __future__ import annotations

from mobile_ep import NodeUnit, RuleContext, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import CoreMLRule


class QuickGelu(CoreMLRule):
    """Input shape known; lowered as x * sigmoid(alpha * x)."""

    domain = "com.microsoft"
    op_types = ("QuickGelu",)
    neuralnetwork = False

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        xv = b.var(x)
        scaled = b.mb.mul(x=xv, y=b.scalar(attr(node, "alpha", 1.702), x), name=b.tmp(f"{y.name}_ax"))
        gate = b.mb.sigmoid(x=scaled, name=b.tmp(f"{y.name}_gate"))
        b.set(y, b.mb.mul(x=xv, y=gate, name=b.name(y)))
