"""LogSoftmax (compile_ops=extended only): LOG_SOFTMAX, feature level 3 (before opset 13 coerced to 2-D)."""

from __future__ import annotations

from mobile_ep import NodeUnit, RuleContext, Support
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule, rank_between
from .softmax import emit_softmax

COMPILE_ONLY = True


class LogSoftmaxRule(NnapiRule):
    op_types = ("LogSoftmax",)
    min_feature_level = 3

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input rank 1–4."""
        return rank_between(ctx, unit, 1, 4)

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        emit_softmax(unit, ctx, b, OperationCode.LOG_SOFTMAX)
