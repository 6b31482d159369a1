"""Quantized inputs and outputs as ONNX Runtime's NNAPI EP checks them.

ORT's ``NodeUnit`` lists a unit's inputs with their quantization parameters: for a QDQ unit the
DequantizeLinear inputs, for a plain QLinear op (``QLinearConv(x, x_scale, x_zp, w, ...)``) its data
inputs with their scale and zero point.  :func:`unit_inputs` / :func:`unit_outputs` give that view;
the checks below are ``IsQuantizedIOSupported`` (op_builder_helpers.cc) and
``HasValidBinaryOpQuantizedInputTypes`` (helper.cc).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from mobile_ep import SUPPORTED, DataType, NodeUnit, RuleContext, Support, UnitIO

__all__ = [
    "QDQ_ACCEPTED_OPS",
    "QDQ_GROUPED_OPS",
    "unit_inputs",
    "unit_outputs",
    "quantized_op_type",
    "check_quantized_io",
    "check_binary_quantized_types",
    "scale_and_zero_point",
    "check_scale_and_zero_point",
    "check_bias_quantization",
    "dtype_name",
]

#: QDQ node units NNAPI takes (``helper.cc`` ``GetQuantizedOpType``).
QDQ_ACCEPTED_OPS = frozenset({
    "Conv", "Resize", "AveragePool", "Add", "Mul", "Transpose", "Reshape", "Softmax", "Concat", "Gemm", "MatMul",
})

#: Op types ORT's QDQ selectors group into node units (``qdq_transformer/selectors_actions/shared/utils.cc``).
#: NNAPI rejects the units of the ones it does not accept as a whole.
QDQ_GROUPED_OPS = QDQ_ACCEPTED_OPS | frozenset({
    # ops that do not change the data (DropQDQ selector)
    "Gather", "GatherElements", "Reshape", "Expand", "Flatten", "Transpose", "MaxPool", "Resize", "Squeeze",
    "Unsqueeze", "Tile",
    # unary selector
    "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LeakyRelu", "ReduceMean", "ReduceMin", "ReduceMax",
    "ReduceProd", "ReduceSum", "Relu", "Gelu", "Elu", "HardSigmoid", "HardSwish", "Sigmoid", "Slice",
    "LogSoftmax", "Softmax", "Sqrt", "Atan", "Asin", "Sin", "Cos", "Sign", "Tanh", "Exp", "Log", "LRN", "Ceil",
    "Floor", "Round", "Abs", "Neg", "DepthToSpace", "SpaceToDepth", "LpNormalization",
    "Clip",
    # binary and variadic selectors
    "Add", "Div", "Mul", "Pow", "Sub", "PRelu", "GridSample", "Concat", "Max", "Min",
    # ops with their own selectors
    "Split", "Conv", "ConvTranspose", "Einsum", "Reciprocal", "MatMul", "Gemm", "InstanceNormalization",
    "LayerNormalization", "BatchNormalization", "Where", "Pad", "TopK", "CumSum", "ScatterElements",
    "RMSNormalization",
})

_UNARY_QLINEAR = frozenset({
    "QLinearSigmoid", "QLinearAveragePool", "QLinearGlobalAveragePool", "QLinearLeakyRelu", "QLinearReduceMean",
})
_BINARY_QLINEAR = frozenset({"QLinearConv", "QLinearMatMul", "QLinearAdd", "QLinearMul"})
#: Op types whose plain (non-QDQ) units list their inputs other than as the node's own inputs.
QUANTIZED_LAYOUT = frozenset({"DequantizeLinear", "QuantizeLinear"}) | _UNARY_QLINEAR | _BINARY_QLINEAR

_SINGLE_QUANTIZED = frozenset({
    "DequantizeLinear", "QuantizeLinear", "QLinearConv", "QLinearMatMul", "QLinearAdd", "QLinearMul",
    "QLinearSigmoid", "QLinearAveragePool",
})


def _at(values: tuple[ir.Value | None, ...], index: int) -> ir.Value | None:
    return values[index] if index < len(values) else None


def _io(value: ir.Value | None, scale: ir.Value | None = None, zero_point: ir.Value | None = None) -> UnitIO | None:
    return None if value is None else UnitIO(value, scale, zero_point)


def unit_inputs(unit: NodeUnit) -> tuple[UnitIO | None, ...]:
    """The unit's inputs as ORT's NodeUnit lists them; ``None`` for an omitted input."""
    if unit.kind == "qdq":
        return unit.inputs
    node = unit.target
    ins = tuple(node.inputs)
    op = node.op_type
    if op not in QUANTIZED_LAYOUT:  # the common case: the node's inputs as they are
        return tuple([None if v is None else UnitIO(v) for v in ins])
    if op == "DequantizeLinear":
        return (_io(_at(ins, 0), _at(ins, 1), _at(ins, 2)),)
    if op == "QuantizeLinear":
        return (_io(_at(ins, 0)),)
    if op in _UNARY_QLINEAR:
        return (_io(_at(ins, 0), _at(ins, 1), _at(ins, 2)),)
    if op in _BINARY_QLINEAR:
        result = [_io(_at(ins, 0), _at(ins, 1), _at(ins, 2)), _io(_at(ins, 3), _at(ins, 4), _at(ins, 5))]
        if len(ins) == 9:
            result.append(_io(ins[8]))  # the bias has no quantization parameters of its own
        return tuple(result)
    return tuple(_io(v) for v in ins)


def unit_outputs(unit: NodeUnit) -> tuple[UnitIO | None, ...]:
    """The unit's outputs as ORT's NodeUnit lists them."""
    if unit.kind == "qdq":
        return unit.outputs
    node = unit.target
    ins = tuple(node.inputs)
    outs = tuple(node.outputs)
    op = node.op_type
    if op == "QuantizeLinear":
        return (_io(_at(outs, 0), _at(ins, 1), _at(ins, 2)),)
    if op in _UNARY_QLINEAR:
        return (_io(_at(outs, 0), _at(ins, 3), _at(ins, 4)),)
    if op in _BINARY_QLINEAR:
        return (_io(_at(outs, 0), _at(ins, 6), _at(ins, 7)),)
    return tuple(_io(v) for v in outs)


def quantized_op_type(unit: NodeUnit) -> str | None:
    """ORT's ``QuantizedOpType``: ``QLinearConv``, ``QDQConv``, ``DequantizeLinear``, ... or ``None``."""
    op = unit.target.op_type
    if unit.kind == "single":
        return op if op in _SINGLE_QUANTIZED else None
    return f"QDQ{op}" if op in QDQ_ACCEPTED_OPS else None


def _is_quant_conv(qtype: str | None) -> bool:
    return qtype in ("QLinearConv", "QDQConv")


def _is_quant_gemm(qtype: str | None) -> bool:
    return qtype in ("QLinearMatMul", "QDQGemm", "QDQMatMul")


def check_binary_quantized_types(unit: NodeUnit, ctx: RuleContext) -> Support:
    """Input A uint8; B uint8, or int8 for a Conv/MatMul/Gemm weight (u8s8); QLinearAdd/Mul need u8u8."""
    qtype = quantized_op_type(unit)
    binary = {"QLinearMatMul", "QLinearAdd", "QLinearMul", "QDQAdd", "QDQMul", "QDQGemm", "QDQMatMul"}
    if qtype not in binary and not _is_quant_conv(qtype):
        return Support.no("not a quantized binary op")
    inputs = unit_inputs(unit)
    if len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
        return Support.no("needs two quantized inputs")
    a = ctx.dtype(inputs[0].value)
    b = ctx.dtype(inputs[1].value)
    if a is None or b is None:
        return Support.no("a quantized input has no element type")
    weight_like = _is_quant_conv(qtype) or _is_quant_gemm(qtype)
    if a != DataType.UINT8:
        return Support.no(f"quantized input 0 is {dtype_name(a)}; NNAPI takes uint8 activations only (no int8/s8s8)")
    if weight_like and b not in (DataType.UINT8, DataType.INT8):
        return Support.no(f"quantized weight (input 1) is {dtype_name(b)}; needs uint8 or int8")
    if not weight_like and b != a:
        return Support.no(f"quantized input 1 is {dtype_name(b)}; both inputs must be uint8")
    return SUPPORTED


def check_quantized_io(unit: NodeUnit, ctx: RuleContext, indices: tuple[int, ...], *, output: bool = False) -> Support:
    """uint8 tensors (int8 only for a Conv/MatMul/Gemm weight) with constant per-tensor scale/zero point.

    Per-channel quantization is accepted only for an int8 weight of Conv (or QDQ Gemm), on feature
    level 3+, with all zero points 0.
    """
    qtype = quantized_op_type(unit)
    is_conv = _is_quant_conv(qtype)
    is_matmul = qtype in ("QLinearMatMul", "QDQMatMul")
    is_gemm = qtype == "QDQGemm"
    ios = unit_outputs(unit) if output else unit_inputs(unit)
    side = "output" if output else "input"
    for index in indices:
        io = ios[index] if index < len(ios) else None
        label = f"{side} {index}"
        if io is None:
            return Support.no(f"{label} is missing")
        if io.scale is None:
            return Support.no(f"{label} has no quantization scale")
        dtype = ctx.dtype(io.value)
        is_weight = not output and (is_conv or is_matmul or is_gemm) and index == 1
        u8s8 = is_weight and dtype == DataType.INT8
        if dtype != DataType.UINT8 and not u8s8:
            extra = "; int8 only for the weight of Conv/MatMul/Gemm" if not is_weight else " or int8"
            return Support.no(f"quantized {label} is {dtype_name(dtype)}; NNAPI takes uint8{extra}")
        # scale
        scale = ctx.constant(io.scale)
        if scale is None:
            return Support.no(f"{label} scale is not a constant initializer")
        scales = int(scale.shape[0]) if scale.ndim else 1
        if scales != 1:
            if not u8s8:
                return Support.no(f"{label} is quantized per channel ({scales} scales); NNAPI takes per-tensor "
                                  "quantization (per channel only for an int8 Conv weight)")
            if is_matmul:
                return Support.no("the MatMul weight (input 1) is quantized per channel; only per-tensor is supported")
            level = ctx.options.feature_level
            if level < 3:
                return Support.no("a per-channel quantized weight needs NNAPI feature level 3 (Android API 29); "
                                  f"target is API {ctx.options.api_level}")
            weight_shape = ctx.shape(io.value)
            if not weight_shape or weight_shape[0] != scales:
                return Support.no(f"the weight has {weight_shape[0] if weight_shape else '?'} output channels but "
                                  f"{scales} scales")
        # zero point (optional)
        if io.zero_point is None:
            continue
        zero_point = ctx.constant(io.zero_point)
        if zero_point is None:
            return Support.no(f"{label} zero point is not a constant initializer")
        points = int(zero_point.shape[0]) if zero_point.ndim else 1
        if not u8s8:
            if points != 1:
                return Support.no(f"{label} is quantized per channel ({points} zero points); NNAPI takes per-tensor "
                                  "quantization (per channel only for an int8 Conv weight)")
            continue
        zp_dtype = ctx.dtype(io.zero_point)
        if zp_dtype != DataType.INT8:
            return Support.no(f"the int8 weight (input 1) has a {dtype_name(zp_dtype)} zero point; needs int8")
        if points != 1 and is_matmul:
            return Support.no("the MatMul weight (input 1) is quantized per channel; only per-tensor is supported")
        weight_shape = ctx.shape(io.value)
        if points != 1 and (not weight_shape or weight_shape[0] != points):
            return Support.no(f"the weight has {weight_shape[0] if weight_shape else '?'} output channels but "
                              f"{points} zero points")
        if np.any(np.asarray(zero_point) != 0):
            return Support.no("the int8 weight (input 1) has non-zero zero points; NNAPI needs symmetric (zero point 0)")
    return SUPPORTED


def scale_and_zero_point(io: UnitIO | None, ctx: RuleContext) -> tuple[float, int] | None:
    """The first scale and zero point of a quantized tensor (ORT reads element 0), if both are constant."""
    if io is None or io.scale is None:
        return None
    scale = ctx.constant(io.scale)
    if scale is None or scale.size == 0:
        return None
    zero_point = 0
    if io.zero_point is not None:
        zp = ctx.constant(io.zero_point)
        if zp is None or zp.size == 0:
            return None
        zero_point = int(np.ascontiguousarray(zp).reshape(-1).view(np.uint8)[0])
    return float(np.float32(np.asarray(scale).reshape(-1)[0])), zero_point


def check_scale_and_zero_point(io: UnitIO | None, ctx: RuleContext, label: str, scale: float, zero_point: int) -> Support:
    """The tensor is quantized with exactly *scale* and *zero_point* (ORT's ``HasRequiredScaleAndZeroPoint``)."""
    actual = scale_and_zero_point(io, ctx)
    if actual is None:
        return Support.no(f"{label} scale/zero point are not constant initializers")
    if np.float32(actual[0]) != np.float32(scale):
        return Support.no(f"{label} scale is {actual[0]:g}; needs {scale:g}")
    if actual[1] != zero_point:
        return Support.no(f"{label} zero point is {actual[1]}; needs {zero_point}")
    return SUPPORTED


def check_bias_quantization(unit: NodeUnit, ctx: RuleContext, index: int = 2) -> Support:
    """A QDQ unit's int32 bias has scale = input scale × weight scale (per channel too) and zero point 0.

    ORT's NNAPI EP passes the bias data as it is, with the scale NNAPI requires (input × weight), and ignores
    the bias DequantizeLinear's own scale: any other scale would change the result (but not that of an all-zero
    bias, which exporters share between convolutions).  Scales are compared as float32 with a relative tolerance
    of 1e-6.
    """
    if unit.kind != "qdq":
        return SUPPORTED
    inputs = unit.inputs
    bias = inputs[index] if index < len(inputs) else None
    if bias is None or bias.scale is None:
        return SUPPORTED
    scales = [ctx.constant(io.scale) if io is not None and io.scale is not None else None for io in inputs[:2]]
    bias_scale = ctx.constant(bias.scale)
    if any(s is None for s in scales) or bias_scale is None:
        return Support.no("the bias, input or weight scale is not a constant initializer")
    expected = (np.float32(np.asarray(scales[0]).reshape(-1)[0]) * np.asarray(scales[1], np.float32)).reshape(-1)
    given = np.asarray(bias_scale, np.float32).reshape(-1)
    data = ctx.constant(bias.value)
    zeros = data is not None and not np.asarray(data).any()  # (zero at any scale: exporters share zero biases)
    if not zeros and (given.size not in (1, expected.size) or not np.allclose(given, expected, rtol=1e-6, atol=0)):
        shown = f"{float(given[0]):g}" if given.size == 1 else f"{given.size} scales"
        want = f"{float(expected[0]):g}" if expected.size == 1 else "input scale × each weight scale"
        return Support.no(f"the bias (input {index}) is quantized with scale {shown}; NNAPI needs input scale × "
                          f"weight scale = {want}")
    if bias.zero_point is not None:
        zero_point = ctx.constant(bias.zero_point)
        if zero_point is None or np.any(np.asarray(zero_point) != 0):
            return Support.no(f"the bias (input {index}) has a non-zero zero point; NNAPI needs 0")
    return SUPPORTED


_DTYPE_NAMES = {
    DataType.FLOAT: "float32",
    DataType.FLOAT16: "float16",
    DataType.DOUBLE: "float64",
    DataType.BFLOAT16: "bfloat16",
}


def dtype_name(dtype: ir.DataType | None) -> str:
    """``float32``, ``uint8``, ... for reasons."""
    if dtype is None:
        return "of unknown type"
    return _DTYPE_NAMES.get(dtype, dtype.name.lower())
