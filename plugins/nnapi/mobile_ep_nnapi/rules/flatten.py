"""Flatten (ORT ``flatten_op_builder.cc``): RESHAPE."""

from __future__ import annotations

import math

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule, input_value, rank_between


def emit_reshape(b, source, target) -> None:
    """RESHAPE *source* (in ONNX order) into the static shape of *target*; uint8 keeps its quantization."""
    x = b.get(source, "onnx")
    y = b.like(target, source, "onnx")
    b.op(OperationCode.RESHAPE, [x.index, b.i32s(b.dims(b.shape(target), ()))], [y.index])


class FlattenRule(NnapiRule):
    op_types = ("Flatten",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input rank 1–4; the two output dims not both 0; a partition of a lone Flatten is dropped."""
        result = rank_between(ctx, unit, 1, 4)
        if not result:
            return result
        shape = ctx.static_shape(input_value(unit, 0)) or ()
        axis = attr(unit.target, "axis", 1)
        if axis < 0:
            axis += len(shape)
        if not 0 <= axis <= len(shape):
            return Support.no(f"axis {attr(unit.target, 'axis', 1)} is out of range for rank {len(shape)}")
        if math.prod(shape[:axis]) == 0 and math.prod(shape[axis:]) == 0:
            return Support.no(f"input shape {list(shape)} flattens to [0,0]")
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        emit_reshape(b, unit.target.inputs[0], unit.target.outputs[0])
