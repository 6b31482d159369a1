"""Pooling (ORT ``pool_op_builder.cc``): AveragePool, MaxPool, GlobalAveragePool, GlobalMaxPool."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, CompileError, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import CoreMLRule, is_mlprogram, window_pads


def _rank4(unit: NodeUnit, ctx: RuleContext) -> Support:
    rank = ctx.rank(unit.target.inputs[0])
    if rank != 4:
        return Support.no(f"rank-{rank} input; ORT takes 4-D (2-D pooling) only")
    return SUPPORTED


class Pool(CoreMLRule):
    op_types = ("AveragePool", "MaxPool")

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """4-D input; 2-D kernel; storage_order=0; dilations 1; one output (no MaxPool indices).
        NeuralNetwork: ceil_mode=0."""
        result = _rank4(unit, ctx)
        if not result:
            return result
        node = unit.target
        if attr(node, "storage_order", 0) == 1:
            return Support.no("storage_order=1 is not supported")
        kernel = attr(node, "kernel_shape", (1, 1))
        if len(kernel) != 2:
            return Support.no(f"{len(kernel)}-D kernel; ORT takes 2-D pooling only")
        if not is_mlprogram(ctx) and attr(node, "ceil_mode", 0) == 1:
            return Support.no("NeuralNetwork: ceil_mode=1 is not supported (use model_format=MLProgram)")
        dilations = attr(node, "dilations")
        if dilations is not None and tuple(dilations) != (1, 1):
            return Support.no(f"dilations {list(dilations)}; Core ML pools without dilation")
        if len(node.outputs) != 1:
            return Support.no("the Indices output is not supported")
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        """ceil_mode becomes extra end padding sized from the ONNX output shape (padding Core ML leaves
        out of the max and, with count_include_pad=0, of the average); an average that counts padding
        gets an exact per-position divisor instead."""
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        kernel = [int(k) for k in attr(node, "kernel_shape")]
        strides = [int(s) for s in attr(node, "strides", (1, 1))]
        pad_type, pads = window_pads(node, ctx, kernel, strides, [1, 1])
        ceil_mode = bool(attr(node, "ceil_mode", 0))
        average = node.op_type == "AveragePool"
        include_pad = bool(attr(node, "count_include_pad", 0))
        mb = b.mb
        if ceil_mode or (average and include_pad and pad_type == "custom" and any(pads)):
            x_shape, y_shape = ctx.static_shape(x), ctx.static_shape(y)
            if x_shape is None or y_shape is None or pad_type != "custom":
                raise CompileError("ceil_mode or an average counting padding needs static shapes")
            extra = [max(0, (o - 1) * s + k - (size + pads[2 * i] + pads[2 * i + 1]))
                     for i, (o, s, k, size) in enumerate(zip(y_shape[2:], strides, kernel, x_shape[2:],
                                                              strict=True))]
            full = [pads[0], pads[1] + extra[0], pads[2], pads[3] + extra[1]]
            if not average:
                b.set(y, mb.max_pool(x=b.var(x), kernel_sizes=kernel, strides=strides, pad_type="custom",
                                     pad=full, name=b.name(y)))
                return
            if not include_pad:
                b.set(y, mb.avg_pool(x=b.var(x), kernel_sizes=kernel, strides=strides, pad_type="custom",
                                     pad=full, exclude_padding_from_average=True, name=b.name(y)))
                return
            # count_include_pad=1: the divisor counts explicit pads but not the ceil-mode overhang.
            summed = mb.avg_pool(x=b.var(x), kernel_sizes=kernel, strides=strides, pad_type="custom", pad=full,
                                 exclude_padding_from_average=False, name=b.tmp(f"{y.name}_avg"))
            counts = _window_counts(x_shape[2:], kernel, strides, pads, y_shape[2:])
            correction = (kernel[0] * kernel[1] / counts).astype(b.np_dtype(x)).reshape((1, 1) + counts.shape)
            b.set(y, mb.mul(x=summed, y=correction, name=b.name(y)))
            return
        kwargs = {"x": b.var(x), "kernel_sizes": kernel, "strides": strides, "pad_type": pad_type,
                  "name": b.name(y)}
        if pad_type == "custom":
            kwargs["pad"] = pads
        if average:
            b.set(y, mb.avg_pool(exclude_padding_from_average=not include_pad, **kwargs))
        else:
            b.set(y, mb.max_pool(**kwargs))


def _window_counts(sizes, kernel, strides, pads, outs) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Per output position, how many cells of its window lie in the input or its explicit padding."""
    counts = []
    for i in range(2):
        low, high = -pads[2 * i], sizes[i] + pads[2 * i + 1]
        starts = np.arange(outs[i]) * strides[i] - pads[2 * i]
        counts.append(np.minimum(starts + kernel[i], high) - np.maximum(starts, low))
    return np.outer(counts[0], counts[1]).astype(np.float64)


class GlobalPool(CoreMLRule):
    op_types = ("GlobalAveragePool", "GlobalMaxPool")

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """4-D input."""
        return _rank4(unit, ctx)

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        fn = b.mb.reduce_mean if node.op_type == "GlobalAveragePool" else b.mb.reduce_max
        b.set(y, fn(x=b.var(x), axes=[2, 3], keep_dims=True, name=b.name(y)))
