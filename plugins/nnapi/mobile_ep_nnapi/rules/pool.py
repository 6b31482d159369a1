"""Pooling (ORT ``pool_op_builder.cc``): AVERAGE_POOL_2D, MAX_POOL_2D (and their global forms)."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, DataType, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.compile import conv_padding
from mobile_ep_nnapi.nnapi import OperandCode, OperationCode, PaddingCode

from ._base import FLOAT_OR_UINT8, NnapiRule, extended, needs_feature_level, rank_between
from ._quant import check_quantized_io, quantized_op_type, scale_and_zero_point, unit_inputs, unit_outputs


def is_quantized_average_pool(unit: NodeUnit) -> bool:
    return quantized_op_type(unit) in ("QLinearAveragePool", "QDQAveragePool")


#: QDQ units taken only with compile_ops=extended (mobile-ep's own lowering; ORT's NNAPI EP refuses them).
EXTENDED_QDQ = frozenset({"GlobalAveragePool", "MaxPool"})


def check_pool_io(rule: NnapiRule, unit: NodeUnit, ctx: RuleContext) -> Support:
    """Quantized average pool: uint8 per-tensor input and output; MaxPool: float32 or uint8 input."""
    if unit.kind == "qdq" and unit.op_type in EXTENDED_QDQ:
        result = check_quantized_io(unit, ctx, (0,))
        return check_quantized_io(unit, ctx, (0,), output=True) if result else result
    quantized = is_quantized_average_pool(unit)
    if not quantized and unit.op_type != "MaxPool":
        return rule.check_input_dtype(unit, ctx, 0, rule.input_dtypes)
    if quantized:
        result = check_quantized_io(unit, ctx, (0,))
        if result:
            result = check_quantized_io(unit, ctx, (0,), output=True)
        if not result:
            return result
    return rule.check_input_dtype(unit, ctx, 0, FLOAT_OR_UINT8)


def check_pool(unit: NodeUnit, ctx: RuleContext) -> Support:
    """The checks of ORT's PoolOpBuilder::IsOpSupportedImpl."""
    result = rank_between(ctx, unit, 4, 4)
    if not result:
        return result
    node = unit.target
    if unit.op_type in ("AveragePool", "MaxPool", "QLinearAveragePool"):
        # compile_ops=extended: an explicit PAD makes count_include_pad=1; end padding makes ceil_mode=1
        wider = extended(ctx) and unit.kind == "single" and ctx.dtype(unit.target.inputs[0]) == DataType.FLOAT
        if attr(node, "count_include_pad", 0) == 1 and not (wider and attr(node, "ceil_mode", 0) == 0):
            return Support.no("count_include_pad=1 is not supported")
        if attr(node, "storage_order", 0) == 1:
            return Support.no("storage_order=1 is not supported")
        kernel = attr(node, "kernel_shape", (1, 1))
        if len(kernel) != 2:
            return Support.no(f"kernel_shape has {len(kernel)} dims; only 2-D pooling is supported")
        if attr(node, "ceil_mode", 0) == 1 and not wider:
            return Support.no("ceil_mode=1 is not supported")
        if tuple(attr(node, "dilations", (1, 1))) != (1, 1):
            return Support.no("dilations ≠1 are not supported")
        if len(node.outputs) != 1:
            return Support.no("the Indices output (output 1) is not supported")
    if unit.kind == "qdq" and unit.op_type == "GlobalAveragePool":
        # lowered as DEQUANTIZE, a float AVERAGE_POOL_2D and QUANTIZE (the float graph the unit describes)
        result = needs_feature_level(ctx, 3, "a QDQ GlobalAveragePool (QUANTIZE)")
        if not result:
            return result
    if is_quantized_average_pool(unit) or (unit.kind == "qdq" and unit.op_type == "MaxPool"):
        # NNAPI's quantized pools keep the input's scale and zero point
        x = scale_and_zero_point(unit_inputs(unit)[0], ctx)
        y = scale_and_zero_point(unit_outputs(unit)[0], ctx)
        if x is None or y is None:
            return Support.no("input/output scale and zero point are not constant initializers")
        if x[0] != y[0]:
            return Support.no(f"output scale {y[0]:g} differs from input scale {x[0]:g}; they must be equal")
        if x[1] != y[1]:
            return Support.no(f"output zero point {y[1]} differs from input zero point {x[1]}; they must be equal")
    return SUPPORTED


def emit_qdq_global_average_pool(unit: NodeUnit, ctx: RuleContext, b) -> None:
    """DEQUANTIZE, AVERAGE_POOL_2D over the whole H×W in float32, QUANTIZE to the output's scale: the unit's
    own float arithmetic, rounded once (as onnxruntime rounds DequantizeLinear → GlobalAveragePool → Q)."""
    x_io, y_io = unit_inputs(unit)[0], unit_outputs(unit)[0]
    _, _, height, width = b.shape(x_io.value)
    nchw = b.use_nchw
    layout = "onnx" if nchw else "nhwc"
    x = b.get(x_io, layout)
    real = b.scratch(OperandCode.TENSOR_FLOAT32, b.model.operands[x.index].dims)
    b.op(OperationCode.DEQUANTIZE, [x.index], [real])
    y = b.new(y_io, layout)
    pooled = b.scratch(OperandCode.TENSOR_FLOAT32, b.model.operands[y.index].dims)
    b.op(OperationCode.AVERAGE_POOL_2D, [real, b.i32(PaddingCode.VALID), b.i32(1), b.i32(1), b.i32(width),
                                        b.i32(height), b.i32(0), *b.layout_flag(nchw)], [pooled])
    b.op(OperationCode.QUANTIZE, [pooled], [y.index])


def emit_pool(unit: NodeUnit, ctx: RuleContext, b) -> None:
    """AVERAGE_POOL_2D / MAX_POOL_2D in NHWC with implicit or explicit padding (global pools: the whole
    H×W, VALID), a following Relu/Clip fused; quantized pools keep the input's scale and zero point."""
    if unit.kind == "qdq" and unit.op_type == "GlobalAveragePool":
        emit_qdq_global_average_pool(unit, ctx, b)
        return
    node = unit.target
    x_io, out = unit_inputs(unit)[0], unit_outputs(unit)[0].value
    _, _, height, width = b.shape(x_io.value)
    code = OperationCode.MAX_POOL_2D if "Max" in unit.op_type else OperationCode.AVERAGE_POOL_2D
    nchw = b.use_nchw
    layout = "onnx" if nchw else "nhwc"
    x = b.get(x_io, layout)
    if unit.op_type.startswith(("Global", "QLinearGlobal")):
        kernel, strides = (height, width), (1, 1)
        form, (left, right, top, bottom) = "valid", (0, 0, 0, 0)
    else:
        kernel = tuple(attr(node, "kernel_shape"))
        strides = tuple(attr(node, "strides", (1, 1)))
        pads = list(attr(node, "pads", (0, 0, 0, 0)))
        auto_pad = attr(node, "auto_pad", "NOTSET")
        if attr(node, "count_include_pad", 0) == 1 and auto_pad not in ("NOTSET", "VALID"):
            raise b.fail("count_include_pad=1 with auto_pad SAME_* is not lowered")
        if attr(node, "count_include_pad", 0) == 1 and auto_pad == "NOTSET" and any(pads):
            # padding counted in the average: pad explicitly with zeros first
            x_dims = b.model.operands[x.index].dims
            paddings = [[0, 0], [0, 0], [pads[0], pads[2]], [pads[1], pads[3]]] if nchw else \
                [[0, 0], [pads[0], pads[2]], [pads[1], pads[3]], [0, 0]]
            padded_dims = [d + sum(p) for d, p in zip(x_dims, paddings, strict=True)]
            padded = b.scratch(b.model.operands[x.index].type, padded_dims)
            b.op(OperationCode.PAD, [x.index, b.constant(np.asarray(paddings, np.int32), OperandCode.TENSOR_INT32)],
                 [padded])
            x = type(x)(padded, x.perm)
            height, width = height + pads[0] + pads[2], width + pads[1] + pads[3]
            pads = [0, 0, 0, 0]
        if attr(node, "ceil_mode", 0) == 1:
            # end padding so that NNAPI's floor gives ONNX's ceil output size (excluded from averages and maxima)
            _, _, out_h, out_w = b.shape(out)
            if auto_pad != "NOTSET":
                raise b.fail("ceil_mode=1 with auto_pad is not lowered")
            pads[2] = max(pads[2], (out_h - 1) * strides[0] + kernel[0] - height - pads[0])
            pads[3] = max(pads[3], (out_w - 1) * strides[1] + kernel[1] - width - pads[1])
        form, (left, right, top, bottom) = conv_padding(pads, auto_pad, (height, width), kernel, strides, (1, 1))
    if form == "explicit":
        padding = [b.i32(left), b.i32(right), b.i32(top), b.i32(bottom)]
    else:
        padding = [b.i32(PaddingCode.SAME if form == "same" else PaddingCode.VALID)]
    if ctx.dtype(out) == DataType.UINT8:
        y, fuse = b.like(out, x_io.value, layout), b.i32(0)
    else:
        y, fuse = b.new_fused(out, layout)
    b.op(code, [x.index, *padding, b.i32(strides[1]), b.i32(strides[0]), b.i32(kernel[1]), b.i32(kernel[0]), fuse,
                *b.layout_flag(nchw)], [y.index])


class PoolRule(NnapiRule):
    op_types = ("AveragePool", "MaxPool", "GlobalAveragePool", "GlobalMaxPool")
    qdq_op_types = frozenset({"AveragePool"})
    min_feature_level = 2
    nchw_feature_level = True
    internal_uint8 = frozenset({"MaxPool"})
    dtype_doc = "input 0 float32 (MaxPool: or uint8)"

    def accepts_qdq(self, unit: NodeUnit, ctx: RuleContext) -> bool:
        """QDQ AveragePool; with compile_ops=extended also QDQ GlobalAveragePool and MaxPool."""
        return unit.op_type in self.qdq_op_types or (extended(ctx) and unit.op_type in EXTENDED_QDQ)

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        return check_pool_io(self, unit, ctx)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """4-D input; AveragePool/MaxPool: 2-D kernel, count_include_pad=0,
        storage_order=0, ceil_mode=0, dilations 1, no Indices output; QDQ AveragePool: uint8 per-tensor, output
        scale and zero point equal to the input's; compile_ops=extended also takes QDQ MaxPool (equal scales) and
        QDQ GlobalAveragePool (feature level 3: DEQUANTIZE, float pool, QUANTIZE)."""
        return check_pool(unit, ctx)

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        emit_pool(unit, ctx, b)
