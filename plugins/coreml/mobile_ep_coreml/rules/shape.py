"""Shape (ORT ``shape_op_builder.cc``)."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import FLOAT, FLOAT16, INT32, INT64, CoreMLRule, check_type, is_mlprogram, normalize_axis


class Shape(CoreMLRule):
    op_types = ("Shape",)

    def check_types(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input float32 (ML Program: float32, float16, int32 or int64)."""
        allowed = {FLOAT, FLOAT16, INT32, INT64} if is_mlprogram(ctx) else {FLOAT}
        return check_type(ctx, unit.target.inputs[0], allowed, "the input")

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """NeuralNetwork: no start/end slicing. ML Program: input not a scalar; start and end (if given)
        within [-rank, rank-1] and selecting at least one dim."""
        node = unit.target
        has_end = "end" in node.attributes
        start = int(attr(node, "start", 0))
        if not is_mlprogram(ctx):
            if has_end or start != 0:
                return Support.no("NeuralNetwork: start/end slicing is not supported (use model_format=MLProgram)")
            return SUPPORTED
        rank = ctx.rank(node.inputs[0])
        assert rank is not None
        # ORT normalizes start and end with HandleNegativeAxis, which throws (failing session creation)
        # for values ONNX allows and clamps, such as end=rank.
        if rank == 0:
            return Support.no("a scalar input; ORT's ML Program builder throws on it (failing session creation)")
        first = normalize_axis(start, rank)
        if first is None:
            return Support.no(
                f"start={start} is outside [-{rank}, {rank - 1}]; ORT's CoreML EP throws on it (clamp it)"
            )
        if has_end:
            end = int(attr(node, "end"))
            last = normalize_axis(end, rank)
            if last is None:
                return Support.no(
                    f"end={end} is outside [-{rank}, {rank - 1}]; ORT's CoreML EP throws on it (omit end to "
                    "take the remaining dims)"
                )
        else:
            last = rank
        if last - first <= 0:
            return Support.no(f"start={start} and end select no dims; Core ML has no empty tensors")
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        rank = b.rank(x)
        start = normalize_axis(int(attr(node, "start", 0)), rank) or 0
        end = normalize_axis(int(attr(node, "end")), rank) if "end" in node.attributes else rank
        if start == 0 and end == rank:
            b.set(y, b.mb.shape(x=b.var(x), name=b.name(y)))
            return
        shape = b.mb.shape(x=b.var(x), name=b.tmp(f"{y.name}_all"))
        b.set(y, b.mb.slice_by_index(x=shape, begin=np.array([start], np.int32), end=np.array([end], np.int32),
                                     name=b.name(y)))
