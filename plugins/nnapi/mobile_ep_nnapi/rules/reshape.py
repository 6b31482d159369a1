"""Reshape, plain or as a QDQ unit (ORT ``reshape_op_builder.cc``): RESHAPE."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule, constant_input, input_value, rank_between
from ._quant import check_quantized_io, unit_inputs, unit_outputs


def emit_data_movement(b, unit: NodeUnit, code: OperationCode, params: list[int], perm=None) -> None:
    """RESHAPE/TRANSPOSE-like ops: the output keeps the input's type; a QDQ unit whose output scale or zero
    point differs from its input's is requantized after the op."""
    x_io, y_io = unit_inputs(unit)[0], unit_outputs(unit)[0]
    x = b.get(x_io, "onnx" if perm is None else perm)
    target = b.quant(y_io.value)
    y = b.like(y_io.value, x_io.value, "onnx")
    b.op(code, [x.index, *params], [y.index])
    source = b.quant(x_io.value)
    if unit.kind == "qdq" and target is not None and source != target:
        dims = b.model.operands[y.index].dims
        b.bind(y_io.value, b.requantize(y, dims, source, target))
        b.set_quant(y_io.value, target)


class ReshapeRule(NnapiRule):
    op_types = ("Reshape",)
    qdq_op_types = frozenset({"Reshape"})
    # opset 4 and below take the new shape as an attribute
    min_opset = 5

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        if unit.kind != "qdq":
            return super().check_io(unit, ctx)
        result = check_quantized_io(unit, ctx, (0,))
        return check_quantized_io(unit, ctx, (0,), output=True) if result else result

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Shape a constant initializer; input rank 1–4; a 0 in the shape is rejected with allowzero=1 or where
        the input dim is 0."""
        result = constant_input(ctx, unit, 1, "shape")
        if not result:
            return result
        result = rank_between(ctx, unit, 1, 4)
        if not result:
            return result
        input_shape = ctx.static_shape(input_value(unit, 0)) or ()
        new_shape = np.asarray(ctx.constant(input_value(unit, 1))).reshape(-1)
        allow_zero = attr(unit.target, "allowzero", 0) == 1
        for index, dim in enumerate(new_shape.tolist()):
            if dim != 0:
                continue
            if index < len(input_shape) and input_shape[index] == 0:
                return Support.no(f"shape[{index}] is 0 (copy the input dim) but the input dim is 0")
            if allow_zero:
                return Support.no(f"shape[{index}] is 0 with allowzero=1 (an empty dim) is not supported")
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """RESHAPE to the static output shape."""
        out = unit_outputs(unit)[0].value
        emit_data_movement(b, unit, OperationCode.RESHAPE, [b.i32s(b.dims(b.shape(out), ()))])
