"""Reductions (ORT ``reduction_op_builder.cc``): ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr

from ._base import CoreMLRule, is_constant, is_mlprogram, present


def _check_reduction(unit: NodeUnit, ctx: RuleContext) -> Support:
    node = unit.target
    if present(node, 1) and not is_constant(ctx, node.inputs[1]):
        return Support.no("axes (input 1) is not a constant initializer")
    if not is_mlprogram(ctx) and attr(node, "noop_with_empty_axes", 0) != 0:
        # ORT reads the axes' count from int64_data only, so axes stored as raw data (as most exporters,
        # and mobile-ep, write them) look empty, and NeuralNetwork has no no-op reduction.
        return Support.no(
            "NeuralNetwork: noop_with_empty_axes=1 is not supported (ORT may read the axes as empty); "
            "use model_format=MLProgram"
        )
    return SUPPORTED


class Reduce(CoreMLRule):
    op_types = ("ReduceSum", "ReduceMean")

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """axes, if an input, a constant initializer. NeuralNetwork: noop_with_empty_axes=0."""
        return _check_reduction(unit, ctx)


class MLProgramReduce(CoreMLRule):
    op_types = ("ReduceMax", "ReduceMin", "ReduceProd")
    neuralnetwork = False

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """axes, if an input, a constant initializer."""
        return _check_reduction(unit, ctx)
