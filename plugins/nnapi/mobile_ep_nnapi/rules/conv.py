"""Conv and QLinearConv, plain or as a QDQ unit (ORT ``conv_op_builder.cc``): CONV_2D, DEPTHWISE_CONV_2D,
GROUPED_CONV_2D."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, DataType, NodeUnit, RuleContext, Support, UnitIO, attr
from mobile_ep_nnapi.compile import conv_padding
from mobile_ep_nnapi.model import ChannelQuant
from mobile_ep_nnapi.nnapi import OperandCode, OperationCode, PaddingCode

from ._base import NnapiRule, constant_input, input_count, input_value, needs_feature_level
from ._quant import check_bias_quantization, quantized_op_type, unit_inputs, unit_outputs
from .binary import check_quantized_binary_io

_CONV_CODES = {"conv": OperationCode.CONV_2D, "depthwise": OperationCode.DEPTHWISE_CONV_2D,
               "grouped": OperationCode.GROUPED_CONV_2D}


def filter_layout(w: np.ndarray, kind: str) -> np.ndarray:
    """ONNX [O, I/g, KH, KW] weights as NNAPI filters: OHWI, or [1, KH, KW, O] for a depthwise convolution."""
    if kind == "depthwise":
        return np.transpose(w.reshape(w.shape[0], w.shape[2], w.shape[3]), (1, 2, 0))[None]
    return np.transpose(w, (0, 2, 3, 1))


def quantized_filter(b, ctx: RuleContext, x_io: UnitIO, w_io: UnitIO, bias_io: UnitIO | None, kind: str,
                     filt: np.ndarray, units: int) -> tuple[int, int]:
    """(filter, bias) operands of a quantized convolution or fully-connected layer.

    uint8 filters keep their zero point; int8 per-tensor filters become uint8 with +128 on the values and
    the zero point; int8 per-channel filters are TENSOR_QUANT8_SYMM_PER_CHANNEL (feature level 3, channel
    dim 0 for OHWI / [units, in], 3 for depthwise).  The bias is int32 with scale input × filter (0 with
    per-channel filters, whose bias scales NNAPI derives per channel).
    """
    input_scale, _ = b.quant(x_io.value)
    scales = np.asarray(ctx.constant(w_io.scale), dtype=np.float32).reshape(-1)
    zero_points = np.zeros(1, dtype=np.int64)
    if w_io.zero_point is not None:
        zero_points = np.asarray(ctx.constant(w_io.zero_point)).astype(np.int64).reshape(-1)
    if scales.size > 1:
        b.require(3, "a per-channel quantized filter")
        channel_dim = 3 if kind == "depthwise" else 0
        filt_op = b.constant(filt.astype(np.int8), OperandCode.TENSOR_QUANT8_SYMM_PER_CHANNEL,
                             channel_quant=ChannelQuant(channel_dim, tuple(float(s) for s in scales)))
        bias_scales = np.float64(input_scale) * scales.astype(np.float64)
        bias_operand_scale = 0.0
    else:
        zp = int(zero_points[0])
        if filt.dtype == np.int8:
            filt, zp = (filt.astype(np.int16) + 128).astype(np.uint8), zp + 128
        filt_op = b.constant(filt.astype(np.uint8), OperandCode.TENSOR_QUANT8_ASYMM, float(scales[0]), zp)
        bias_operand_scale = float(np.float32(input_scale) * scales[0])
        bias_scales = np.full(units, np.float64(bias_operand_scale))
    if bias_io is None:
        bias = np.zeros(units, dtype=np.int32)
    else:
        raw = np.asarray(ctx.constant(bias_io.value)).reshape(-1)
        if ctx.dtype(bias_io.value) == DataType.INT32:
            given = None if bias_io.scale is None else np.asarray(ctx.constant(bias_io.scale), np.float64).reshape(-1)
            if given is None or np.allclose(given, bias_scales, rtol=1e-6):
                bias = raw.astype(np.int32)
            else:
                bias = np.rint(raw * given / bias_scales).astype(np.int32)
        else:
            bias = np.rint(raw.astype(np.float64) / bias_scales).astype(np.int32)
    return filt_op, b.constant(bias, OperandCode.TENSOR_INT32, bias_operand_scale, 0)


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
            result = constant_input(ctx, unit, 2, "bias", shown=8 if unit.kind == "single" else 2)
            return check_bias_quantization(unit, ctx) if result else result
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """CONV_2D, DEPTHWISE_CONV_2D (group = input channels) or GROUPED_CONV_2D (feature level 3; below it,
        one CONV_2D per group on STRIDED_SLICEs, then CONCATENATION), NHWC with OHWI / [1,H,W,O] filters,
        implicit (SAME_UPPER, VALID) or explicit padding, a following Relu/Clip fused; quantized: uint8
        tensors, an int32 bias with scale input × filter."""
        node = unit.target
        ins, outs = unit_inputs(unit), unit_outputs(unit)
        x_io, w_io = ins[0], ins[1]
        bias_io = ins[2] if len(ins) > 2 else None
        x_shape = b.shape(x_io.value)
        w = np.asarray(ctx.constant(w_io.value))
        units, per_group, kh, kw = w.shape
        channels = x_shape[1]
        group = int(attr(node, "group", 1))
        kind = "conv" if group == 1 else "depthwise" if (per_group == 1 and group == channels) else "grouped"
        strides = tuple(attr(node, "strides", (1, 1)))
        dilations = tuple(attr(node, "dilations", (1, 1)))
        form, (left, right, top, bottom) = conv_padding(tuple(attr(node, "pads", (0, 0, 0, 0))),
                                                        attr(node, "auto_pad", "NOTSET"), x_shape[2:], (kh, kw),
                                                        strides, dilations)
        nchw = b.use_nchw
        layout = "onnx" if nchw else "nhwc"
        x = b.get(x_io, layout)
        filt = filter_layout(w, kind)
        if self.is_quantized(unit):
            filt_op, bias_op = quantized_filter(b, ctx, x_io, w_io, bias_io, kind, filt, units)
        else:
            filt_op = b.constant(filt.astype(np.float32), OperandCode.TENSOR_FLOAT32)
            bias = np.zeros(units, np.float32) if bias_io is None else np.asarray(ctx.constant(bias_io.value))
            bias_op = b.constant(np.asarray(bias, dtype=np.float32).reshape(-1), OperandCode.TENSOR_FLOAT32)
        if form == "explicit":
            padding = [b.i32(left), b.i32(right), b.i32(top), b.i32(bottom)]
        else:
            padding = [b.i32(PaddingCode.SAME if form == "same" else PaddingCode.VALID)]
        strides_args = [b.i32(strides[1]), b.i32(strides[0])]
        if kind == "grouped" and b.feature_level < 3:
            self._emit_split_groups(b, unit, x, filt_op, bias_op, padding, strides_args, group, dilations)
            return
        extra = [b.i32(units // channels)] if kind == "depthwise" else [b.i32(group)] if kind == "grouped" else []
        if kind == "grouped":
            tail = [b.flag(nchw)]
            if dilations != (1, 1):
                raise b.fail("GROUPED_CONV_2D takes no dilations")
        elif dilations != (1, 1):
            b.require(3, "a dilated convolution")
            tail = [b.flag(nchw), b.i32(dilations[1]), b.i32(dilations[0])]
        else:
            tail = b.layout_flag(nchw)
        y, fuse = b.new_fused(outs[0].value, layout)
        b.op(_CONV_CODES[kind], [x.index, filt_op, bias_op, *padding, *strides_args, *extra, fuse, *tail], [y.index])

    @staticmethod
    def _emit_split_groups(b, unit: NodeUnit, x, filt_op: int, bias_op: int, padding: list[int],
                           strides_args: list[int], group: int, dilations: tuple) -> None:
        """A grouped convolution below feature level 3: per group, STRIDED_SLICE the channels, CONV_2D."""
        if dilations != (1, 1):
            b.require(3, "a dilated convolution")
        x_dims = b.model.operands[x.index].dims  # NHWC
        out_value = unit_outputs(unit)[0].value
        n, _, oh, ow = b.shape(out_value)
        filt = b.model.value(filt_op)
        bias = b.model.value(bias_op)
        filt_operand, bias_operand = b.model.operands[filt_op], b.model.operands[bias_op]
        per_in, per_out = x_dims[3] // group, filt.shape[0] // group
        y, fuse = b.new_fused(out_value, "nhwc")
        parts = []
        for g in range(group):
            sliced = b.scratch(b.model.operands[x.index].type, (*x_dims[:3], per_in), like=x.index)
            b.op(OperationCode.STRIDED_SLICE, [x.index, b.i32s([0, 0, 0, g * per_in]),
                                               b.i32s([*x_dims[:3], (g + 1) * per_in]), b.i32s([1, 1, 1, 1]),
                                               b.i32(0), b.i32(0), b.i32(0)], [sliced])
            f = b.constant(filt[g * per_out:(g + 1) * per_out], filt_operand.type, filt_operand.scale,
                           filt_operand.zero_point)
            bb = b.constant(bias[g * per_out:(g + 1) * per_out], bias_operand.type, bias_operand.scale, 0)
            part = b.scratch(b.model.operands[y.index].type, (n, oh, ow, per_out), like=y.index)
            b.op(OperationCode.CONV_2D, [sliced, f, bb, *padding, *strides_args, fuse], [part])
            parts.append(part)
        b.op(OperationCode.CONCATENATION, [*parts, b.i32(3)], [y.index])


class MsQLinearConvRule(ConvRule):
    domain = "com.microsoft"
    op_types = ("QLinearConv",)
    qdq_op_types = frozenset()

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Not supported (the com.microsoft NHWC form); ai.onnx QLinearConv is."""
        return Support.no("the com.microsoft (NHWC) variant is not supported; use ai.onnx QLinearConv")
