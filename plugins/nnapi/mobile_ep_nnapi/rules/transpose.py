"""Transpose, plain or as a QDQ unit (ORT ``transpose_op_builder.cc``): TRANSPOSE."""

from __future__ import annotations

from mobile_ep import NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.compile import Ref
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import FLOAT_OR_UINT8, NnapiRule, rank_between
from ._quant import check_quantized_io, unit_inputs, unit_outputs


class TransposeRule(NnapiRule):
    op_types = ("Transpose",)
    qdq_op_types = frozenset({"Transpose"})
    min_feature_level = 2
    input_dtypes = FLOAT_OR_UINT8
    internal_uint8 = frozenset({"Transpose"})

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        result = super().check_io(unit, ctx)
        if not result or unit.kind != "qdq":
            return result
        result = check_quantized_io(unit, ctx, (0,))
        return check_quantized_io(unit, ctx, (0,), output=True) if result else result

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input rank 1–4; QDQ unit: uint8 per-tensor input and output."""
        return rank_between(ctx, unit, 1, 4)

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """No operation of its own: the output is the input's operand read in another layout.

        A TRANSPOSE is added only where a consumer needs the result in a layout it does not have (so
        an ONNX Transpose meeting NNAPI's NHWC layout cancels out).
        """
        x_io, y_io = unit_inputs(unit)[0], unit_outputs(unit)[0]
        rank = b.rank(x_io.value)
        perm = tuple(attr(unit.target, "perm", tuple(reversed(range(rank)))))
        perm = tuple(p % rank for p in perm)
        inverse = [0] * rank
        for i, p in enumerate(perm):
            inverse[p] = i
        source = b.quant(x_io.value)
        target = b.quant(y_io.value) if unit.kind == "qdq" else source
        if source is not None and target is not None and source != target:
            x = b.get(x_io, "onnx")
            moved = b.scratch(b.model.operands[x.index].type, b.dims(b.shape(y_io.value), ()), like=x.index)
            b.op(OperationCode.TRANSPOSE, [x.index, b.i32s(perm)], [moved])
            b.set_quant(y_io.value, target)
            dims = b.model.operands[moved].dims
            b.bind(y_io.value, b.requantize(Ref(moved, tuple(range(rank))), dims, source, target))
            return
        if source is not None:
            b.set_quant(y_io.value, source)
        if not b.layouts(x_io.value):
            b.get(x_io, "onnx")
        for layout, index in b.bindings(x_io.value).items():
            b.bind(y_io.value, index, tuple(inverse[q] for q in layout))
