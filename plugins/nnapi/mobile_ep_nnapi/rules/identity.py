"""Identity (ORT ``identity_op_builder.cc``): no NNAPI op, the operand is aliased."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support

from ._base import NnapiRule


class IdentityRule(NnapiRule):
    op_types = ("Identity",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """A partition of a lone Identity is dropped."""
        return SUPPORTED
