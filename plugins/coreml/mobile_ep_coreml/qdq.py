"""A QDQ model as the float graph it describes, for ORT's CoreML EP (option ``fold_qdq``, applied by ``convert``).

ORT's CoreML EP has no DequantizeLinear or QuantizeLinear builder and needs constant Conv/Gemm weights, so it
claims next to nothing of a QDQ model.  With ``-O coreml.fold_qdq=true`` convert's legalization rewrites each
DequantizeLinear:

- of a constant (a weight or bias): into the float32 initializer it computes, ``(q - zero_point) · scale``
  (exactly what onnxruntime computes when it runs the node);
- of a QuantizeLinear's output (an activation): the pair becomes the arithmetic it stands for,
  ``(Clip(Round(x / scale) + zero_point, lo, hi) - zero_point) · scale`` with lo/hi the range of the
  quantized type, in float ops the CoreML EP takes (ML Program: ``Round`` is ML Program only).  Round is
  half-to-even, as QuantizeLinear's, so the result equals the QDQ pair's up to float32 rounding.

The weights are then stored as float32 (four times their int8 size): what the rewrite buys is that the
CoreML EP can run the model, with the quantization's rounding kept; ``convert`` verifies it within one
step of the quantized outputs against the original run at onnxruntime's disabled optimization level: the
QDQ graph's own float arithmetic, which is what the fold computes.  onnxruntime's default level runs the
QDQ units as integer kernels (QLinearConv ...) whose requantization rounds elsewhere: up to 4 output steps
away on resnet18 (docs/quantized.md).  A weight folded while its activations stay quantized would be put back
into QDQ form by onnxruntime's basic-level transformers when the app loads the model, so both are folded.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from mobile_ep import Rewrite, RuleContext, Support

__all__ = ["FoldDequantizeLinear", "QUANTIZATION_KEY", "quantization_of"]

#: Metadata of a folded weight's initializer: how it was quantized (JSON: dtype, scale, zero_point, axis).
QUANTIZATION_KEY = "mobile_ep.quantization"

_RANGES = {ir.DataType.UINT8: (0, 255), ir.DataType.INT8: (-128, 127)}


def _input(node: ir.Node, index: int) -> ir.Value | None:
    return node.inputs[index] if index < len(node.inputs) else None


def _scalar(ctx: RuleContext, value: ir.Value | None) -> np.ndarray | None:
    array = ctx.constant(value) if value is not None else None
    return None if array is None or np.asarray(array).size != 1 else np.asarray(array).reshape(())


class FoldDequantizeLinear(Rewrite):
    name = "fold-qdq"
    op_types = ("DequantizeLinear",)
    reference_level = "disable"
    reference_why = ("fold-qdq writes the float arithmetic of the QDQ graph, which onnxruntime's default level "
                     "replaces with integer kernels that round differently")

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        """A DequantizeLinear of a constant (int8/uint8 weight or int32 bias, per tensor or per axis), or one reading a per-tensor int8/uint8
        QuantizeLinear of a float32 tensor with constant scales and zero points."""
        if node.attributes.get("block_size") is not None and node.attributes["block_size"].value:
            return Support.no("blocked quantization is not folded")
        x = node.inputs[0] if node.inputs else None
        if x is None or ctx.dtype(x) not in (*_RANGES, ir.DataType.INT32):
            return Support.no("only int8, uint8 (and int32 constant) data is folded")
        if ctx.constant(x) is not None:
            if ctx.constant(_input(node, 1)) is None or (_input(node, 2) is not None
                                                        and ctx.constant(_input(node, 2)) is None):
                return Support.no("the scale or zero point is not a constant initializer")
            return Support.yes()
        q = ctx.producer(x)
        if ctx.dtype(x) not in _RANGES:
            return Support.no("int32 data is folded only when constant (a bias)")
        if q is None or q.op_type != "QuantizeLinear" or q.domain not in ("", "ai.onnx"):
            return Support.no("the data is neither a constant nor a QuantizeLinear's output")
        if ctx.dtype(q.inputs[0]) != ir.DataType.FLOAT or ctx.shape(q.inputs[0]) is None:
            return Support.no("the quantized tensor is not float32 of known shape")
        for side in (q, node):
            if _scalar(ctx, _input(side, 1)) is None or (_input(side, 2) is not None
                                                         and _scalar(ctx, _input(side, 2)) is None):
                return Support.no("scales and zero points must be constant scalars (per tensor)")
        return Support.yes()

    def replace(self, node: ir.Node, ctx: RuleContext, b):
        x = node.inputs[0]
        data = ctx.constant(x)
        if data is not None:
            folded = b.const(_dequantized(node, ctx, np.asarray(data)), "dequantized")
            if ctx.dtype(x) in _RANGES:  # a weight: --compile may store it compressed again (mil.MILBuilder.weight)
                folded.const_value.metadata_props[QUANTIZATION_KEY] = _quantization(node, ctx)
            return [folded]
        q = ctx.producer(x)
        assert q is not None
        f = ir.DataType.FLOAT
        shape = ctx.shape(q.inputs[0])
        low, high = _RANGES[ctx.dtype(x)]
        q_scale, q_zero = _scalar(ctx, _input(q, 1)), _scalar(ctx, _input(q, 2))
        dq_scale, dq_zero = _scalar(ctx, _input(node, 1)), _scalar(ctx, _input(node, 2))
        q_zero = np.float32(0 if q_zero is None else q_zero)
        dq_zero = np.float32(0 if dq_zero is None else dq_zero)
        scaled = b.op("Div", [q.inputs[0], b.const(np.float32(q_scale), "scale")], shape=shape, dtype=f)
        rounded = b.op("Round", [scaled], shape=shape, dtype=f)
        shifted = b.op("Add", [rounded, b.const(q_zero, "zero_point")], shape=shape, dtype=f)
        clipped = b.op("Clip", [shifted, b.const(np.float32(low), "low"), b.const(np.float32(high), "high")],
                       shape=shape, dtype=f)
        centred = b.op("Sub", [clipped, b.const(dq_zero, "zero_point")], shape=shape, dtype=f)
        return [b.op("Mul", [centred, b.const(np.float32(dq_scale), "scale")], shape=shape, dtype=f)]


def _dequantized(node: ir.Node, ctx: RuleContext, data: np.ndarray) -> np.ndarray:
    """``(data - zero_point) · scale`` in float32, per axis when the scale is 1-D (onnxruntime's arithmetic)."""
    scale = np.asarray(ctx.constant(_input(node, 1)), np.float32)
    zero = ctx.constant(_input(node, 2)) if _input(node, 2) is not None else None
    zero = np.zeros(scale.shape, np.int64) if zero is None else np.asarray(zero).astype(np.int64)
    if scale.ndim == 1 and scale.size > 1 and data.ndim > 0:
        axis = node.attributes.get("axis")
        axis = (int(axis.value) if axis is not None else 1) % data.ndim
        shape = [1] * data.ndim
        shape[axis] = scale.size
        scale, zero = scale.reshape(shape), zero.reshape(shape)
    return ((data.astype(np.int64) - zero).astype(np.float32) * scale).astype(np.float32)


def _quantization(node: ir.Node, ctx: RuleContext) -> str:
    import json

    scale = np.asarray(ctx.constant(_input(node, 1)), np.float32).reshape(-1)
    zero = ctx.constant(_input(node, 2)) if _input(node, 2) is not None else None
    zero = np.zeros(scale.shape, np.int64) if zero is None else np.asarray(zero).astype(np.int64).reshape(-1)
    axis = node.attributes.get("axis")
    return json.dumps({"dtype": "int8" if ctx.dtype(node.inputs[0]) == ir.DataType.INT8 else "uint8",
                       "scale": [float(v) for v in scale], "zero_point": [int(v) for v in zero],
                       "axis": int(axis.value) if axis is not None else 1})


def quantization_of(value: ir.Value | None) -> dict | None:
    """How the folded weight *value* was quantized (dtype, scale, zero_point, axis), or None."""
    import json

    tensor = value.const_value if value is not None else None
    text = tensor.metadata_props.get(QUANTIZATION_KEY) if tensor is not None else None
    return json.loads(text) if text else None
