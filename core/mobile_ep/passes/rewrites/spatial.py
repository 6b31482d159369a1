"""Rewrites of convolutions, pools and pads into the 2-D, floor-mode, constant-pad forms mobile EPs take.

Part of the rewrite library :mod:`mobile_ep.passes.rewrites` (which exports these classes).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from mobile_ep.contract import RuleContext, Support, attr
from mobile_ep.contract.rewrite import Builder, Rewrite, float_input

__all__ = ["ConvTo2D", "ConvTransposeToDepthToSpace", "ConvTransposeToConv", "PoolCeilToPads", "PadToGather"]


def _indices_used(node: ir.Node) -> bool:
    """A pool's second output (MaxPool's Indices) is read."""
    return len([v for v in node.outputs if v.uses() or v.is_graph_output()]) > 1


def _static_input_constant_weights(node: ir.Node, ctx: RuleContext) -> Support:
    """A ConvTranspose's input is 3-D or 4-D of static shape, its weight and bias constant."""
    shape = ctx.static_shape(node.inputs[0])
    if shape is None or len(shape) not in (3, 4):
        return Support.no("needs a static 3-D or 4-D input")
    bias = node.inputs[2] if len(node.inputs) > 2 else None
    if not ctx.is_constant(node.inputs[1]) or (bias is not None and not ctx.is_constant(bias)):
        return Support.no("weight and bias must be constant")
    return Support.yes()


def _reshape(b: Builder, x: ir.Value, shape: Sequence[int], dtype: ir.DataType | None) -> ir.Value:
    return b.op("Reshape", [x, b.const(np.array(shape, np.int64), "shape")], shape=tuple(shape), dtype=dtype)


def _ceil_end_pads(node: ir.Node, spatial: Sequence[int]) -> list[int] | None:
    """End pads that make a floor-mode pool give *node*'s ceil-mode output size (onnxruntime's rule: a
    last window starting in the end padding is dropped); None where auto_pad is set."""
    if attr(node, "auto_pad", "NOTSET") != "NOTSET":
        return None
    n = len(spatial)
    kernel = list(attr(node, "kernel_shape"))
    strides = list(attr(node, "strides", [1] * n))
    dilations = list(attr(node, "dilations", [1] * n))
    pads = list(attr(node, "pads", [0] * 2 * n))
    ends = []
    for i, size in enumerate(spatial):
        span = dilations[i] * (kernel[i] - 1) + 1
        total = size + pads[i] + pads[n + i]
        out = -(-(total - span) // strides[i]) + 1
        if (out - 1) * strides[i] >= size + pads[i]:
            out -= 1
        ends.append(max(pads[n + i], (out - 1) * strides[i] + span - size - pads[i]))
    return ends


class ConvTo2D(Rewrite):
    """1-D Conv, ConvTranspose, MaxPool or AveragePool on [N, C, L] -> Reshape to [N, C, L, 1], the 2-D op
    with a [k, 1] kernel (weights reshaped to [M, C/g, k, 1]), Reshape back (pools exact; convolutions the same
    sums, which a runtime's 1-D and 2-D kernels may add in another order)."""

    name = "conv1d-to-conv2d"
    op_types = ("Conv", "ConvTranspose", "MaxPool", "AveragePool")

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        shape = ctx.static_shape(node.inputs[0])
        if shape is None or len(shape) != 3:
            return Support.no("needs a static 3-D input")
        if ctx.static_shape(node.outputs[0]) is None:
            return Support.no("the output has no static shape")
        if node.op_type in ("Conv", "ConvTranspose"):
            if not ctx.is_constant(node.inputs[1]):
                return Support.no("the weight (input 1) is not constant")
            if attr(node, "output_shape") is not None:
                return Support.no("output_shape is given")
        elif _indices_used(node):
            return Support.no("the Indices output is used")
        if node.op_type == "MaxPool" and attr(node, "storage_order", 0):
            return Support.no("storage_order=1")
        return float_input(node, ctx)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x = node.inputs[0]
        dtype = ctx.dtype(x)
        n, c, length = ctx.static_shape(x)  # type: ignore[misc]
        out = ctx.static_shape(node.outputs[0])
        assert out is not None
        attrs: dict = {}
        for key in ("kernel_shape", "strides", "dilations", "output_padding"):
            value = attr(node, key)
            if value is not None:
                attrs[key] = [int(value[0]), 1] if key != "output_padding" else [int(value[0]), 0]
        pads = attr(node, "pads")
        if pads is not None:
            attrs["pads"] = [int(pads[0]), 0, int(pads[1]), 0]
        for key in ("auto_pad", "group", "ceil_mode", "count_include_pad", "storage_order"):
            value = attr(node, key)
            if value is not None:
                attrs[key] = value
        ends = _ceil_end_pads(node, (length,)) if attrs.get("ceil_mode") else None
        if ends is not None and not attrs.get("count_include_pad"):  # ceil mode as end pads (pool-ceil-to-pads)
            attrs["ceil_mode"] = 0
            attrs["pads"] = [attrs.get("pads", [0])[0], 0, ends[0], 0]
        inputs: list[ir.Value | None] = [_reshape(b, x, (n, c, length, 1), dtype)]
        if node.op_type in ("Conv", "ConvTranspose"):
            weight = ctx.constant(node.inputs[1])
            assert weight is not None
            # (a copy: a view would pin the memory map of an external weight file)
            inputs.append(b.const(np.array(weight.reshape(*weight.shape, 1)), "weight"))
            if "kernel_shape" not in attrs:
                attrs["kernel_shape"] = [int(weight.shape[2]), 1]
            inputs.extend(node.inputs[2:3])
        y = b.op(node.op_type, inputs, shape=(*out, 1), dtype=dtype, **attrs)
        return [_reshape(b, y, out, dtype)] + [None] * (len(node.outputs) - 1)  # type: ignore[list-item]


class ConvTransposeToDepthToSpace(Rewrite):
    """2-D ConvTranspose with kernel = stride, no padding, dilation 1, one group -> a 1x1 Conv to
    k*k*C_out channels (weights reordered for DepthToSpace's DCR order) and DepthToSpace (the same
    products: each output takes exactly one kernel tap; equal within the sums' rounding)."""

    name = "convtranspose-to-depthtospace"
    op_types = ("ConvTranspose",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        checked = _static_input_constant_weights(node, ctx)
        if not checked:
            return checked
        shape = ctx.static_shape(node.inputs[0])
        assert shape is not None
        weight = ctx.constant(node.inputs[1])
        kernel = list(attr(node, "kernel_shape", weight.shape[2:]))  # type: ignore[union-attr]
        spatial = len(shape) - 2
        if list(attr(node, "strides", [1] * spatial)) != kernel or len(set(kernel)) != 1:
            return Support.no("the kernel is not square and equal to the stride")
        if any(attr(node, "pads", [0])) or any(attr(node, "output_padding", [0])):
            return Support.no("pads or output_padding are set")
        if attr(node, "auto_pad", "NOTSET") not in ("NOTSET", "VALID") or attr(node, "output_shape") is not None:
            return Support.no("auto_pad or output_shape is set")
        if any(d != 1 for d in attr(node, "dilations", [1])) or int(attr(node, "group", 1)) != 1:
            return Support.no("dilations or groups are not 1")
        return float_input(node, ctx)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x = node.inputs[0]
        dtype = ctx.dtype(x)
        shape = ctx.static_shape(x)
        assert shape is not None
        weight = ctx.constant(node.inputs[1])
        assert weight is not None
        c_in, c_out = weight.shape[:2]
        s = int(weight.shape[2])
        inputs: list[ir.Value | None] = [x]
        if len(shape) == 3:  # [N, C, L]: a 1x1 Conv to s*O channels (a*O + o), then interleave the taps
            n, _, length = shape
            kernel = weight.transpose(2, 1, 0).reshape(s * c_out, c_in, 1, 1)
            inputs = [_reshape(b, x, (n, c_in, length, 1), dtype), b.const(np.ascontiguousarray(kernel), "weight")]
            if len(node.inputs) > 2 and node.inputs[2] is not None:
                inputs.append(b.const(np.tile(ctx.constant(node.inputs[2]), s), "bias"))  # type: ignore[arg-type]
            conv = b.op("Conv", inputs, shape=(n, s * c_out, length, 1), dtype=dtype, kernel_shape=[1, 1])
            taps = _reshape(b, conv, (n, s, c_out, length), dtype)
            y = b.op("Transpose", [taps], shape=(n, c_out, length, s), dtype=dtype, perm=[0, 2, 3, 1])
            return [_reshape(b, y, (n, c_out, length * s), dtype)]
        n, _, h, w_in = shape
        # conv output channel (a*s + b)*O + o takes weight[c, o, a, b]: DepthToSpace DCR puts it at (i*s+a, j*s+b)
        kernel = weight.transpose(2, 3, 1, 0).reshape(s * s * c_out, c_in, 1, 1)
        inputs.append(b.const(np.ascontiguousarray(kernel), "weight"))
        if len(node.inputs) > 2 and node.inputs[2] is not None:
            inputs.append(b.const(np.tile(ctx.constant(node.inputs[2]), s * s), "bias"))  # type: ignore[arg-type]
        conv = b.op("Conv", inputs, shape=(n, s * s * c_out, h, w_in), dtype=dtype, kernel_shape=[1, 1])
        y = b.op("DepthToSpace", [conv], shape=(n, c_out, h * s, w_in * s), dtype=dtype, blocksize=s, mode="DCR")
        return [y]


class PoolCeilToPads(Rewrite):
    """MaxPool or AveragePool with ceil_mode=1 -> the same pool in floor mode with end pads that give the
    same windows (exact: maxima ignore pads and averages without count_include_pad count only input
    elements, in both modes)."""

    name = "pool-ceil-to-pads"
    op_types = ("MaxPool", "AveragePool")

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        if not attr(node, "ceil_mode", 0):
            return Support.no("ceil_mode is 0")
        shape = ctx.static_shape(node.inputs[0])
        if shape is None or len(shape) < 3:
            return Support.no("needs a static input of rank 3+")
        if _ceil_end_pads(node, shape[2:]) is None:
            return Support.no("auto_pad is set")
        if _indices_used(node):
            return Support.no("the Indices output is used")
        if node.op_type == "AveragePool" and attr(node, "count_include_pad", 0):
            return Support.no("count_include_pad=1 (onnxruntime's ceil-mode divisor is not the floor mode's)")
        return float_input(node, ctx)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x = node.inputs[0]
        shape = ctx.static_shape(x)
        assert shape is not None
        n = len(shape) - 2
        begin = list(attr(node, "pads", [0] * 2 * n))[:n]
        ends = _ceil_end_pads(node, shape[2:])
        assert ends is not None
        attrs = {key: attr(node, key) for key in ("kernel_shape", "strides", "dilations", "storage_order")
                 if attr(node, key) is not None}
        attrs["pads"] = [int(p) for p in begin + ends]
        y = b.op(node.op_type, [x], shape=ctx.shape(node.outputs[0]), dtype=ctx.dtype(x), **attrs)
        return [y] + [None] * (len(node.outputs) - 1)  # type: ignore[list-item]


class PadToGather(Rewrite):
    """Pad with mode reflect, edge or wrap (constant, non-negative pads) -> one Gather per padded axis with
    the source index of every output position (exact: a copy)."""

    name = "pad-to-gather"
    op_types = ("Pad",)

    def _pads(self, node: ir.Node, ctx: RuleContext) -> list[tuple[int, int]] | None:
        rank = ctx.rank(node.inputs[0])
        if rank is None:
            return None
        if ctx.node_opset(node) < 11:
            flat = list(attr(node, "pads", []))
            axes = list(range(rank))
        else:
            flat = ctx.constant(node.inputs[1]) if len(node.inputs) > 1 else None
            if flat is None:
                return None
            flat = [int(p) for p in flat.reshape(-1)]
            axes_value = node.inputs[3] if len(node.inputs) > 3 else None
            axes = list(range(rank)) if axes_value is None else [int(a) % rank for a in ctx.constant(axes_value)]
        pads = [(0, 0)] * rank
        for i, axis in enumerate(axes):
            pads[axis] = (flat[i], flat[i + len(axes)])
        return pads

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        mode = attr(node, "mode", "constant")
        if mode not in ("reflect", "edge", "wrap"):
            return Support.no(f"mode {mode}")
        shape = ctx.static_shape(node.inputs[0])
        if shape is None:
            return Support.no("input 0 has no static shape")
        if len(node.inputs) > 3 and node.inputs[3] is not None and not ctx.is_constant(node.inputs[3]):
            return Support.no("axes are not constant")
        pads = self._pads(node, ctx)
        if pads is None:
            return Support.no("pads are not constant")
        if any(p < 0 for pair in pads for p in pair):
            return Support.no("negative pads")
        if mode == "reflect" and any(sum(p) and max(p) >= size for p, size in zip(pads, shape, strict=True)):
            return Support.no("a reflect pad is not smaller than its axis")
        if mode == "wrap" and any(max(p) > size for p, size in zip(pads, shape, strict=True)):
            return Support.no("a wrap pad is larger than its axis")
        return Support.yes()

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x = node.inputs[0]
        shape = list(ctx.static_shape(x))  # type: ignore[arg-type]
        mode = attr(node, "mode")
        pads = self._pads(node, ctx)
        assert pads is not None
        y = x
        for axis, (before, after) in enumerate(pads):
            if not before and not after:
                continue
            size = shape[axis]
            positions = np.arange(-before, size + after)
            if mode == "edge":
                index = np.clip(positions, 0, size - 1)
            elif mode == "wrap":
                index = positions % size
            else:  # reflect: mirror about the first and the last element
                period = 2 * (size - 1)
                index = np.abs(positions) % period if size > 1 else np.zeros_like(positions)
                index = np.where(index >= size, period - index, index)
            shape[axis] = len(positions)
            y = b.op("Gather", [y, b.const(index.astype(np.int64), "index")], shape=tuple(shape), dtype=ctx.dtype(x),
                     axis=axis)
        if y is x:
            y = b.op("Identity", [x], shape=tuple(shape), dtype=ctx.dtype(x))
        return [y]


class ConvTransposeToConv(Rewrite):
    """1-D or 2-D ConvTranspose (one group, equal strides, pads at most the dilated kernel extent) -> the
    input with zeros inserted between its elements (Concat with zeros, then DepthToSpace, or for 1-D a Reshape;
    Slice) and a zero-padded Conv with the flipped, transposed kernel (1-D: as a [k, 1] kernel; the same
    products; zeros add nothing; equal within the sums' rounding)."""

    name = "convtranspose-to-conv"
    op_types = ("ConvTranspose",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        checked = _static_input_constant_weights(node, ctx)
        if not checked:
            return checked
        shape = ctx.static_shape(node.inputs[0])
        assert shape is not None
        if int(attr(node, "group", 1)) != 1:
            return Support.no("groups are not 1")
        if attr(node, "auto_pad", "NOTSET") != "NOTSET" or attr(node, "output_shape") is not None:
            return Support.no("auto_pad or output_shape is set")
        spatial = len(shape) - 2
        if len(set(attr(node, "strides", [1] * spatial))) != 1:
            return Support.no("the strides differ")
        weight = ctx.constant(node.inputs[1])
        extent = [d * (k - 1) for d, k in zip(attr(node, "dilations", [1] * spatial), weight.shape[2:], strict=True)]  # type: ignore[union-attr]
        pads = list(attr(node, "pads", [0] * 2 * spatial))
        if any(p > extent[i % spatial] for i, p in enumerate(pads)):
            return Support.no("pads are larger than the dilated kernel extent")
        return float_input(node, ctx)

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        if len(ctx.static_shape(node.inputs[0]) or ()) == 3:
            return self._replace_1d(node, ctx, b)
        x = node.inputs[0]
        dtype = ctx.dtype(x)
        n, c, h, w = ctx.static_shape(x)  # type: ignore[misc]
        weight = ctx.constant(node.inputs[1])
        assert weight is not None
        kh, kw = weight.shape[2:]
        s = int(attr(node, "strides", [1, 1])[0])
        dh, dw = (int(d) for d in attr(node, "dilations", [1, 1]))
        pt, pl, pb, pr = (int(p) for p in attr(node, "pads", [0, 0, 0, 0]))
        oh, ow = (int(p) for p in attr(node, "output_padding", [0, 0]))
        z = x
        zh, zw = (h - 1) * s + 1, (w - 1) * s + 1
        if s > 1:
            zeros = b.const(np.zeros((n, c * (s * s - 1), h, w), dtype.numpy()), "zeros")  # type: ignore[union-attr]
            stacked = b.op("Concat", [x, zeros], shape=(n, c * s * s, h, w), dtype=dtype, axis=1)
            spread = b.op("DepthToSpace", [stacked], shape=(n, c, h * s, w * s), dtype=dtype, blocksize=s, mode="DCR")
            ints = [b.const(np.array(v, np.int64), "slice") for v in ([0, 0], [zh, zw], [2, 3])]
            z = b.op("Slice", [spread, *ints], shape=(n, c, zh, zw), dtype=dtype)
        # the Conv's zero padding: the dilated kernel's extent less the ConvTranspose's pads, plus output_padding
        pads = [dh * (kh - 1) - pt, dw * (kw - 1) - pl, dh * (kh - 1) - pb + oh, dw * (kw - 1) - pr + ow]
        kernel = np.ascontiguousarray(weight[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
        inputs: list[ir.Value | None] = [z, b.const(kernel, "weight"), *node.inputs[2:3]]
        return [b.op("Conv", inputs, shape=ctx.shape(node.outputs[0]), dtype=dtype, kernel_shape=[int(kh), int(kw)],
                     dilations=[dh, dw], pads=pads)]

    def _replace_1d(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x = node.inputs[0]
        dtype = ctx.dtype(x)
        n, c, length = ctx.static_shape(x)  # type: ignore[misc]
        weight = ctx.constant(node.inputs[1])
        assert weight is not None
        k = int(weight.shape[2])
        s = int(attr(node, "strides", [1])[0])
        d = int(attr(node, "dilations", [1])[0])
        begin, end = (int(p) for p in attr(node, "pads", [0, 0]))
        extra = int(attr(node, "output_padding", [0])[0])
        z = _reshape(b, x, (n, c, length, 1), dtype)
        zl = (length - 1) * s + 1
        if s > 1:  # each element followed by s-1 zeros: a Concat on a trailing axis, read back as one axis
            zeros = b.const(np.zeros((n, c, length, s - 1), dtype.numpy()), "zeros")  # type: ignore[union-attr]
            stacked = b.op("Concat", [z, zeros], shape=(n, c, length, s), dtype=dtype, axis=3)
            flat = _reshape(b, stacked, (n, c, length * s, 1), dtype)
            ints = [b.const(np.array([v], np.int64), "slice") for v in (0, zl, 2)]
            z = b.op("Slice", [flat, *ints], shape=(n, c, zl, 1), dtype=dtype)
        kernel = np.ascontiguousarray(weight[:, :, ::-1].transpose(1, 0, 2)[..., None])
        out = ctx.static_shape(node.outputs[0])
        assert out is not None
        conv = b.op("Conv", [z, b.const(kernel, "weight"), *node.inputs[2:3]], shape=(*out, 1), dtype=dtype,
                    kernel_shape=[k, 1], dilations=[d, 1], pads=[d * (k - 1) - begin, 0, d * (k - 1) - end + extra, 0])
        return [_reshape(b, conv, out, dtype)]
