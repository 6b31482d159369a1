"""BatchNormalization (ORT ``batchnorm_op_builder.cc``): precomputed MUL + ADD."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr

from ._base import NnapiRule, constant_input, rank_between


class BatchNormalizationRule(NnapiRule):
    op_types = ("BatchNormalization",)
    # opset 6 and below have unsupported attributes
    min_opset = 7

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """One output (inference mode); input rank ≤4; spatial=1; scale, B, mean and var constant initializers."""
        outputs = len(unit.target.outputs)
        if outputs != 1:
            return Support.no(f"has {outputs} outputs (training mode); export the model in inference mode")
        result = rank_between(ctx, unit, 0, 4)
        if not result:
            return result
        if attr(unit.target, "spatial", 1) != 1:
            return Support.no("spatial=0 (non-spatial) is not supported")
        for index, name in ((1, "scale"), (2, "B"), (3, "mean"), (4, "var")):
            result = constant_input(ctx, unit, index, name)
            if not result:
                return result
        return SUPPORTED
