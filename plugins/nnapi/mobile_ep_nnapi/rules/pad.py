"""Pad (ORT ``pad_op_builder.cc``): PAD_V2."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperandCode, OperationCode

from ._base import NnapiRule, constant_input, input_count, input_value, rank_between


class PadRule(NnapiRule):
    op_types = ("Pad",)
    min_feature_level = 3
    # before Pad-11 pads and value are attributes
    min_opset = 11

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input rank 1–4 without zero dims; mode constant; pads a constant initializer with no
        negative values; constant_value (when given) a constant initializer."""
        result = rank_between(ctx, unit, 1, 4)
        if not result:
            return result
        shape = ctx.static_shape(input_value(unit, 0)) or ()
        if 0 in shape:
            return Support.no(f"input 0 has a zero dim {list(shape)}")
        mode = attr(unit.target, "mode", "constant")
        if mode != "constant":
            return Support.no(f"mode {mode} is not supported (constant only)")
        result = constant_input(ctx, unit, 1, "pads")
        if not result:
            return result
        pads = np.asarray(ctx.constant(input_value(unit, 1))).reshape(-1)
        if np.any(pads < 0):
            return Support.no(f"pads {pads.tolist()} has negative values (cropping is not supported)")
        if input_count(unit) > 2:
            return constant_input(ctx, unit, 2, "constant_value")
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """PAD_V2 in the input's layout (paddings permuted with it)."""
        node = unit.target
        x_value = node.inputs[0]
        rank = b.rank(x_value)
        pads = np.asarray(ctx.constant(node.inputs[1])).astype(np.int64).reshape(-1)
        axes_value = node.inputs[3] if len(node.inputs) > 3 else None
        axes = list(range(rank)) if axes_value is None else [int(a) % rank for a in
                                                               np.asarray(ctx.constant(axes_value)).reshape(-1)]
        begin, end = [0] * rank, [0] * rank
        for i, axis in enumerate(axes):
            begin[axis], end[axis] = int(pads[i]), int(pads[i + len(axes)])
        value_input = node.inputs[2] if len(node.inputs) > 2 else None
        value = 0.0 if value_input is None else float(np.asarray(ctx.constant(value_input)).reshape(-1)[0])
        x = b.get(x_value, b.preferred(x_value))
        paddings = np.asarray([[begin[p], end[p]] for p in x.perm], dtype=np.int32)
        y = b.new(node.outputs[0], x.perm)
        b.op(OperationCode.PAD_V2, [x.index, b.constant(paddings, OperandCode.TENSOR_INT32), b.f32(value)], [y.index])
