"""Rewrites of QDQ node units ORT's NNAPI EP refuses into nodes it takes (``convert``'s legalization).

ORT's NNAPI EP takes QDQ units of eleven op types only (``helper.cc`` ``GetQuantizedOpType``); a unit of
another op stays on the CPU with its DequantizeLinear and QuantizeLinear, and splits the partition.  Each
rewrite below turns the unit's target into ops that either form a unit NNAPI takes, or form no unit at all
(their DequantizeLinear and QuantizeLinear then run alone as DEQUANTIZE and QUANTIZE, feature level 3+,
and the op in between in float, which is what the QDQ graph means):

- ``qdq-flatten-to-reshape``: Flatten → Reshape to the same 2-D shape, a QDQ Reshape unit (exact);
- ``qdq-sigmoid-to-tanh``: Sigmoid(x) → 0.5·tanh(0.5·x) + 0.5: Mul with a float constant forms no unit,
  so none of the four forms one.  Equal up to float32 rounding (about 1e-7), at most one output step.

Each applies only to the target of a QDQ unit (a float model is left alone) with a known static shape.

Two more replace a whole QDQ unit (they are registered on its QuantizeLinear, whose output they take over) by
the node ORT's NNAPI EP takes as a single node, on the same uint8 data:

- ``qdq-maxpool-to-uint8``: a QDQ Conv unit whose QuantizeLinear feeds only a QDQ MaxPool unit of one scale
  and zero point becomes QLinearConv → uint8 MaxPool (ONNX takes uint8 from opset 12; NNAPI's MAX_POOL_2D
  keeps the input's scale and zero point).  Exact: the QLinearConv is the Conv unit's own integer arithmetic
  (a Relu or Clip the quantization makes redundant is its saturation), and the maximum commutes with the
  monotone (de)quantization, padded positions taking no part.  The Conv goes too because ORT's EP takes a
  uint8 MaxPool only when its input is the output of a node unit's *target* in the same partition
  (``IsInternalQuantizationSupported``; the partitioner records target outputs only): the QuantizeLinear of
  a QDQ unit is not one, and a QuantizeLinear put alone between them is removed with its DequantizeLinear by
  onnxruntime's basic-level transformers;
- ``qdq-gap-to-qlinearconv``: DequantizeLinear → GlobalAveragePool → QuantizeLinear of a static H×W becomes a
  depthwise QLinearConv (group C, an H×W kernel of uint8 weights w, scale 1/(w·H·W), zero point 0, no bias)
  with the unit's input and output scales: NNAPI's DEPTHWISE_CONV_2D, summed in int32 and rounded once.  The
  sum times the weight scale is the mean up to float32 rounding of the scale, so the result is within one
  output step of onnxruntime's float mean, then QuantizeLinear (measured: one near tie in 4,000 outputs a
  step off; equal to onnxruntime's default level, which runs the unit as QLinearGlobalAveragePool).  w is
  255, smaller when 255·255·H·W would overflow int32.

A QDQ MaxPool unit fed by anything else (a QDQ Concat unit's QuantizeLinear, another pool) takes a float path:

- ``qdq-maxpool-via-float``: DequantizeLinear → Max(x, x) → float MaxPool → Max(y, y) → QuantizeLinear, with the
  unit's scales and zero point (equal at input and output).  Exact: the pool takes the same values as the
  uint8 pool (the maximum commutes with the monotone (de)quantization, and requantizing a dequantized value of
  the same scale gives it back), and Max(x, x) is x.  The two Maxes keep onnxruntime's basic-level QDQ
  propagation from moving the DequantizeLinear and QuantizeLinear next to the pool, where they would be
  dropped again into a uint8 MaxPool whose input, a QDQ unit's QuantizeLinear, ORT's EP does not count as in
  the partition.  NNAPI then runs DEQUANTIZE, MAXIMUM, MAX_POOL_2D, MAXIMUM and QUANTIZE in float.

Not taken: a QDQ depthwise Conv (DequantizeLinear of uint8 weights) in place of the GlobalAveragePool --
onnxruntime's basic level would keep it, but convert asks about a rewrite's nodes one by one, outside the unit
they will form, and a Conv whose weight is not a constant is refused on its own -- nor any float
op between a DequantizeLinear and a QuantizeLinear: onnxruntime's basic-level transformers put those back
into QDQ forms NNAPI refuses (a depthwise Conv of float weights 1/(H·W) is given an asymmetric int8 weight,
QDQ propagation moves the QuantizeLinear next to the op), and an AveragePool unit needs equal input and
output scales.  ``convert`` partitions the written file again as onnxruntime loads it, so a form ORT's
transformers change would show as no gain.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from mobile_ep import NodeUnit, Rewrite, RuleContext, Support, UnitIO

__all__ = ["QdqFlattenToReshape", "QdqSigmoidToTanh", "QdqMaxPoolToUint8", "QdqMaxPoolViaFloat",
           "QdqGlobalAveragePoolToQLinearConv"]


def _in_qdq_unit(node: ir.Node, ctx: RuleContext) -> Support:
    if ctx.unit_of(node).kind != "qdq":
        return Support.no("not the target of a QDQ node unit (the float op needs no rewrite)")
    return Support.yes()


def _static_shape(value: ir.Value | None, ctx: RuleContext) -> tuple[int, ...] | None:
    shape = ctx.shape(value) if value is not None else None
    if shape is None or any(not isinstance(d, int) for d in shape):
        return None
    return tuple(shape)


class QdqFlattenToReshape(Rewrite):
    name = "qdq-flatten-to-reshape"
    op_types = ("Flatten",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        """The target of a QDQ unit, with a static input shape."""
        result = _in_qdq_unit(node, ctx)
        if result and _static_shape(node.inputs[0], ctx) is None:
            return Support.no("the input shape is not static")
        return result

    def replace(self, node: ir.Node, ctx: RuleContext, b):
        shape = _static_shape(node.inputs[0], ctx)
        assert shape is not None
        axis = node.attributes.get("axis")
        axis = int(axis.value) if axis is not None else 1
        axis = axis + len(shape) if axis < 0 else axis
        target = (int(np.prod(shape[:axis], dtype=np.int64)), int(np.prod(shape[axis:], dtype=np.int64)))
        dtype = ctx.dtype(node.inputs[0])
        return [b.op("Reshape", [node.inputs[0], b.const(np.array(target, np.int64), "shape")], shape=target,
                     dtype=dtype)]


class QdqSigmoidToTanh(Rewrite):
    name = "qdq-sigmoid-to-tanh"
    op_types = ("Sigmoid",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        """The target of a QDQ unit, float32, of static shape."""
        result = _in_qdq_unit(node, ctx)
        if not result:
            return result
        if ctx.dtype(node.inputs[0]) != ir.DataType.FLOAT or _static_shape(node.inputs[0], ctx) is None:
            return Support.no("needs a float32 input of static shape")
        return Support.yes()

    def replace(self, node: ir.Node, ctx: RuleContext, b):
        shape = _static_shape(node.inputs[0], ctx)
        f = ir.DataType.FLOAT
        half = b.const(np.array(0.5, np.float32), "half")
        scaled = b.op("Mul", [node.inputs[0], half], shape=shape, dtype=f)
        tanh = b.op("Tanh", [scaled], shape=shape, dtype=f)
        halved = b.op("Mul", [tanh, half], shape=shape, dtype=f)
        return [b.op("Add", [halved, half], shape=shape, dtype=f)]


# -- whole QDQ units to the single nodes ORT's NNAPI EP takes --------------------------------------------
#: The largest int32 an accumulation may reach (NNAPI and onnxruntime sum quantized products in int32).
_INT32_MAX = 2**31 - 1


def _uint8_scalar_params(io: UnitIO, ctx: RuleContext) -> tuple[float, int] | None:
    """A uint8 tensor's constant per-tensor scale and zero point (scalars), else None."""
    if io is None or io.scale is None or io.zero_point is None:
        return None
    if ctx.dtype(io.value) != ir.DataType.UINT8 or ctx.dtype(io.zero_point) != ir.DataType.UINT8:
        return None
    scale, zero_point = ctx.constant(io.scale), ctx.constant(io.zero_point)
    if scale is None or zero_point is None or scale.size != 1 or zero_point.size != 1:
        return None
    return float(np.asarray(scale, np.float32).reshape(-1)[0]), int(np.asarray(zero_point).reshape(-1)[0])


def _unit_of_q(node: ir.Node, ctx: RuleContext, op_type: str) -> Support:
    """*node* is the one QuantizeLinear of a QDQ unit of *op_type* with one uint8 input and output,
    each with a constant per-tensor scale and zero point."""
    unit = ctx.unit_of(node)
    if unit.kind != "qdq" or unit.op_type != op_type or unit.target.domain not in ("", "ai.onnx"):
        return Support.no(f"not the QuantizeLinear of a QDQ {op_type} unit")
    if len(unit.q_nodes) != 1 or unit.redundant_clip is not None or len(unit.dq_nodes) != 1:
        return Support.no("the unit has more than one DequantizeLinear or QuantizeLinear")
    if _uint8_scalar_params(_dq_io(unit), ctx) is None or _uint8_scalar_params(_q_io(unit), ctx) is None:
        return Support.no("needs uint8 data with constant per-tensor scales and zero points")
    return Support.yes()


def _dq_io(unit: NodeUnit) -> UnitIO:
    dq = unit.dq_nodes[0]
    return UnitIO(dq.inputs[0], dq.inputs[1], dq.inputs[2] if len(dq.inputs) > 2 else None)


def _q_io(unit: NodeUnit) -> UnitIO:
    q = unit.q_nodes[0]
    return UnitIO(q.outputs[0], q.inputs[1], q.inputs[2] if len(q.inputs) > 2 else None)


def _conv_unit_before(dq: ir.Node, ctx: RuleContext) -> NodeUnit | None:
    """The QDQ Conv unit whose QuantizeLinear feeds *dq* and nothing else (with constant weight and bias)."""
    q = ctx.producer(dq.inputs[0])
    if q is None or q.op_type != "QuantizeLinear" or ctx.consumers(q.outputs[0]) != [dq]:
        return None
    if ctx.is_graph_output(q.outputs[0]):
        return None
    unit = ctx.unit_of(q)
    if unit.kind != "qdq" or unit.op_type != "Conv" or unit.target.domain not in ("", "ai.onnx"):
        return None
    if unit.q_nodes != (q,) or _uint8_scalar_params(_q_io(unit), ctx) is None:
        return None
    inputs = unit.inputs
    if len(inputs) < 2 or any(io is None or io.scale is None for io in inputs):
        return None
    x, w = inputs[0], inputs[1]
    if x.zero_point is None or w.zero_point is None or not all(ctx.is_constant(io.value) for io in inputs[1:]):
        return None  # (QLinearConv needs both zero points)
    w_scale = ctx.constant(w.scale)
    if w_scale is None or (w_scale.size > 1 and _weight_axis(ctx.producer(unit.target.inputs[1])) != 0):
        return None  # (QLinearConv's per-channel weight scales are per output channel)
    return unit


def _weight_axis(dq: ir.Node | None) -> int | None:
    if dq is None:
        return None
    axis = dq.attributes.get("axis")
    return int(axis.value) if axis is not None else 1


class QdqMaxPoolToUint8(Rewrite):
    """A QDQ Conv unit and the QDQ MaxPool unit it feeds become QLinearConv → uint8 MaxPool (exact)."""

    name = "qdq-maxpool-to-uint8"
    op_types = ("QuantizeLinear",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        """The QuantizeLinear of a QDQ MaxPool unit (uint8, opset 12+, one output) with one scale and zero point,
        fed only by the QuantizeLinear of a QDQ Conv unit with constant weight and bias."""
        result = _unit_of_q(node, ctx, "MaxPool")
        if not result:
            return result
        unit = ctx.unit_of(node)
        if ctx.opset("") < 12:
            return Support.no(f"a uint8 MaxPool needs opset 12 (the model has {ctx.opset('')})")
        if len(unit.target.outputs) != 1:
            return Support.no("the Indices output is used")
        if _uint8_scalar_params(_dq_io(unit), ctx) != _uint8_scalar_params(_q_io(unit), ctx):
            return Support.no("the input and output scales or zero points differ")
        if _conv_unit_before(unit.dq_nodes[0], ctx) is None:
            return Support.no("the input is not the output of a QDQ Conv unit alone (with constant weight and bias)")
        return Support.yes()

    def replace(self, node: ir.Node, ctx: RuleContext, b):
        unit = ctx.unit_of(node)
        conv_unit = _conv_unit_before(unit.dq_nodes[0], ctx)
        assert conv_unit is not None
        x, w, *bias = conv_unit.inputs
        q = conv_unit.q_nodes[0]
        u8 = ir.DataType.UINT8
        inputs = [x.value, x.scale, x.zero_point, w.value, w.scale, w.zero_point, q.inputs[1], q.inputs[2]]
        if bias and bias[0] is not None:
            inputs.append(bias[0].value)
        conv_attributes = {name: a.value for name, a in conv_unit.target.attributes.items()}
        conv = b.op("QLinearConv", inputs, shape=ctx.shape(q.outputs[0]), dtype=u8, **conv_attributes)
        pool_attributes = {name: a.value for name, a in unit.target.attributes.items()}
        return [b.op("MaxPool", [conv], shape=ctx.shape(node.outputs[0]), dtype=u8, **pool_attributes)]


class QdqGlobalAveragePoolToQLinearConv(Rewrite):
    """A QDQ GlobalAveragePool unit of static H×W becomes a depthwise QLinearConv (within one output step)."""

    name = "qdq-gap-to-qlinearconv"
    op_types = ("QuantizeLinear",)

    @staticmethod
    def _weight(height: int, width: int) -> int:
        """The uint8 weight: 255, or less so that 255 · weight · H · W fits an int32 sum."""
        return min(255, _INT32_MAX // (255 * height * width))

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        """The QuantizeLinear of a QDQ GlobalAveragePool unit (uint8) whose input is 4-D of static shape."""
        result = _unit_of_q(node, ctx, "GlobalAveragePool")
        if not result:
            return result
        unit = ctx.unit_of(node)
        shape = _static_shape(unit.dq_nodes[0].inputs[0], ctx)
        if shape is None or len(shape) != 4:
            return Support.no("needs a 4-D input of static shape")
        if self._weight(shape[2], shape[3]) < 1:
            return Support.no(f"an H×W of {shape[2]}×{shape[3]} overflows an int32 sum")
        return Support.yes()

    def replace(self, node: ir.Node, ctx: RuleContext, b):
        unit = ctx.unit_of(node)
        dq, q = unit.dq_nodes[0], unit.q_nodes[0]
        shape = _static_shape(dq.inputs[0], ctx)
        assert shape is not None
        batch, channels, height, width = shape
        weight = self._weight(height, width)
        w = b.const(np.full((channels, 1, height, width), weight, np.uint8), "weight")
        w_scale = b.const(np.array(1.0 / (weight * height * width), np.float32), "weight_scale")
        w_zero_point = b.const(np.array(0, np.uint8), "weight_zero_point")
        inputs = [dq.inputs[0], dq.inputs[1], dq.inputs[2], w, w_scale, w_zero_point, q.inputs[1], q.inputs[2]]
        return [b.op("QLinearConv", inputs, shape=(batch, channels, 1, 1), dtype=ir.DataType.UINT8,
                     group=channels, kernel_shape=[height, width])]


class QdqMaxPoolViaFloat(Rewrite):
    """A QDQ MaxPool unit (fed by anything; after qdq-maxpool-to-uint8, which takes a lone Conv unit's) becomes
    DequantizeLinear → Max(x, x) → float MaxPool → Max(y, y) → QuantizeLinear (exact)."""

    name = "qdq-maxpool-via-float"
    op_types = ("QuantizeLinear",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        """The QuantizeLinear of a QDQ MaxPool unit (uint8, one output, 4-D static input) whose input and output
        scales and zero points are equal."""
        result = _unit_of_q(node, ctx, "MaxPool")
        if not result:
            return result
        unit = ctx.unit_of(node)
        if len(unit.target.outputs) != 1:
            return Support.no("the Indices output is used")
        if _uint8_scalar_params(_dq_io(unit), ctx) != _uint8_scalar_params(_q_io(unit), ctx):
            return Support.no("the input and output scales or zero points differ")
        shape = _static_shape(unit.target.inputs[0], ctx)
        if shape is None or len(shape) != 4:
            return Support.no("needs a 4-D input of static shape")
        return Support.yes()

    def replace(self, node: ir.Node, ctx: RuleContext, b):
        unit = ctx.unit_of(node)
        dq, q = unit.dq_nodes[0], unit.q_nodes[0]
        f = ir.DataType.FLOAT
        shape_in, shape_out = _static_shape(unit.target.inputs[0], ctx), ctx.shape(unit.target.outputs[0])
        x = b.op("DequantizeLinear", list(dq.inputs), shape=shape_in, dtype=f)
        held = b.op("Max", [x, x], shape=shape_in, dtype=f)
        pool_attributes = {name: a.value for name, a in unit.target.attributes.items()}
        pooled = b.op("MaxPool", [held], shape=shape_out, dtype=f, **pool_attributes)
        kept = b.op("Max", [pooled, pooled], shape=shape_out, dtype=f)
        return [b.op("QuantizeLinear", [kept, *q.inputs[1:]], shape=shape_out, dtype=ir.DataType.UINT8)]
