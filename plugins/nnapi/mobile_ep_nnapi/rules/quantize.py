"""QuantizeLinear and DequantizeLinear on their own (ORT ``quantizelinear_op_builder.cc``,
``dequantizelinear_op_builder.cc``): QUANTIZE, DEQUANTIZE.  Inside a QDQ unit they belong to the unit."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule
from ._quant import check_quantized_io, unit_inputs, unit_outputs


class DequantizeLinearRule(NnapiRule):
    op_types = ("DequantizeLinear",)
    dtype_doc = ""

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        return check_quantized_io(unit, ctx, (0,))

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input uint8 with a constant per-tensor scale and zero point."""
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        x = b.get(unit_inputs(unit)[0], "any")
        y = b.new(unit.target.outputs[0], x.perm)
        b.op(OperationCode.DEQUANTIZE, [x.index], [y.index])


class QuantizeLinearRule(NnapiRule):
    op_types = ("QuantizeLinear",)
    min_feature_level = 3
    dtype_doc = ""

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        return check_quantized_io(unit, ctx, (0,), output=True)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Output uint8 with a constant per-tensor scale and zero point."""
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        x = b.get(unit.target.inputs[0], "any")
        y = b.new(unit_outputs(unit)[0], x.perm)
        b.op(OperationCode.QUANTIZE, [x.index], [y.index])
