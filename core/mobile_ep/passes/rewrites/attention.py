"""Transformer inputs as mobile EPs take them: the bool mask an exporter builds from an int64 ``attention_mask``
input as float arithmetic, the NaN guard it puts after the softmax, and int64 token ids as int32 indices.

Part of the rewrite library :mod:`mobile_ep.passes.rewrites` (which exports this class).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from mobile_ep.contract import RuleContext, Support, attr
from mobile_ep.contract.rewrite import Builder, Rewrite

__all__ = ["SoftmaxNanGuard", "SoftmaxIsNaN", "BoolMaskToFloat", "BoolMoveViaFloat", "GatherInt32Indices"]

#: Where ReduceMean's fraction of unmasked keys (>= 1/N) is scaled to at least 1 before Min(., 1).
_BIG = np.float32(1e30)


def _scalar_constant(ctx: RuleContext, value: ir.Value | None) -> float | None:
    data = ctx.constant(value) if value is not None else None
    if data is None or np.asarray(data).size != 1:
        return None
    return float(np.asarray(data).reshape(-1)[0])


def _producer(value: ir.Value | None, op_type: str) -> ir.Node | None:
    node = value.producer() if value is not None else None
    return node if node is not None and node.op_type == op_type and node.domain in ("", "ai.onnx") else None


def _mask_fill(ctx: RuleContext, mask: ir.Value | None) -> float | None:
    """m where *mask* is 0 or m everywhere (m = -inf or finite): Where(cond, 0, m), or bool-mask-to-float's
    Log(indicator) (m = -inf), Mul(Sub(1, indicator), m), Sub(0, Mul(Sub(1, indicator), -m)) and
    Add(Mul(indicator, a), Mul(Sub(1, indicator), m)) of finite a (the mask is finite then)."""
    where = _producer(mask, "Where")
    if where is not None and len(where.inputs) == 3 and _scalar_constant(ctx, where.inputs[1]) == 0.0:
        fill = _scalar_constant(ctx, where.inputs[2])
        return None if fill is None or np.isnan(fill) or fill == np.inf else fill
    log = _producer(mask, "Log")
    if log is not None and _indicator(ctx, log.inputs[0]):
        return float("-inf")
    negated = _producer(mask, "Sub")
    if negated is not None and _scalar_constant(ctx, negated.inputs[0]) == 0.0:
        fill = _scaled_off(ctx, negated.inputs[1])
        return None if fill is None else -fill
    add = _producer(mask, "Add")
    if add is not None:
        on, off = _producer(add.inputs[0], "Mul"), _scaled_off(ctx, add.inputs[1])
        if on is not None and off is not None and _indicator(ctx, on.inputs[0]) and \
                np.isfinite(_scalar_constant(ctx, on.inputs[1]) or np.nan):
            return off
    return _scaled_off(ctx, mask)


def _scaled_off(ctx: RuleContext, value: ir.Value | None) -> float | None:
    """b where *value* is Mul(Sub(1, indicator), b) of a finite b."""
    mul = _producer(value, "Mul")
    if mul is None:
        return None
    sub, fill = _producer(mul.inputs[0], "Sub"), _scalar_constant(ctx, mul.inputs[1])
    if sub is not None and fill is not None and np.isfinite(fill) and _scalar_constant(ctx, sub.inputs[0]) == 1.0 \
            and _indicator(ctx, sub.inputs[1]):
        return fill
    return None


#: Ops that move an indicator's values without changing them (their input 0).
_MOVES = ("Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Expand", "Identity", "Gather", "GatherND")


def _indicator(ctx: RuleContext, value: ir.Value | None, depth: int = 0) -> bool:
    """Whether every element of *value* is 0 or 1 (float32), as bool-mask-to-float makes them."""
    if value is None or depth > 16 or ctx.dtype(value) != ir.DataType.FLOAT:
        return False
    data = ctx.constant(value)
    if data is not None:
        return bool(np.isin(np.asarray(data), (0.0, 1.0)).all())
    node = value.producer()
    if node is None or node.domain not in ("", "ai.onnx"):
        return False
    if node.op_type in _MOVES:
        return _indicator(ctx, node.inputs[0], depth + 1)
    if node.op_type == "Min" and _scalar_constant(ctx, node.inputs[1]) == 1.0 and _whole(ctx, node.inputs[0]):
        return True
    if node.op_type in ("Mul", "Max", "Min"):
        return all(_indicator(ctx, v, depth + 1) for v in node.inputs)
    if node.op_type == "Sub":
        return _scalar_constant(ctx, node.inputs[0]) == 1.0 and _indicator(ctx, node.inputs[1], depth + 1)
    return False


def _whole(ctx: RuleContext, value: ir.Value | None) -> bool:
    """Abs(Cast(x to float32)) of an integer x: 0 or at least 1."""
    absolute = _producer(value, "Abs")
    cast = _producer(absolute.inputs[0], "Cast") if absolute is not None else None
    return cast is not None and ctx.dtype(cast.inputs[0]) in _INTEGERS


#: Integer types whose nonzero values are at least 1 in magnitude.
_INTEGERS = (ir.DataType.INT64, ir.DataType.INT32, ir.DataType.INT16, ir.DataType.INT8, ir.DataType.UINT64,
             ir.DataType.UINT32, ir.DataType.UINT16, ir.DataType.UINT8)


class SoftmaxNanGuard(Rewrite):
    """Where(IsNaN(s), 0, s) after s = Softmax(scores + mask) on the last axis, the mask a Where(cond, 0, m) of a
    constant m (what transformers' scaled-dot-product attention exports) -> with m finite, s itself (the mask
    makes no NaN); with m = -inf, the rows every key is masked in (where Softmax gives NaN and the guard 0) are
    found from the mask: R = Min(ReduceMean(Exp(mask)) * 1e30, 1) is 1 where a key is kept and 0 where none is;
    Softmax(scores + Max(mask, Log(1 - R))) * R (Add, Softmax, Mul, Exp, ReduceMean, Min, Sub, Log, Max).
    Exact where the scores are finite: the guard's other NaNs, from infinite or NaN scores, stay NaN.  The mask
    may also be what ``bool-mask-to-float`` made of such a Where."""

    name = "softmax-nan-guard"
    op_types = ("Where",)

    def _chain(self, node: ir.Node, ctx: RuleContext):
        if len(node.inputs) != 3:
            return Support.no("not a Where of three inputs")
        cond, zero, s = node.inputs
        isnan = _producer(cond, "IsNaN")
        if isnan is None or isnan.inputs[0] is not s or _scalar_constant(ctx, zero) != 0.0:
            return Support.no("not Where(IsNaN(s), 0, s)")
        softmax = _producer(s, "Softmax")
        rank = ctx.rank(s)
        if softmax is None or rank is None or int(attr(softmax, "axis", -1)) % rank != rank - 1:
            return Support.no("s is not a Softmax on the last axis")
        add = _producer(softmax.inputs[0], "Add")
        if add is None or ctx.dtype(s) != ir.DataType.FLOAT:
            return Support.no("the Softmax is not of an Add of float32 scores and a mask")
        for side in (0, 1):
            mask = add.inputs[side]
            fill = _mask_fill(ctx, mask)
            if fill is None:
                continue
            mask_shape, scores = ctx.shape(mask), add.inputs[1 - side]
            if mask_shape is None or len(mask_shape) != rank or ctx.dtype(mask) != ir.DataType.FLOAT:
                return Support.no("the mask is not a float32 tensor of the scores' rank")
            return s, softmax, scores, mask, fill
        return Support.no("the Softmax's Add has no Where(cond, 0, constant) mask")

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        chain = self._chain(node, ctx)
        return chain if isinstance(chain, Support) else Support.yes()

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        s, softmax, scores, mask, fill = self._chain(node, ctx)
        if np.isfinite(fill):
            return [s]  # (a finite mask leaves finite scores finite: Softmax makes no NaN)
        f = ir.DataType.FLOAT
        mask_shape, shape = ctx.shape(mask), ctx.shape(s)
        rows = (*mask_shape[:-1], 1)  # type: ignore[index]

        def scalar(value) -> ir.Value:
            return b.const(np.array(value, np.float32), "scalar")

        kept = b.op("ReduceMean", [b.op("Exp", [mask], shape=mask_shape, dtype=f)], shape=rows, dtype=f,
                    axes=[-1], keepdims=1)
        r = b.op("Min", [b.op("Mul", [kept, scalar(_BIG)], shape=rows, dtype=f), scalar(1.0)], shape=rows, dtype=f)
        floor = b.op("Log", [b.op("Sub", [scalar(1.0), r], shape=rows, dtype=f)], shape=rows, dtype=f)
        finite_mask = b.op("Max", [mask, floor], shape=mask_shape, dtype=f)
        z = b.op("Add", [scores, finite_mask], shape=shape, dtype=f)
        probs = b.op("Softmax", [z], shape=shape, dtype=f, axis=-1)
        return [b.op("Mul", [probs, r], shape=shape, dtype=f)]


def _move(ctx: RuleContext, node: ir.Node, x: np.ndarray) -> np.ndarray:
    """What the move *node* makes of *x* (its constant inputs read from the graph)."""
    rest = [None if v is None else np.asarray(ctx.constant(v)) for v in node.inputs[1:]]
    op = node.op_type
    if op == "Reshape":
        shape = [int(d) for d in rest[0]]
        if not int(attr(node, "allowzero", 0)):
            shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
        return x.reshape(shape)
    if op == "Flatten":
        axis = int(attr(node, "axis", 1)) % (x.ndim + 1) if x.ndim else 0
        return x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)
    if op == "Transpose":
        return np.transpose(x, attr(node, "perm", None))
    if op in ("Squeeze", "Unsqueeze"):
        axes = rest[0] if rest and rest[0] is not None else attr(node, "axes", None)
        if op == "Squeeze":
            return np.squeeze(x, axis=None if axes is None else tuple(int(a) for a in np.asarray(axes).reshape(-1)))
        return np.expand_dims(x, tuple(int(a) for a in np.asarray(axes).reshape(-1)))
    if op == "Expand":
        shape = np.broadcast_shapes(x.shape, tuple(int(d) for d in rest[0]))
        return np.broadcast_to(x, shape)
    if op == "Gather":
        axis = int(attr(node, "axis", 0)) % x.ndim
        indices = rest[0].astype(np.int64)
        return np.take(x, np.where(indices < 0, indices + x.shape[axis], indices), axis=axis)
    if op == "GatherND":
        indices = rest[0].astype(np.int64)
        dims = np.array(x.shape[:indices.shape[-1]], np.int64)
        indices = np.where(indices < 0, indices + dims, indices)
        return x[tuple(np.moveaxis(indices, -1, 0))]
    return x  # Identity


#: Logical ops on bools and their float forms on 0/1 values.
_LOGICAL = {"And": "Mul", "Or": "Max"}


class BoolMaskToFloat(Rewrite):
    """Where(cond, a, b) of scalar constants a and b, cond a bool mask computed from an integer input (Cast to
    bool, then Flatten, Reshape, Transpose, (Un)Squeeze, Expand, Gather and GatherND of constant indices, And,
    Or, Not and bool constants: transformers' attention masks) -> the same on 0/1 float32 values: Cast to
    float32, Abs, Min(., 1) for the Cast to bool; each chain of moves as one Gather of constant positions from
    the flattened source; Mul for And, Max for Or, Sub(1, .) for Not; then Log for (a, b) = (0, -inf),
    Log(1 - c) for (-inf, 0), else c·a + (1 - c)·b ((1 - c)·b when a = 0, as 0 - (1 - c)·|b| for b < 0).
    Exact: every 0/1 value is the bool's, log(1) = 0, log(0) = -inf, a product by 0 or 1 is exact, and zeros
    keep Where's sign.  The Cast of the input stays on the CPU,
    before every partition."""

    name = "bool-mask-to-float"
    op_types = ("Where",)
    cpu_at_inputs = True

    def _cone(self, ctx: RuleContext, value: ir.Value | None, depth: int = 0) -> bool:
        if value is None or ctx.dtype(value) != ir.DataType.BOOL or depth > 16:
            return False
        if ctx.constant(value) is not None:
            return True
        node = value.producer()
        if node is None or node.domain not in ("", "ai.onnx"):
            return False
        if node.op_type == "Cast":
            return int(attr(node, "to", 0)) == ir.DataType.BOOL.value and ctx.dtype(node.inputs[0]) in _INTEGERS
        if node.op_type in _MOVES:
            if node.op_type == "GatherND" and int(attr(node, "batch_dims", 0)) != 0:
                return False
            if ctx.static_shape(node.inputs[0]) is None or ctx.static_shape(value) is None or any(
                    v is not None and ctx.constant(v) is None for v in node.inputs[1:]):
                return False
            return self._cone(ctx, node.inputs[0], depth + 1)
        if node.op_type in (*_LOGICAL, "Not"):
            return all(self._cone(ctx, v, depth + 1) for v in node.inputs)
        return False

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        if len(node.inputs) != 3:
            return Support.no("not a Where of three inputs")
        a, b = _scalar_constant(ctx, node.inputs[1]), _scalar_constant(ctx, node.inputs[2])
        if a is None or b is None or ctx.dtype(node.outputs[0]) != ir.DataType.FLOAT:
            return Support.no("X and Y are not float32 scalar constants")
        if not ({a, b} == {0.0, float("-inf")} or (np.isfinite(a) and np.isfinite(b))):
            return Support.no(f"X = {a}, Y = {b}: neither finite nor 0 and -inf")
        if ctx.shape(node.inputs[0]) is None or ctx.shape(node.outputs[0]) != ctx.shape(node.inputs[0]):
            return Support.no("the output is not the condition's shape")
        return Support.check(self._cone(ctx, node.inputs[0]),
                             "the condition is not a bool mask made from an integer input (Cast to bool, moves, "
                             "And, Or, Not)")

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        f = ir.DataType.FLOAT
        made: dict[ir.Value, ir.Value] = {}

        def scalar(value) -> ir.Value:
            return b.const(np.array(value, np.float32), "scalar")

        def to_float(value: ir.Value) -> ir.Value:
            if value in made:
                return made[value]
            shape = ctx.shape(value)
            data = ctx.constant(value)
            if data is not None:
                result = b.const(np.asarray(data).astype(np.float32), "indicator")
            else:
                src = value.producer()
                assert src is not None
                if src.op_type == "Cast":
                    cast = b.op("Cast", [src.inputs[0]], shape=shape, dtype=f, to=f.value)
                    result = b.op("Min", [b.op("Abs", [cast], shape=shape, dtype=f), scalar(1.0)], shape=shape,
                                  dtype=f)
                elif src.op_type in _MOVES:  # a chain of moves is one Gather of the flattened source
                    chain, source = [], value
                    while source.producer() is not None and source.producer().op_type in _MOVES \
                            and ctx.constant(source) is None:
                        chain.append(source.producer())
                        source = source.producer().inputs[0]
                    positions = np.arange(int(np.prod(ctx.static_shape(source), dtype=np.int64)), dtype=np.int64)
                    positions = positions.reshape(ctx.static_shape(source))
                    for step in reversed(chain):
                        positions = _move(ctx, step, positions)
                    flat = b.op("Reshape", [to_float(source), b.const(np.array([-1], np.int64), "shape")],
                                shape=(positions.size,), dtype=f)
                    result = b.op("Gather", [flat, b.const(positions, "positions")], shape=positions.shape, dtype=f,
                                  axis=0)
                elif src.op_type == "Not":
                    result = b.op("Sub", [scalar(1.0), to_float(src.inputs[0])], shape=shape, dtype=f)
                else:
                    result = b.op(_LOGICAL[src.op_type], [to_float(v) for v in src.inputs], shape=shape, dtype=f)
            made[value] = result
            return result

        c = to_float(node.inputs[0])
        a, y = _scalar_constant(ctx, node.inputs[1]), _scalar_constant(ctx, node.inputs[2])
        shape = ctx.shape(node.outputs[0])
        if (a, y) == (0.0, float("-inf")):
            return [b.op("Log", [c], shape=shape, dtype=f)]
        off = b.op("Sub", [scalar(1.0), c], shape=shape, dtype=f)
        if (a, y) == (float("-inf"), 0.0):
            return [b.op("Log", [off], shape=shape, dtype=f)]
        if a == 0.0 and y >= 0:
            return [b.op("Mul", [off, scalar(y)], shape=shape, dtype=f)]
        if a == 0.0:  # (0 - (1 - c)·|b|: +0 where c is 1, as Where gives, not the -0 of 0·b)
            return [b.op("Sub", [scalar(0.0), b.op("Mul", [off, scalar(-y)], shape=shape, dtype=f)], shape=shape,
                         dtype=f)]
        return [b.op("Add", [b.op("Mul", [c, scalar(a)], shape=shape, dtype=f),
                             b.op("Mul", [off, scalar(y)], shape=shape, dtype=f)], shape=shape, dtype=f)]


class GatherInt32Indices(Rewrite):
    """Gather(data, indices) with int64 indices that are a graph input (``input_ids`` into an embedding table)
    -> Gather(data, Cast(indices to int32)): the table lookup runs in the partition, the Cast on the CPU before
    it.  Exact for every index valid for the data (|index| < its dim < 2^31); onnxruntime refuses the others."""

    name = "gather-int32-indices"
    op_types = ("Gather",)
    cpu_at_inputs = True

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        indices = node.inputs[1] if len(node.inputs) > 1 else None
        if indices is None or ctx.dtype(indices) != ir.DataType.INT64 or not indices.is_graph_input():
            return Support.no("the indices are not an int64 graph input")
        shape = ctx.shape(node.inputs[0])
        if shape is None:
            return Support.no("the data has no known rank")
        dim = shape[int(attr(node, "axis", 0)) % len(shape)] if shape else None
        if not isinstance(dim, int) or dim >= 2**31:
            return Support.no("the gathered dim is not static below 2^31")
        return Support.yes()

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        i32 = ir.DataType.INT32
        indices = b.op("Cast", [node.inputs[1]], shape=ctx.shape(node.inputs[1]), dtype=i32, to=i32.value)
        return [b.op("Gather", [node.inputs[0], indices], shape=ctx.shape(node.outputs[0]),
                     dtype=ctx.dtype(node.outputs[0]), axis=int(attr(node, "axis", 0)))]


class SoftmaxIsNaN(SoftmaxNanGuard):
    """The IsNaN of that guard, for a backend that takes its Where but not IsNaN (Core ML): IsNaN(s) is known
    from the mask -> with m finite, all false (a constant); with m = -inf, true on the rows every key is masked
    in: Cast(Add(1 - K, 0 in s's shape) to bool), K = 1 where a key is kept (ReduceMean(Exp(mask)) cast to bool
    and back).  The Where keeps the Softmax's own NaN rows out.  Exact where the scores are finite."""

    name = "softmax-isnan-from-mask"
    op_types = ("IsNaN",)

    def _chain(self, node: ir.Node, ctx: RuleContext):
        guards = [user for user, _ in node.outputs[0].uses() if user.op_type == "Where"]
        if len(guards) != len(node.outputs[0].uses()) or not guards:
            return Support.no("the IsNaN does not only feed Where(IsNaN(s), 0, s)")
        for guard in guards:
            chain = super()._chain(guard, ctx)
            if isinstance(chain, Support):
                return chain
        return chain

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        s, softmax, scores, mask, fill = self._chain(node, ctx)
        shape = ctx.static_shape(s)
        if shape is None:
            raise ValueError("s has no static shape")
        if np.isfinite(fill):
            return [b.const(np.zeros(shape, bool), "never")]
        f = ir.DataType.FLOAT
        mask_shape = ctx.shape(mask)
        rows = (*mask_shape[:-1], 1)  # type: ignore[index]

        def scalar(value) -> ir.Value:
            return b.const(np.array(value, np.float32), "scalar")

        bool_ = ir.DataType.BOOL
        kept = b.op("ReduceMean", [b.op("Exp", [mask], shape=mask_shape, dtype=f)], shape=rows, dtype=f,
                    axes=[-1], keepdims=1)
        any_kept = b.op("Cast", [b.op("Cast", [kept], shape=rows, dtype=bool_, to=bool_.value)], shape=rows,
                        dtype=f, to=f.value)
        masked = b.op("Add", [b.op("Sub", [scalar(1.0), any_kept], shape=rows, dtype=f),
                              b.const(np.zeros(shape, np.float32), "zeros")], shape=shape, dtype=f)
        return [b.op("Cast", [masked], shape=shape, dtype=bool_, to=bool_.value)]


class BoolMoveViaFloat(Rewrite):
    """A move of bool data (Flatten, Reshape, Transpose, (Un)Squeeze, Gather: an attention mask's) -> Cast to
    float32, the move (a Flatten as the Reshape to its static output shape), Cast back to bool (exact: 0 and 1
    move as the bools do), for a backend that takes the Casts and float moves but no bool data (Core ML)."""

    name = "bool-move-via-float"
    op_types = ("Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Gather")

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        if ctx.dtype(node.inputs[0]) != ir.DataType.BOOL:
            return Support.no("input 0 is not bool")
        if node.op_type == "Flatten" and ctx.static_shape(node.outputs[0]) is None:
            return Support.no("the output shape is not static")
        return Support.check(ctx.shape(node.outputs[0]) is not None, "the output has no known rank")

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        f, bool_ = ir.DataType.FLOAT, ir.DataType.BOOL
        shape = ctx.shape(node.outputs[0])
        x = b.op("Cast", [node.inputs[0]], shape=ctx.shape(node.inputs[0]), dtype=f, to=f.value)
        if node.op_type == "Flatten":
            y = b.reshape(x, shape, f)
        else:
            attributes = {k: a.value for k, a in node.attributes.items()}
            y = b.op(node.op_type, [x, *node.inputs[1:]], shape=shape, dtype=f, **attributes)
        return [b.op("Cast", [y], shape=shape, dtype=bool_, to=bool_.value)]
