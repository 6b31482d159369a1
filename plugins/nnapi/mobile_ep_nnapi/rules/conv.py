"""Conv and QLinearConv, plain or as a QDQ unit (ORT ``conv_op_builder.cc``): CONV_2D, DEPTHWISE_CONV_2D,
GROUPED_CONV_2D."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr

from ._base import NnapiRule, constant_input, input_count, input_value, needs_feature_level
from ._quant import quantized_op_type
from .binary import check_quantized_binary_io


class ConvRule(NnapiRule):
    op_types = ("Conv", "QLinearConv")
    qdq_op_types = frozenset({"Conv"})
    min_feature_level = 2
    nchw_feature_level = True

    @staticmethod
    def is_quantized(unit: NodeUnit) -> bool:
        return quantized_op_type(unit) in ("QLinearConv", "QDQConv")

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        if self.is_quantized(unit):
            return check_quantized_binary_io(unit, ctx)
        return super().check_io(unit, ctx)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Weight a constant 4-D initializer (2-D conv); dilations ≠1 need feature level 3 and, with group ≠1, a
        depthwise weight; quantized (QLinearConv, QDQ unit): uint8 input and output, uint8 or int8 weight,
        constant bias."""
        weight = input_value(unit, 1)
        if not ctx.is_constant(weight):
            return Support.no("weight (input 1) is not a constant initializer")
        weight_shape = ctx.shape(weight) or ()
        if len(weight_shape) != 4:
            return Support.no(f"weight is {len(weight_shape)}-D; only 2-D convolution (4-D weight) is supported")
        dilations = attr(unit.target, "dilations", (1, 1))
        if tuple(dilations) != (1, 1):
            group = attr(unit.target, "group", 1)
            if group != 1 and weight_shape[1] != 1:
                return Support.no("dilations ≠1 are not supported on a grouped (non-depthwise) convolution")
            result = needs_feature_level(ctx, 3, "a dilated convolution")
            if not result:
                return result
        if self.is_quantized(unit) and input_count(unit) > 2:
            return constant_input(ctx, unit, 2, "bias", shown=8 if unit.kind == "single" else 2)
        return SUPPORTED


class MsQLinearConvRule(ConvRule):
    domain = "com.microsoft"
    op_types = ("QLinearConv",)
    qdq_op_types = frozenset()

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Not supported (the com.microsoft NHWC form); ai.onnx QLinearConv is."""
        return Support.no("the com.microsoft (NHWC) variant is not supported; use ai.onnx QLinearConv")
