"""Slice (ORT ``slice_op_builder.cc``): SLICE or STRIDED_SLICE."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule, constant_input, input_count, input_value, rank_between


class SliceRule(NnapiRule):
    op_types = ("Slice",)
    min_feature_level = 2
    # Slice-1 takes starts/ends as attributes
    min_opset = 10

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input rank ≤4 without zero dims; starts, ends (and axes, steps when given) constant initializers."""
        result = rank_between(ctx, unit, 0, 4)
        if not result:
            return result
        shape = ctx.static_shape(input_value(unit, 0)) or ()
        if 0 in shape:
            return Support.no(f"input 0 has a zero dim {list(shape)}")
        names = ("starts", "ends", "axes", "steps")
        for index, name in enumerate(names, start=1):
            if index > 2 and input_count(unit) <= index:
                break
            result = constant_input(ctx, unit, index, name)
            if not result:
                return result
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """STRIDED_SLICE with ONNX's clamped starts/ends resolved on the host (an end before index 0 with a
        negative step is NNAPI's end mask), in the input's layout."""
        node = unit.target
        x_value, out = node.inputs[0], node.outputs[0]
        shape = b.shape(x_value)
        rank = len(shape)
        if 0 in b.shape(out):
            b.empty.add(out)
            return

        def const(index: int, default: list[int]) -> list[int]:
            value = node.inputs[index] if len(node.inputs) > index else None
            return default if value is None else [int(v) for v in np.asarray(ctx.constant(value)).reshape(-1)]

        starts, ends = const(1, []), const(2, [])
        axes = const(3, list(range(len(starts))))
        steps = const(4, [1] * len(starts))
        begin, end, strides, end_mask = [0] * rank, list(shape), [1] * rank, [False] * rank
        for start, stop, axis, step in zip(starts, ends, axes, steps, strict=True):
            axis %= rank
            start_, stop_, step_ = slice(start, stop, step).indices(shape[axis])
            begin[axis], end[axis], strides[axis] = start_, stop_, step_
            end_mask[axis] = step_ < 0 and stop_ < 0
        x = b.get(x_value, b.preferred(x_value))
        perm = x.perm
        mask = sum(1 << i for i, p in enumerate(perm) if end_mask[p])
        y = b.new(out, perm)
        b.op(OperationCode.STRIDED_SLICE, [x.index, b.i32s([begin[p] for p in perm]), b.i32s([end[p] for p in perm]),
                                           b.i32s([strides[p] for p in perm]), b.i32(0), b.i32(mask), b.i32(0)],
             [y.index])
