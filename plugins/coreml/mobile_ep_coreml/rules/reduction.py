"""Reductions (ORT ``reduction_op_builder.cc``): ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import CoreMLRule, constant_value, is_constant, is_mlprogram, present


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


def lower_reduction(unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
    node = unit.target
    x, y = node.inputs[0], node.outputs[0]
    if present(node, 1):
        axes = [int(a) for a in np.asarray(constant_value(ctx, node.inputs[1])).reshape(-1)]
    else:
        raw = attr(node, "axes")
        axes = [int(a) for a in raw] if raw is not None else []
    if not axes and attr(node, "noop_with_empty_axes", 0):
        b.set(y, b.mb.identity(x=b.var(x), name=b.name(y)))
        return
    fn = {"ReduceSum": b.mb.reduce_sum, "ReduceMean": b.mb.reduce_mean, "ReduceMax": b.mb.reduce_max,
          "ReduceMin": b.mb.reduce_min, "ReduceProd": b.mb.reduce_prod}[node.op_type]
    b.set(y, fn(x=b.var(x), axes=axes or None, keep_dims=bool(attr(node, "keepdims", 1)), name=b.name(y)))


class Reduce(CoreMLRule):
    op_types = ("ReduceSum", "ReduceMean")

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """axes, if an input, a constant initializer. NeuralNetwork: noop_with_empty_axes=0."""
        return _check_reduction(unit, ctx)

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        lower_reduction(unit, ctx, b)


class MLProgramReduce(CoreMLRule):
    op_types = ("ReduceMax", "ReduceMin", "ReduceProd")
    neuralnetwork = False

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """axes, if an input, a constant initializer."""
        return _check_reduction(unit, ctx)

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        lower_reduction(unit, ctx, b)
