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

Not rewritten: a QDQ GlobalAveragePool (or MaxPool).  A float op between a DequantizeLinear and a
QuantizeLinear is put back into QDQ form by onnxruntime's own basic-level transformers on the device (a
depthwise Conv of weights 1/(H·W) gets an asymmetric int8 weight NNAPI refuses, and QDQ propagation moves
the QuantizeLinear next to it), and an AveragePool unit needs equal input and output scales, which would
cost more than one output step to requantize.  ``convert`` partitions the written file again as onnxruntime
loads it, so such a rewrite would show as no gain.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from mobile_ep import Rewrite, RuleContext, Support

__all__ = ["QdqFlattenToReshape", "QdqSigmoidToTanh"]


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
