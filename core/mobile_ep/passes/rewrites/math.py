"""Rewrites of functions mobile EPs lack (Erf) and of rank-5 attention head chains.

Part of the rewrite library :mod:`mobile_ep.passes.rewrites` (which exports these classes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import onnx_ir as ir

from mobile_ep.contract import RuleContext, Support, attr
from mobile_ep.contract.rewrite import Builder, Rewrite, int_list

__all__ = ["ErfApproximation", "Rank5HeadSplit", "Rank5TransposeMerge", "Rank5GatherSplit", "Rank5BinaryMerge",
           "EmptyInputDrop"]

#: erf(x) ~ x * P(x^2) / Q(x^2) on x clamped to [-4, 4]: a rational fit (weighted least squares, then
#: Lawson's reweighting) to erf on [0, 4]; |error| <= 2e-9 in exact arithmetic, <= 4e-7 evaluated in float32.
_ERF_P = (1.128379225730896, 0.19258449971675873, 0.05583365634083748, 0.004230262711644173,
          0.00041667488403618336, 7.010137778706849e-06)
_ERF_Q = (1.0, 0.5040071606636047, 0.11748243868350983, 0.016321202740073204, 0.0014288636157289147,
          7.414933497784659e-05, 2.722859449022508e-07)
#: Where the fit stops: erf(4) is 1 - 1.5e-8, 1.0 in float32.
_ERF_CLAMP = 4.0


class ErfApproximation(Rewrite):
    """Erf (float32) -> an odd rational function on the input clamped to [-4, 4]: Max, Min, Mul, Adds and
    Muls (Horner), Div.  APPROXIMATE: at most 4e-7 absolute error in float32 (1 at +-inf, NaN kept)."""

    name = "erf-approx"
    op_types = ("Erf",)
    max_abs_error: ClassVar[float | None] = 4e-7

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        if ctx.dtype(node.inputs[0]) != ir.DataType.FLOAT:
            return Support.no("input 0 is not float32")
        return Support.check(ctx.shape(node.inputs[0]) is not None, "input 0 has no known rank")

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x = node.inputs[0]
        shape, dtype = ctx.shape(x), ir.DataType.FLOAT

        def scalar(value: float) -> ir.Value:
            return b.const(np.array(value, np.float32), "coefficient")

        def op(op_type: str, a: ir.Value, c: ir.Value) -> ir.Value:
            return b.op(op_type, [a, c], shape=shape, dtype=dtype)

        xc = op("Min", op("Max", x, scalar(-_ERF_CLAMP)), scalar(_ERF_CLAMP))
        z = op("Mul", xc, xc)

        def horner(coefficients: Sequence[float]) -> ir.Value:
            acc = op("Add", op("Mul", z, scalar(coefficients[-1])), scalar(coefficients[-2]))
            for c in reversed(coefficients[:-2]):
                acc = op("Add", op("Mul", acc, z), scalar(c))
            return acc

        return [op("Div", op("Mul", xc, horner(_ERF_P)), horner(_ERF_Q))]


class _TakesOne(Rewrite):
    """A rewrite whose match is a chain (``_chain``: the rank-5 data, its shape, the axes kept, the axis and the
    index taken, or why not) that takes one index of one axis: replaced by :func:`_take_one`."""

    def _chain(self, node: ir.Node, ctx: RuleContext):
        raise NotImplementedError

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        chain = self._chain(node, ctx)
        if isinstance(chain, Support):
            return chain
        return Support.check(ctx.dtype(node.inputs[0]) is not None, "unknown dtype")

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        x, mid, final, q, index = self._chain(node, ctx)
        return [_take_one(b, x, ctx.dtype(x), mid, final, q, index)]


class Rank5HeadSplit(_TakesOne):
    """The attention's QKV split through a rank-5 tensor: Squeeze of one index taken by a Slice, with
    Transposes before or after the Slice, of a Reshape to rank 5 (as exporters and onnxruntime's transpose
    optimizer leave it) -> Reshape to rank 3 around the sliced axis, Slice, Reshape to rank 4, Transpose
    (exact: the same elements moved; every tensor of rank <= 4)."""

    name = "rank5-head-split"
    op_types = ("Squeeze",)

    def _chain(self, node: ir.Node, ctx: RuleContext):
        """(x, the rank-5 shape, the order of its axes after the chain, the sliced axis, the index)."""
        chain: list[ir.Node] = []
        value = node.inputs[0]
        while True:
            producer = value.producer() if value is not None else None
            if producer is None or producer.op_type not in ("Slice", "Transpose", "Reshape") or len(chain) > 4:
                return Support.no("not a Squeeze of a Slice (and Transposes) of a Reshape to rank 5")
            if producer.op_type == "Reshape":
                break
            chain.append(producer)
            value = producer.inputs[0]
        x = producer.inputs[0]
        source, mid = ctx.static_shape(x), ctx.static_shape(producer.outputs[0])
        if source is None or mid is None or len(mid) != 5:
            return Support.no("shapes are not static, or the Reshape is not to rank 5")
        axes_of = list(range(5))  # the rank-5 tensor's axis at each position of the current tensor
        sliced: tuple[int, int] | None = None
        for step in reversed(chain):
            if step.op_type == "Transpose":
                perm = list(attr(step, "perm", range(len(axes_of) - 1, -1, -1)))
                axes_of = [axes_of[p] for p in perm]
                continue
            starts, ends = int_list(ctx, step, 1, "starts"), int_list(ctx, step, 2, "ends")
            axes = int_list(ctx, step, 3, "axes") if len(step.inputs) > 3 else list(range(len(starts or [])))
            steps = int_list(ctx, step, 4, "steps") if len(step.inputs) > 4 else None
            if sliced is not None or starts is None or ends is None or axes is None or len(axes) != 1 \
                    or (steps is not None and steps != [1]):
                return Support.no("not one constant Slice of one axis")
            q = axes_of[axes[0] % 5]
            taken = np.arange(mid[q])[starts[0]:ends[0]]
            if taken.size != 1:
                return Support.no("the Slice does not take one index")
            sliced = (q, int(taken[0]))
        squeeze_axes = int_list(ctx, node, 1, "axes")
        if sliced is None or squeeze_axes is None or [axes_of[a % 5] for a in squeeze_axes] != [sliced[0]]:
            return Support.no("the Squeeze does not remove the one index the Slice takes")
        return x, mid, [a for a in axes_of if a != sliced[0]], sliced[0], sliced[1]



def _take_one(b: Builder, x: ir.Value, dtype: ir.DataType | None, mid: Sequence[int], final: Sequence[int], q: int,
              index: int) -> ir.Value:
    """Index *index* of axis *q* of x reshaped to the rank-5 *mid*, its other axes in the order *final* (axes
    of *mid*): Reshape of x to rank 3 around axis q, Slice, Reshape to rank 4, Transpose (when not in order)."""
    outer, inner = int(np.prod(mid[:q], dtype=np.int64)), int(np.prod(mid[q + 1:], dtype=np.int64))

    def const(values: Sequence[int]) -> ir.Value:
        return b.const(np.array(values, np.int64), "ints")

    flat = b.reshape(x, (outer, mid[q], inner), dtype, hint="ints")
    taken = b.op("Slice", [flat, const([index]), const([index + 1]), const([1])], shape=(outer, 1, inner),
                 dtype=dtype)
    rest = [d for i, d in enumerate(mid) if i != q]
    four = b.reshape(taken, rest, dtype, hint="ints")
    order = [a - (a > q) for a in final]
    out = tuple(rest[p] for p in order)
    if order == sorted(order):
        return four
    return b.op("Transpose", [four], shape=out, dtype=dtype, perm=order)


def _merged_axes(shape: Sequence[int], perm: Sequence[int]) -> list[list[int]]:
    """Runs of axes of *shape* that stay next to each other, in order, after *perm*: each run can be one axis."""
    runs: list[list[int]] = []
    for axis in perm:
        if runs and runs[-1][-1] + 1 == axis:
            runs[-1].append(axis)
        else:
            runs.append([axis])
    return sorted(runs)


class Rank5TransposeMerge(Rewrite):
    """Reshape(Transpose(Reshape(x) to rank 5 or 6)) where axes the Transpose keeps together can be merged (a
    detection head's [N, A, K, H, W] -> [N, H, W, A, K] is [N, A*K, H, W] -> [N, H, W, A*K]; a Swin window
    partition [B, H/w, w, W/w, w, C] -> [B, H/w, W/w, w, w, C] is [B*H/w, w, W/w, w*C] -> [B*H/w, W/w, w, w*C])
    -> Reshape to the merged rank <= 4 shape, Transpose, Reshape (exact: the same elements moved)."""

    name = "rank5-transpose-merge"
    op_types = ("Reshape",)

    def _chain(self, node: ir.Node, ctx: RuleContext):
        transpose = node.inputs[0].producer() if node.inputs[0] is not None else None
        if transpose is None or transpose.op_type != "Transpose":
            return Support.no("not a Reshape of a Transpose")
        first = transpose.inputs[0].producer() if transpose.inputs[0] is not None else None
        mid = ctx.static_shape(transpose.inputs[0])
        out = ctx.static_shape(node.outputs[0])
        if mid is None or out is None or len(mid) not in (5, 6) or len(out) > 4:
            return Support.no("the Transpose is not of a static rank-5 or rank-6 tensor reshaped to rank <= 4")
        source = first.inputs[0] if first is not None and first.op_type == "Reshape" else transpose.inputs[0]
        if ctx.static_shape(source) is None or len(ctx.static_shape(source)) > 4:  # type: ignore[arg-type]
            return Support.no(f"the rank-{len(mid)} tensor does not come from a Reshape of a rank <= 4 tensor")
        perm = list(attr(transpose, "perm", range(len(mid) - 1, -1, -1)))
        runs = _merged_axes(mid, perm)
        if len(runs) > 4:
            return Support.no("no axes stay together through the Transpose" if len(mid) == 5 else
                              f"more than 4 runs of axes stay together through the Transpose ({len(runs)})")
        return source, mid, perm, runs, out

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        chain = self._chain(node, ctx)
        return chain if isinstance(chain, Support) else Support.yes()

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        source, mid, perm, runs, out = self._chain(node, ctx)
        dtype = ctx.dtype(source)

        def reshape(x: ir.Value, shape: Sequence[int]) -> ir.Value:
            return b.reshape(x, shape, dtype)

        merged = [int(np.prod([mid[a] for a in run], dtype=np.int64)) for run in runs]
        x = source if ctx.static_shape(source) == tuple(merged) else reshape(source, merged)
        position = {run[0]: i for i, run in enumerate(runs)}
        order = [position[a] for a in perm if a in position]
        moved = tuple(merged[i] for i in order)
        y = b.op("Transpose", [x], shape=moved, dtype=dtype, perm=order)
        return [y if moved == tuple(out) else reshape(y, out)]


def _reshape_source(ctx: RuleContext, reshape: ir.Node | None) -> ir.Value | None:
    """The rank <= 4 static input of *reshape* (a Reshape node), else None."""
    if reshape is None or reshape.op_type != "Reshape" or reshape.domain not in ("", "ai.onnx"):
        return None
    shape = ctx.static_shape(reshape.inputs[0])
    return reshape.inputs[0] if shape is not None and len(shape) <= 4 else None


class Rank5GatherSplit(_TakesOne):
    """Gather of one constant index on axis a of a rank-5 tensor made by a Reshape (and Transposes) of a rank
    <= 4 tensor (the attention's ``qkv[0]`` of a ``[B, T, 3, H, D]`` split, as the exporters and onnxruntime's
    transpose optimizer leave it) -> Reshape to rank 3 around the indexed axis, Slice, Reshape to rank 4,
    Transpose (exact: the same elements moved)."""

    name = "rank5-gather-split"
    op_types = ("Gather",)

    def _chain(self, node: ir.Node, ctx: RuleContext):
        transposes: list[ir.Node] = []
        value = node.inputs[0]
        producer = value.producer() if value is not None else None
        while producer is not None and producer.op_type == "Transpose" and len(transposes) < 4:
            transposes.append(producer)
            producer = producer.inputs[0].producer() if producer.inputs[0] is not None else None
        x = _reshape_source(ctx, producer)
        mid = ctx.static_shape(producer.outputs[0]) if x is not None and producer is not None else None
        if x is None or mid is None or len(mid) != 5:
            return Support.no("the data is not a Reshape (and Transposes) of a static rank <= 4 tensor to rank 5")
        indices = ctx.constant(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] is not None else None
        if indices is None or np.asarray(indices).ndim != 0:
            return Support.no("the indices are not one constant scalar")
        axes_of = list(range(5))  # the rank-5 tensor's axis at each position of the Gather's data
        for step in reversed(transposes):
            perm = list(attr(step, "perm", range(4, -1, -1)))
            axes_of = [axes_of[p] for p in perm]
        q = axes_of[int(attr(node, "axis", 0)) % 5]
        index = int(np.asarray(indices))
        if not -mid[q] <= index < mid[q]:
            return Support.no(f"index {index} is out of range for a dim of {mid[q]}")
        return x, tuple(mid), [a for a in axes_of if a != q], q, index % mid[q]



#: The elementwise ops :class:`Rank5BinaryMerge` moves to the rank <= 4 shape.
_ELEMENTWISE = ("Add", "Sub", "Mul", "Div")
#: The most elements of a constant it broadcasts to the full shape (4M: 16 MB of float32).
_MAX_BROADCAST = 1 << 22


class Rank5BinaryMerge(Rewrite):
    """Reshape(Add(Reshape(x) to rank 5 or 6, c)) with c a constant (Sub, Mul, Div alike; the shifted-window
    mask of Swin: ``attn.view(B, nW, heads, N, N) + mask``) -> Add(x, c') in x's shape, then a Reshape if the
    output's shape differs: c' is c broadcast to the rank-5 shape and laid out as x, with each axis along
    which it is constant kept at size 1 (exact: every element meets the same operand)."""

    name = "rank5-binary-merge"
    op_types = ("Reshape",)

    def _chain(self, node: ir.Node, ctx: RuleContext):
        op = node.inputs[0].producer() if node.inputs[0] is not None else None
        if op is None or op.op_type not in _ELEMENTWISE or op.domain not in ("", "ai.onnx") or len(op.inputs) != 2:
            return Support.no(f"not a Reshape of {', '.join(_ELEMENTWISE)}")
        mid, out = ctx.static_shape(op.outputs[0]), ctx.static_shape(node.outputs[0])
        if mid is None or out is None or len(mid) not in (5, 6) or len(out) > 4:
            return Support.no("not a static rank-5 or rank-6 result reshaped to rank <= 4")
        for side in (0, 1):
            first, other = op.inputs[side], op.inputs[1 - side]
            x = _reshape_source(ctx, first.producer() if first is not None else None)
            constant = ctx.constant(other) if other is not None else None
            if x is None or constant is None or ctx.static_shape(first) != mid:
                continue
            if ctx.dtype(x) != ctx.dtype(other) or ctx.dtype(x) is None:
                return Support.no("the operands' types differ")
            if int(np.prod(mid, dtype=np.int64)) > _MAX_BROADCAST:
                return Support.no(f"the constant would broadcast to {int(np.prod(mid))} elements")
            return op, side, x, np.asarray(constant), tuple(mid), tuple(out)
        return Support.no("no operand is a Reshape of a rank <= 4 tensor to the result's shape beside a constant")

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        chain = self._chain(node, ctx)
        return chain if isinstance(chain, Support) else Support.yes()

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        op, side, x, constant, mid, out = self._chain(node, ctx)
        shape = ctx.static_shape(x)
        dtype = ctx.dtype(x)
        full = np.broadcast_to(constant, mid).reshape(shape)
        for axis in range(full.ndim):  # keep an axis at size 1 where the constant does not vary along it
            first = np.take(full, [0], axis=axis)
            if full.shape[axis] > 1 and np.array_equal(full, np.broadcast_to(first, full.shape), equal_nan=True):
                full = first
        c = b.const(np.ascontiguousarray(full), "operand")
        y = b.op(op.op_type, [x, c] if side == 0 else [c, x], shape=shape, dtype=dtype)
        if tuple(shape) == out:  # type: ignore[arg-type]
            return [y]
        return [b.op("Reshape", [y, b.const(np.array(out, np.int64), "shape")], shape=out, dtype=dtype)]


#: Ops whose trailing inputs are optional (given as empty names by some exporters).
_OPTIONAL_TAILS = ("Pad", "Clip", "Resize", "Slice", "Conv", "ConvTranspose", "Gemm", "LayerNormalization",
                   "Split", "Squeeze", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "Dropout")


class EmptyInputDrop(Rewrite):
    """A node whose last inputs are given as empty names (``Pad(x, pads, "")`` as the TorchScript exporter
    writes ``F.pad``) -> the same node without them: ONNX defines an empty optional input as an absent one,
    but ORT's EPs count it (exact: the same op and inputs)."""

    name = "empty-input-drop"
    op_types = _OPTIONAL_TAILS

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        inputs = list(node.inputs)
        return Support.check(len(inputs) > 1 and inputs[-1] is None, "no input is given as an empty name at the end")

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        inputs = list(node.inputs)
        while inputs and inputs[-1] is None:
            inputs.pop()
        attributes = {name: a.value for name, a in node.attributes.items()}
        shapes = [tuple(ctx.shape(v)) if ctx.shape(v) is not None else None for v in node.outputs]  # type: ignore
        if len(node.outputs) == 1:
            return [b.op(node.op_type, inputs, shape=shapes[0], dtype=ctx.dtype(node.outputs[0]),
                         domain=node.domain, **attributes)]
        if any(s is None for s in shapes):
            raise ValueError("an output has no known rank")
        return b.ops(node.op_type, inputs, shapes=shapes, dtype=ctx.dtype(node.outputs[0]),  # type: ignore
                     domain=node.domain, **attributes)
