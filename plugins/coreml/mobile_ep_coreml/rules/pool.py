"""Pooling (ORT ``pool_op_builder.cc``): AveragePool, MaxPool, GlobalAveragePool, GlobalMaxPool."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr

from ._base import CoreMLRule, is_mlprogram


def _rank4(unit: NodeUnit, ctx: RuleContext) -> Support:
    rank = ctx.rank(unit.target.inputs[0])
    if rank != 4:
        return Support.no(f"rank-{rank} input; ORT takes 4-D (2-D pooling) only")
    return SUPPORTED


class Pool(CoreMLRule):
    op_types = ("AveragePool", "MaxPool")

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """4-D input; 2-D kernel; storage_order=0; dilations 1; one output (no MaxPool indices).
        NeuralNetwork: ceil_mode=0."""
        result = _rank4(unit, ctx)
        if not result:
            return result
        node = unit.target
        if attr(node, "storage_order", 0) == 1:
            return Support.no("storage_order=1 is not supported")
        kernel = attr(node, "kernel_shape", (1, 1))
        if len(kernel) != 2:
            return Support.no(f"{len(kernel)}-D kernel; ORT takes 2-D pooling only")
        if not is_mlprogram(ctx) and attr(node, "ceil_mode", 0) == 1:
            return Support.no("NeuralNetwork: ceil_mode=1 is not supported (use model_format=MLProgram)")
        dilations = attr(node, "dilations")
        if dilations is not None and tuple(dilations) != (1, 1):
            return Support.no(f"dilations {list(dilations)}; Core ML pools without dilation")
        if len(node.outputs) != 1:
            return Support.no("the Indices output is not supported")
        return SUPPORTED


class GlobalPool(CoreMLRule):
    op_types = ("GlobalAveragePool", "GlobalMaxPool")

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """4-D input."""
        return _rank4(unit, ctx)
