"""A library of legalizing rewrites backends can ask for (``Backend.rewrites()``).

Each is exact or equal within floating-point rounding (tests run onnxruntime before and after on
broadcasting shapes and edge values), and replaces one node by ops that mobile accelerators commonly
take.  Whether a rewrite is *applied* is decided per node: only where the backend claims every node
the rewrite produces.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from mobile_ep.contract import RuleContext, Support, attr
from mobile_ep.contract.rewrite import Builder, Rewrite, broadcast_shapes, float_input
from mobile_ep.passes.rewrites.attention import (
    BoolMaskToFloat,
    BoolMoveViaFloat,
    GatherInt32Indices,
    SoftmaxIsNaN,
    SoftmaxNanGuard,
)
from mobile_ep.passes.rewrites.math import (
    EmptyInputDrop,
    ErfApproximation,
    Rank5BinaryMerge,
    Rank5GatherSplit,
    Rank5HeadSplit,
    Rank5TransposeMerge,
)
from mobile_ep.passes.rewrites.positions import (
    GatherElementsOfUniformConstant,
    PositionIdsViaFloat,
    RunningCountViaFloat,
)
from mobile_ep.passes.rewrites.rnn import GRUToSteps, LSTMToSteps
from mobile_ep.passes.rewrites.spatial import (
    ConvTo2D,
    ConvTransposeToConv,
    ConvTransposeToDepthToSpace,
    PadToGather,
    PoolCeilToPads,
)

__all__ = [
    "SumToAdd",
    "MeanToAddDiv",
    "HardSigmoidToRelu6",
    "HardSwishToRelu6",
    "HardSwishToHardSigmoid",
    "ClipToMaxMin",
    "ExpandToMul",
    "TileToConcat",
    "SplitToSlices",
    "UnsqueezeToReshape",
    "FlattenToReshape",
    "NegToMul",
    "BatchNormToMulAdd",
    "LayerNormToPrimitives",
    "LRNToConv",
    "ChannelShuffleToGather",
    "MatMulToFlatMatMul",
    "InstanceNormToPrimitives",
    "ReciprocalToDiv",
    "ReduceSumToMean",
    "ReduceL2ToMean",
    "AbsToRelu",
    "GemmFoldScales",
    "ConvTo2D",
    "ConvTransposeToDepthToSpace",
    "ConvTransposeToConv",
    "PoolCeilToPads",
    "PadToGather",
    "ErfApproximation",
    "Rank5HeadSplit",
    "Rank5TransposeMerge",
    "Rank5GatherSplit",
    "Rank5BinaryMerge",
    "EmptyInputDrop",
    "SoftmaxNanGuard",
    "SoftmaxIsNaN",
    "BoolMaskToFloat",
    "GatherInt32Indices",
    "PositionIdsViaFloat",
    "RunningCountViaFloat",
    "GatherElementsOfUniformConstant",
    "BoolMoveViaFloat",
    "LSTMToSteps",
    "GRUToSteps",
]


def _static(ctx: RuleContext, value: ir.Value | None, what: str = "input 0") -> Support:
    return Support.check(ctx.static_shape(value) is not None, f"{what} has no static shape")


def _scalar(b: Builder, value: float, dtype: ir.DataType | None) -> ir.Value:
    return b.const(np.array(value, dtype=(dtype or ir.DataType.FLOAT).numpy()), "scalar")


def _variadic(node: ir.Node, ctx: RuleContext) -> Support:
    """Sum and Mean become a chain of binary Adds: two inputs at least, each of a known rank to broadcast."""
    if len(node.inputs) < 2:
        return Support.no("needs at least two inputs")
    return Support.check(all(ctx.shape(v) is not None for v in node.inputs), "an input has no known rank")


def _static_input(node: ir.Node, ctx: RuleContext) -> tuple[ir.Value, ir.DataType | None, tuple[int, ...]]:
    """Input 0, its dtype and its shape, for a replace() whose match() made sure that shape is static."""
    x = node.inputs[0]
    dtype, shape = ctx.dtype(x), ctx.static_shape(x)
    assert shape is not None
    return x, dtype, shape


class _FloatRewrite(Rewrite):
    """A rewrite whose only condition is a float input 0: its replacement computes in that type."""

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        return float_input(node, ctx)


class SumToAdd(Rewrite):
    """Sum of N inputs -> a chain of N-1 binary Adds (exact)."""

    name = "sum-to-add"
    op_types = ("Sum",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        return _variadic(node, ctx)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        dtype = ctx.dtype(node.outputs[0]) or ctx.dtype(node.inputs[0])
        acc = node.inputs[0]
        shape = ctx.shape(acc)
        for value in node.inputs[1:]:
            shape = broadcast_shapes(shape, ctx.shape(value))
            acc = b.op("Add", [acc, value], shape=shape, dtype=dtype)
        return [acc]


class MeanToAddDiv(Rewrite):
    """Mean of N inputs -> Adds, then a Div by N (as ONNX defines Mean)."""

    name = "mean-to-add-div"
    op_types = ("Mean",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        ok = _variadic(node, ctx)
        return ok if not ok else float_input(node, ctx)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        (total,) = SumToAdd().replace(node, ctx, b)
        dtype = ctx.dtype(node.inputs[0])
        return [b.op("Div", [total, _scalar(b, len(node.inputs), dtype)], shape=ctx.shape(total), dtype=dtype)]


class HardSigmoidToRelu6(_FloatRewrite):
    """HardSigmoid(x) = clip(alpha*x + beta, 0, 1) -> Mul, Add, Clip(0, 6) (NNAPI RELU6), Div by 6."""

    name = "hardsigmoid-to-relu6"
    op_types = ("HardSigmoid",)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x = node.inputs[0]
        dtype, shape = ctx.dtype(x), ctx.shape(x)
        alpha, beta = float(attr(node, "alpha", 0.2)), float(attr(node, "beta", 0.5))
        scaled = b.op("Mul", [x, _scalar(b, 6.0 * alpha, dtype)], shape=shape, dtype=dtype)
        shifted = b.op("Add", [scaled, _scalar(b, 6.0 * beta, dtype)], shape=shape, dtype=dtype)
        clipped = _clip(b, ctx, shifted, 0.0, 6.0, shape, dtype)
        return [b.op("Div", [clipped, _scalar(b, 6.0, dtype)], shape=shape, dtype=dtype)]


def _clip(b: Builder, ctx: RuleContext, x: ir.Value, lo: float, hi: float, shape, dtype) -> ir.Value:
    if ctx.opset() >= 11:
        return b.op("Clip", [x, _scalar(b, lo, dtype), _scalar(b, hi, dtype)], shape=shape, dtype=dtype)
    return b.op("Clip", [x], shape=shape, dtype=dtype, min=lo, max=hi)


class HardSwishToRelu6(_FloatRewrite):
    """HardSwish(x) = x * relu6(x + 3) / 6 -> Add, Clip(0, 6) (NNAPI RELU6), Mul, Div."""

    name = "hardswish-to-relu6"
    op_types = ("HardSwish",)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x = node.inputs[0]
        dtype, shape = ctx.dtype(x), ctx.shape(x)
        shifted = b.op("Add", [x, _scalar(b, 3.0, dtype)], shape=shape, dtype=dtype)
        gate = _clip(b, ctx, shifted, 0.0, 6.0, shape, dtype)
        product = b.op("Mul", [x, gate], shape=shape, dtype=dtype)
        return [b.op("Div", [product, _scalar(b, 6.0, dtype)], shape=shape, dtype=dtype)]


class HardSwishToHardSigmoid(_FloatRewrite):
    """HardSwish(x) = x * HardSigmoid(x; alpha=1/6, beta=1/2)."""

    name = "hardswish-to-hardsigmoid"
    op_types = ("HardSwish",)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x = node.inputs[0]
        dtype, shape = ctx.dtype(x), ctx.shape(x)
        gate = b.op("HardSigmoid", [x], shape=shape, dtype=dtype, alpha=1.0 / 6.0, beta=0.5)
        return [b.op("Mul", [x, gate], shape=shape, dtype=dtype)]


def _clip_bounds(node: ir.Node, ctx: RuleContext) -> tuple[float | None, float | None] | None:
    """Clip's bounds as floats (None = unbounded); None if a bound is not a constant."""
    if ctx.node_opset(node) < 11:
        lo, hi = attr(node, "min"), attr(node, "max")
        return (None if lo is None else float(lo), None if hi is None else float(hi))
    bounds: list[float | None] = []
    for index in (1, 2):
        value = node.inputs[index] if index < len(node.inputs) else None
        if value is None:
            bounds.append(None)
            continue
        array = ctx.constant(value)
        if array is None or array.size != 1:
            return None
        bounds.append(float(array.reshape(-1)[0]))
    return bounds[0], bounds[1]


class ClipToMaxMin(Rewrite):
    """Clip with constant bounds other than (0, 6) and (-1, 1) -> Max with the lower, Min with the upper."""

    name = "clip-to-max-min"
    op_types = ("Clip",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        bounds = _clip_bounds(node, ctx)
        if bounds is None:
            return Support.no("the bounds are not constant scalars")
        if bounds == (None, None):
            return Support.no("Clip without bounds is an identity")
        return float_input(node, ctx)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x = node.inputs[0]
        dtype, shape = ctx.dtype(x), ctx.shape(x)
        lo, hi = _clip_bounds(node, ctx)  # type: ignore[misc]
        # A missing bound is the type's finite limit, not infinity (onnxruntime clips inf to FLT_MAX).
        info = np.finfo(dtype.numpy())  # type: ignore[union-attr]
        lo = float(info.min) if lo is None else lo
        hi = float(info.max) if hi is None else hi
        out = b.op("Max", [x, _scalar(b, lo, dtype)], shape=shape, dtype=dtype)
        return [b.op("Min", [out, _scalar(b, hi, dtype)], shape=shape, dtype=dtype)]


class ExpandToMul(Rewrite):
    """Expand(x, shape) -> Mul(x, ones) broadcasting to the same shape (exact: x * 1 == x)."""

    name = "expand-to-mul"
    op_types = ("Expand",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        target = ctx.constant(node.inputs[1])
        if target is None:
            return Support.no("the shape (input 1) is not constant")
        ok = _static(ctx, node.inputs[0])
        return ok if not ok else float_input(node, ctx)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x = node.inputs[0]
        x_shape = ctx.static_shape(x)
        target = tuple(int(d) for d in ctx.constant(node.inputs[1]).reshape(-1))  # type: ignore[union-attr]
        out_shape = broadcast_shapes(x_shape, target)
        assert out_shape is not None and x_shape is not None
        rank = len(out_shape)
        padded = (1,) * (rank - len(x_shape)) + tuple(x_shape)
        # The smallest ones tensor that broadcasts x to the output: 1 where x already has the size.
        ones_shape = tuple(1 if p == o else o for p, o in zip(padded, out_shape, strict=True))
        ones = b.const(np.ones(ones_shape, dtype=ctx.dtype(x).numpy()), "ones")  # type: ignore[union-attr]
        return [b.op("Mul", [x, ones], shape=out_shape, dtype=ctx.dtype(x))]


class TileToConcat(Rewrite):
    """Tile(x, repeats) -> Concat of copies along each repeated axis (exact)."""

    name = "tile-to-concat"
    op_types = ("Tile",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        repeats = ctx.constant(node.inputs[1])
        if repeats is None:
            return Support.no("repeats (input 1) is not constant")
        if np.any(repeats < 1) or int(np.prod(repeats)) > 64:
            return Support.no("repeats must be between 1 and 64 copies in all")
        return _static(ctx, node.inputs[0])

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x = node.inputs[0]
        shape = list(ctx.static_shape(x))  # type: ignore[arg-type]
        repeats = [int(r) for r in ctx.constant(node.inputs[1]).reshape(-1)]  # type: ignore[union-attr]
        out = x
        for axis, count in enumerate(repeats):
            if count == 1:
                continue
            shape[axis] *= count
            out = b.op("Concat", [out] * count, shape=tuple(shape), dtype=ctx.dtype(x), axis=axis)
        if out is x:
            out = b.op("Identity", [x], shape=tuple(shape), dtype=ctx.dtype(x))
        return [out]


class SplitToSlices(Rewrite):
    """Split -> one Slice per output (exact); for opsets 10-12 whose Split an EP does not take."""

    name = "split-to-slices"
    op_types = ("Split",)

    def _sizes(self, node: ir.Node, ctx: RuleContext) -> list[int] | None:
        shape = ctx.static_shape(node.inputs[0])
        if shape is None:
            return None
        axis = int(attr(node, "axis", 0)) % len(shape)
        if ctx.node_opset(node) < 13:
            split = attr(node, "split")
        else:
            split = ctx.constant(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] is not None else None
            split = None if split is None else tuple(int(s) for s in split.reshape(-1))
            if split is None and len(node.inputs) > 1 and node.inputs[1] is not None:
                return None
        n = len(node.outputs)
        if split is None:
            if shape[axis] % n:
                return None
            split = (shape[axis] // n,) * n
        return [int(s) for s in split] if sum(split) == shape[axis] else None

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        if ctx.node_opset(node) < 10:
            return Support.no("Slice with inputs needs opset 10")
        if ctx.node_opset(node) >= 18 and attr(node, "num_outputs") is not None:
            return Support.no("opset-18 num_outputs splits are left to the backend")
        return Support.check(self._sizes(node, ctx) is not None, "split sizes are not static")

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x = node.inputs[0]
        shape = list(ctx.static_shape(x))  # type: ignore[arg-type]
        axis = int(attr(node, "axis", 0)) % len(shape)
        outputs, start = [], 0
        for size in self._sizes(node, ctx):  # type: ignore[union-attr]
            out_shape = list(shape)
            out_shape[axis] = size
            outputs.append(b.op("Slice", [x, b.const(np.array([start], np.int64), "starts"),
                                          b.const(np.array([start + size], np.int64), "ends"),
                                          b.const(np.array([axis], np.int64), "axes")],
                                shape=tuple(out_shape), dtype=ctx.dtype(x)))
            start += size
        return outputs


class UnsqueezeToReshape(Rewrite):
    """Unsqueeze of a static shape -> Reshape to the result shape (exact)."""

    name = "unsqueeze-to-reshape"
    op_types = ("Unsqueeze", "Squeeze")

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        if ctx.node_opset(node) < 5:
            return Support.no("Reshape with a shape input needs opset 5")
        ok = _static(ctx, node.inputs[0])
        return ok if not ok else _static(ctx, node.outputs[0], "the output")

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        out_shape = ctx.static_shape(node.outputs[0])
        target = b.const(np.array(out_shape, np.int64), "shape")
        return [b.op("Reshape", [node.inputs[0], target], shape=out_shape, dtype=ctx.dtype(node.inputs[0]))]


class FlattenToReshape(UnsqueezeToReshape):
    """Flatten of a static shape -> Reshape to the 2-D result (exact)."""

    name = "flatten-to-reshape"
    op_types = ("Flatten",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        ok = super().match(node, ctx)
        if not ok:
            return ok
        return Support.check(ctx.static_shape(node.inputs[0]) != (), "Flatten of a scalar")

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        shape = ctx.static_shape(node.inputs[0])
        assert shape is not None
        axis = int(attr(node, "axis", 1))
        axis = axis + len(shape) if axis < 0 else axis
        out_shape = (int(np.prod(shape[:axis], dtype=np.int64)), int(np.prod(shape[axis:], dtype=np.int64)))
        target = b.const(np.array(out_shape, np.int64), "shape")
        return [b.op("Reshape", [node.inputs[0], target], shape=out_shape, dtype=ctx.dtype(node.inputs[0]))]


class NegToMul(_FloatRewrite):
    """Neg(x) -> Mul(x, -1) (exact, signed zeros included)."""

    name = "neg-to-mul"
    op_types = ("Neg",)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x = node.inputs[0]
        return [b.op("Mul", [x, _scalar(b, -1.0, ctx.dtype(x))], shape=ctx.shape(x), dtype=ctx.dtype(x))]


class BatchNormToMulAdd(Rewrite):
    """Inference BatchNormalization with constant parameters -> x * a + b, per channel (axis 1)."""

    name = "batchnorm-to-mul-add"
    op_types = ("BatchNormalization",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        if len(node.outputs) != 1:
            return Support.no("training-mode outputs are used")
        if not all(ctx.is_constant(v) for v in node.inputs[1:5]):
            return Support.no("scale, bias, mean and variance must be constant")
        rank = ctx.rank(node.inputs[0])
        if rank is None or rank < 2:
            return Support.no("input rank must be known and at least 2")
        return float_input(node, ctx)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x = node.inputs[0]
        dtype, shape = ctx.dtype(x), ctx.shape(x)
        scale, bias, mean, var = (ctx.constant(v).astype(np.float64) for v in node.inputs[1:5])  # type: ignore[union-attr]
        eps = float(attr(node, "epsilon", 1e-5))
        a = scale / np.sqrt(var + eps)
        c = bias - mean * a
        rank = len(shape)  # type: ignore[arg-type]
        channel_shape = (-1,) + (1,) * (rank - 2)
        np_dtype = dtype.numpy()  # type: ignore[union-attr]
        mul = b.op("Mul", [x, b.const(a.reshape(channel_shape).astype(np_dtype), "scale")], shape=shape, dtype=dtype)
        return [b.op("Add", [mul, b.const(c.reshape(channel_shape).astype(np_dtype), "shift")], shape=shape,
                     dtype=dtype)]


def _reduce_mean(b: Builder, ctx: RuleContext, x: ir.Value, axes: list[int], shape: tuple[int, ...],
                 dtype: ir.DataType | None, keepdims: int | None = None) -> ir.Value:
    """ReduceMean over *axes*, which opset 18 takes as an input and earlier opsets as an attribute."""
    if ctx.opset() >= 18:
        return b.op("ReduceMean", [x, b.const(np.array(axes, np.int64), "axes")], shape=shape, dtype=dtype,
                    keepdims=keepdims)
    return b.op("ReduceMean", [x], shape=shape, dtype=dtype, axes=axes, keepdims=keepdims)


def _normalize(b: Builder, ctx: RuleContext, x: ir.Value, shape: tuple[int, ...], dtype: ir.DataType | None,
               axes: list[int], eps: float) -> ir.Value:
    """(x - mean) / sqrt(variance + eps) over *axes*: the part LayerNormalization and InstanceNormalization
    share, before their scale and bias."""
    reduced = tuple(1 if i in axes else d for i, d in enumerate(shape))
    centered = b.op("Sub", [x, _reduce_mean(b, ctx, x, axes, reduced, dtype)], shape=shape, dtype=dtype)
    square = b.op("Mul", [centered, centered], shape=shape, dtype=dtype)
    variance = _reduce_mean(b, ctx, square, axes, reduced, dtype)
    std = b.op("Sqrt", [b.op("Add", [variance, _scalar(b, eps, dtype)], shape=reduced, dtype=dtype)],
               shape=reduced, dtype=dtype)
    return b.op("Div", [centered, std], shape=shape, dtype=dtype)


class LayerNormToPrimitives(Rewrite):
    """LayerNormalization -> ReduceMean, Sub, Mul, ReduceMean, Add, Sqrt, Div, Mul, Add (single output)."""

    name = "layernorm-to-primitives"
    op_types = ("LayerNormalization",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        if len([v for v in node.outputs if v.uses() or v.is_graph_output()]) > 1:
            return Support.no("mean / inverse-std-dev outputs are used")
        if ctx.static_shape(node.inputs[0]) is None:
            return Support.no("input 0 has no static shape")
        if not all(ctx.is_constant(v) for v in node.inputs[1:] if v is not None):
            return Support.no("scale and bias must be constant")
        return float_input(node, ctx)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x, dtype, shape = _static_input(node, ctx)
        axis = int(attr(node, "axis", -1)) % len(shape)
        axes = list(range(axis, len(shape)))
        eps = float(attr(node, "epsilon", 1e-5))
        out = _normalize(b, ctx, x, shape, dtype, axes, eps)
        out = b.op("Mul", [out, node.inputs[1]], shape=shape, dtype=dtype)
        if len(node.inputs) > 2 and node.inputs[2] is not None:
            out = b.op("Add", [out, node.inputs[2]], shape=shape, dtype=dtype)
        return [out] + [None] * (len(node.outputs) - 1)  # type: ignore[list-item]


class LRNToConv(Rewrite):
    """LRN -> Mul (square), a 1x1 Conv summing each channel window (a constant band matrix), Mul, Add,
    Pow and Div: y = x / (bias + alpha / size * window_sum(x^2)) ^ beta, as ONNX defines LRN."""

    name = "lrn-to-conv"
    op_types = ("LRN",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        shape = ctx.static_shape(node.inputs[0])
        if shape is None or len(shape) != 4:
            return Support.no("needs a static 4-D input")
        if shape[1] > 1024:
            return Support.no("more than 1024 channels")
        return float_input(node, ctx)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x, dtype, shape = _static_input(node, ctx)
        channels = shape[1]
        size = int(attr(node, "size"))
        alpha, beta, bias = float(attr(node, "alpha", 1e-4)), float(attr(node, "beta", 0.75)), float(attr(node, "bias", 1.0))
        before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
        offset = np.subtract.outer(np.arange(channels), np.arange(channels))  # (c - j) for output c, input j
        band = ((offset <= before) & (offset >= -after)).astype(dtype.numpy()).reshape(  # type: ignore[union-attr]
            channels, channels, 1, 1)  # 1 where input channel j is in output channel c's window
        square = b.op("Mul", [x, x], shape=shape, dtype=dtype)
        window = b.op("Conv", [square, b.const(band, "window")], shape=shape, dtype=dtype, kernel_shape=[1, 1])
        scaled = b.op("Mul", [window, _scalar(b, alpha / size, dtype)], shape=shape, dtype=dtype)
        base = b.op("Add", [scaled, _scalar(b, bias, dtype)], shape=shape, dtype=dtype)
        denominator = b.op("Pow", [base, _scalar(b, beta, dtype)], shape=shape, dtype=dtype)
        return [b.op("Div", [x, denominator], shape=shape, dtype=dtype)]


class ChannelShuffleToGather(Rewrite):
    """ShuffleNet's channel shuffle, Reshape [N,C,H,W] -> [N,g,C/g,H,W], Transpose (0,2,1,3,4), Reshape back
    to [N,C,H,W], -> one Gather of the permuted channels (exact; no rank-5 tensor left)."""

    name = "channel-shuffle-to-gather"
    op_types = ("Reshape",)

    def _chain(self, node: ir.Node, ctx: RuleContext) -> tuple[ir.Value, np.ndarray] | Support:
        transpose = node.inputs[0].producer() if node.inputs[0] is not None else None
        if transpose is None or transpose.op_type != "Transpose" or len(transpose.outputs[0].uses()) != 1:
            return Support.no("not the end of a Reshape-Transpose-Reshape channel shuffle")
        if tuple(attr(transpose, "perm", ())) != (0, 2, 1, 3, 4):
            return Support.no("the Transpose does not swap the group axes")
        first = transpose.inputs[0].producer() if transpose.inputs[0] is not None else None
        if first is None or first.op_type != "Reshape" or len(first.outputs[0].uses()) != 1:
            return Support.no("not the end of a Reshape-Transpose-Reshape channel shuffle")
        x = first.inputs[0]
        in_shape = ctx.static_shape(x)
        mid = ctx.static_shape(first.outputs[0])
        out = ctx.static_shape(node.outputs[0])
        if in_shape is None or mid is None or out is None or len(in_shape) != 4 or len(mid) != 5:
            return Support.no("shapes are not static 4-D / 5-D")
        n, c, h, w = in_shape
        if out != in_shape or mid[0] != n or mid[1] * mid[2] != c or mid[3:] != (h, w):
            return Support.no("the reshapes do not split and merge the channel axis")
        groups, per_group = mid[1], mid[2]
        # Output channel j*groups + i takes input channel i*per_group + j.
        order = np.arange(c).reshape(groups, per_group).T.reshape(-1).astype(np.int64)
        return x, order

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        chain = self._chain(node, ctx)
        return chain if isinstance(chain, Support) else Support.yes()

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x, order = self._chain(node, ctx)  # type: ignore[misc]
        return [b.op("Gather", [x, b.const(order, "channels")], shape=ctx.static_shape(x), dtype=ctx.dtype(x),
                     axis=1)]


class MatMulToFlatMatMul(Rewrite):
    """N-D x 2-D MatMul with a constant B ([..., K] @ [K, N]) -> Reshape to [M, K], 2-D MatMul, Reshape back
    (exact: the same dot products)."""

    name = "matmul-to-flat-matmul"
    op_types = ("MatMul",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        a, b = ctx.static_shape(node.inputs[0]), ctx.static_shape(node.inputs[1])
        if a is None or b is None:
            return Support.no("shapes are not static")
        if len(a) < 3 or len(b) != 2:
            return Support.no("needs an input of rank 3+ times a 2-D matrix")
        if not ctx.is_constant(node.inputs[1]):
            return Support.no("B (input 1) is not constant")
        if any(use.node.op_type == "BatchNormalization" for use in node.outputs[0].uses()):
            # onnxruntime's basic-level MatMul+BatchNormalization fusion also matches MatMul -> Reshape ->
            # BatchNormalization and folds the scale along the wrong axis when the channel count equals the
            # MatMul's N (found by the differential tests; onnxruntime 1.31).
            return Support.no("a BatchNormalization follows: onnxruntime would mis-fuse the flattened MatMul")
        return float_input(node, ctx)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        a_shape, b_shape = ctx.static_shape(node.inputs[0]), ctx.static_shape(node.inputs[1])
        assert a_shape is not None and b_shape is not None
        dtype = ctx.dtype(node.inputs[0])
        rows = int(np.prod(a_shape[:-1], dtype=np.int64))
        flat = b.reshape(node.inputs[0], (rows, a_shape[-1]), dtype)
        product = b.op("MatMul", [flat, node.inputs[1]], shape=(rows, b_shape[1]), dtype=dtype)
        return [b.reshape(product, (*a_shape[:-1], b_shape[1]), dtype)]


class InstanceNormToPrimitives(Rewrite):
    """InstanceNormalization -> ReduceMean over the spatial axes, Sub, Mul, ReduceMean, Add, Sqrt, Div,
    per-channel Mul and Add."""

    name = "instancenorm-to-primitives"
    op_types = ("InstanceNormalization",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        shape = ctx.static_shape(node.inputs[0])
        if shape is None or len(shape) < 3:
            return Support.no("needs a static input of rank 3+")
        if not (ctx.is_constant(node.inputs[1]) and ctx.is_constant(node.inputs[2])):
            return Support.no("scale and bias must be constant")
        return float_input(node, ctx)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x, dtype, shape = _static_input(node, ctx)
        axes = list(range(2, len(shape)))
        eps = float(attr(node, "epsilon", 1e-5))
        channel = (-1,) + (1,) * (len(shape) - 2)
        np_dtype = dtype.numpy()  # type: ignore[union-attr]
        out = _normalize(b, ctx, x, shape, dtype, axes, eps)
        scale = ctx.constant(node.inputs[1]).reshape(channel).astype(np_dtype)  # type: ignore[union-attr]
        bias = ctx.constant(node.inputs[2]).reshape(channel).astype(np_dtype)  # type: ignore[union-attr]
        out = b.op("Mul", [out, b.const(scale, "scale")], shape=shape, dtype=dtype)
        return [b.op("Add", [out, b.const(bias, "bias")], shape=shape, dtype=dtype)]


class ReciprocalToDiv(_FloatRewrite):
    """Reciprocal(x) -> Div(1, x) (exact)."""

    name = "reciprocal-to-div"
    op_types = ("Reciprocal",)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x = node.inputs[0]
        return [b.op("Div", [_scalar(b, 1.0, ctx.dtype(x)), x], shape=ctx.shape(x), dtype=ctx.dtype(x))]


def _reduce_axes(node: ir.Node, ctx: RuleContext) -> list[int] | None:
    rank = ctx.rank(node.inputs[0])
    if rank is None:
        return None
    if ctx.node_opset(node) >= 13 and node.op_type == "ReduceSum" or ctx.node_opset(node) >= 18:
        if len(node.inputs) < 2 or node.inputs[1] is None:
            return None if attr(node, "noop_with_empty_axes", 0) else list(range(rank))
        axes = ctx.constant(node.inputs[1])
        return None if axes is None else [int(a) % rank for a in axes.reshape(-1)]
    axes_attr = attr(node, "axes")
    return list(range(rank)) if axes_attr is None else [int(a) % rank for a in axes_attr]


class ReduceSumToMean(Rewrite):
    """ReduceSum -> ReduceMean times the number of reduced elements (equal within rounding)."""

    name = "reducesum-to-mean"
    op_types = ("ReduceSum",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        shape = ctx.static_shape(node.inputs[0])
        if shape is None:
            return Support.no("input 0 has no static shape")
        if _reduce_axes(node, ctx) is None:
            return Support.no("the axes are not constant (or the reduction is a no-op)")
        return float_input(node, ctx)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x, dtype, shape = _static_input(node, ctx)
        return [self._sum(node, ctx, b, x, dtype, shape)[0]]

    @staticmethod
    def _sum(node: ir.Node, ctx: RuleContext, b: Builder, x: ir.Value, dtype, shape) -> tuple[ir.Value, tuple]:
        """The node's reduced sum of *x* as a mean times the number of reduced elements, and its shape."""
        axes = _reduce_axes(node, ctx)
        assert axes is not None
        keep = int(attr(node, "keepdims", 1))
        out_shape = tuple(1 if i in axes else d for i, d in enumerate(shape)) if keep else \
            tuple(d for i, d in enumerate(shape) if i not in axes)
        count = int(np.prod([shape[a] for a in axes], dtype=np.int64))
        mean = _reduce_mean(b, ctx, x, axes, out_shape, dtype, keepdims=keep)
        return b.op("Mul", [mean, _scalar(b, float(count), dtype)], shape=out_shape, dtype=dtype), out_shape


class ReduceL2ToMean(ReduceSumToMean):
    """ReduceL2 -> Sqrt(ReduceMean(x·x) times the number of reduced elements) (equal within rounding; F.normalize
    in cosine attention)."""

    name = "reducel2-to-mean"
    op_types = ("ReduceL2",)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x, dtype, shape = _static_input(node, ctx)
        total, out_shape = self._sum(node, ctx, b, b.op("Mul", [x, x], shape=shape, dtype=dtype), dtype, shape)
        return [b.op("Sqrt", [total], shape=out_shape, dtype=dtype)]


class AbsToRelu(_FloatRewrite):
    """Abs(x) -> Relu(x) + Relu(-x) (exact, NaN and infinities included)."""

    name = "abs-to-relu"
    op_types = ("Abs",)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x = node.inputs[0]
        dtype, shape = ctx.dtype(x), ctx.shape(x)
        negated = b.op("Mul", [x, _scalar(b, -1.0, dtype)], shape=shape, dtype=dtype)
        positive = b.op("Relu", [x], shape=shape, dtype=dtype)
        negative = b.op("Relu", [negated], shape=shape, dtype=dtype)
        return [b.op("Add", [positive, negative], shape=shape, dtype=dtype)]


class GemmFoldScales(Rewrite):
    """Gemm with alpha != 1 or beta != 1 and constant B (and C) -> the same Gemm with alpha folded into B
    and beta into C."""

    name = "gemm-fold-scales"
    op_types = ("Gemm",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        alpha, beta = float(attr(node, "alpha", 1.0)), float(attr(node, "beta", 1.0))
        if alpha == 1.0 and beta == 1.0:
            return Support.no("alpha and beta are already 1")
        if not ctx.is_constant(node.inputs[1]):
            return Support.no("B (input 1) is not constant")
        has_c = len(node.inputs) > 2 and node.inputs[2] is not None
        if has_c and beta != 1.0 and not ctx.is_constant(node.inputs[2]):
            return Support.no("C (input 2) is not constant")
        return float_input(node, ctx)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        alpha, beta = float(attr(node, "alpha", 1.0)), float(attr(node, "beta", 1.0))
        weight = ctx.constant(node.inputs[1])
        assert weight is not None
        inputs: list[ir.Value | None] = [node.inputs[0], b.const((weight * alpha).astype(weight.dtype), "B")]
        if len(node.inputs) > 2 and node.inputs[2] is not None:
            c = ctx.constant(node.inputs[2])
            inputs.append(b.const((c * beta).astype(c.dtype), "C") if c is not None else node.inputs[2])
        return [b.op("Gemm", inputs, shape=ctx.shape(node.outputs[0]), dtype=ctx.dtype(node.inputs[0]),
                     transA=attr(node, "transA", 0) or None, transB=attr(node, "transB", 0) or None)]
