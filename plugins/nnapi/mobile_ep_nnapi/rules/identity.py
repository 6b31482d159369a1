"""Identity (ORT ``identity_op_builder.cc``): no NNAPI op, the operand is aliased."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support

from ._base import NnapiRule


class IdentityRule(NnapiRule):
    op_types = ("Identity",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """A partition of a lone Identity is dropped."""
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """No operation: the output is the input's operand (a model output gets a copy)."""
        b.alias(unit.target.outputs[0], unit.target.inputs[0])
