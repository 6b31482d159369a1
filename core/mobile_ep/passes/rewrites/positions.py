"""Position ids computed from the token ids, as mobile EPs take them.

RoBERTa-style embeddings (transformers' ``create_position_ids_from_input_ids``, exported by ``torch.onnx``)
number the tokens that are not padding: ``mask = input_ids.ne(pad).int()``,
``positions = cumsum(mask, 1) · mask + pad`` -- ``Equal``, ``Not``, ``Cast``, ``CumSum``, ``Mul``, ``Cast`` to
int64, ``Add`` -- then gather the position embeddings with them, and gather the (constant) buffered token
type ids with them too.  Integer ops, bools and CumSum are what NNAPI and ORT's CoreML EP lack, so the whole
chain stays on the CPU.  These rewrites compute it in float32 and gather with int32 indices.

Part of the rewrite library :mod:`mobile_ep.passes.rewrites` (which exports these classes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from mobile_ep.contract import RuleContext, Support, attr
from mobile_ep.contract.rewrite import Builder, Rewrite

__all__ = ["PositionIdsViaFloat", "RunningCountViaFloat", "GatherElementsOfUniformConstant"]

#: Integers below this magnitude are float32 values exactly.
_EXACT = 2**24
_INTS = (ir.DataType.INT64, ir.DataType.INT32)


def _producer(value: ir.Value | None, op_type: str) -> ir.Node | None:
    node = value.producer() if value is not None else None
    return node if node is not None and node.op_type == op_type and node.domain in ("", "ai.onnx") else None


def _int_scalar(ctx: RuleContext, value: ir.Value | None) -> int | None:
    data = ctx.constant(value) if value is not None else None
    if data is None or np.asarray(data).size != 1 or np.asarray(data).dtype.kind not in "iu":
        return None
    return int(np.asarray(data).reshape(-1)[0])


@dataclasses.dataclass(frozen=True)
class _Positions:
    ids: ir.Value  # the integer graph input
    pad: int  # Equal's constant: the tokens equal to it are padding
    offset: int  # Add's constant
    length: int  # the dim CumSum runs along (the last)


def _cast_to(node: ir.Node | None, dtypes) -> ir.Value | None:
    """The input of *node*, a Cast to one of *dtypes*; None otherwise."""
    if node is None or int(attr(node, "to", 0)) not in {d.value for d in dtypes}:
        return None
    return node.inputs[0]


def counts_of(ctx: RuleContext, value: ir.Value | None) -> _Positions | None:
    """*value* as ``Mul(CumSum(c, last axis), c)`` with ``c = Cast(Not(Equal(ids, pad)))`` to an integer type,
    ``ids`` an int32/int64 graph input of static shape, pad an integer scalar below 2^24 and the dim CumSum adds
    along below 2^24 (the running count of the tokens that are not padding, 0 on padding); None if not."""
    mul = _producer(value, "Mul")
    if mul is None or len(mul.inputs) != 2 or ctx.dtype(value) not in _INTS:
        return None
    first, second = mul.inputs
    cumsum = _producer(first, "CumSum") or _producer(second, "CumSum")
    if cumsum is None:
        return None
    mask = second if cumsum is first.producer() else first
    if cumsum.inputs[0] is not mask or int(attr(cumsum, "exclusive", 0)) or int(attr(cumsum, "reverse", 0)):
        return None
    indicator = _cast_to(_producer(mask, "Cast"), _INTS)
    negation = _producer(indicator, "Not")
    equal = _producer(negation.inputs[0] if negation is not None else None, "Equal")
    if equal is None or len(equal.inputs) != 2:
        return None
    ids, pad = equal.inputs[0], _int_scalar(ctx, equal.inputs[1])
    if pad is None:
        ids, pad = equal.inputs[1], _int_scalar(ctx, equal.inputs[0])
    if ids is None or pad is None or abs(pad) >= _EXACT or not ids.is_graph_input() or ctx.dtype(ids) not in _INTS:
        return None
    shape = ctx.static_shape(ids)
    axis = _int_scalar(ctx, cumsum.inputs[1] if len(cumsum.inputs) > 1 else None)
    if not shape or axis is None or axis % len(shape) != len(shape) - 1 or ctx.static_shape(value) != shape:
        return None
    if shape[-1] >= _EXACT:
        return None
    return _Positions(ids, pad, 0, shape[-1])


def positions_of(ctx: RuleContext, value: ir.Value | None) -> _Positions | None:
    """*value* as ``Add(counts, k)`` (or through a Cast between integer types first), the counts as
    :func:`counts_of` finds them, k an integer scalar with |k| + the sequence length below 2^24; None if not."""
    add = _producer(value, "Add")
    if add is None or len(add.inputs) != 2 or ctx.dtype(value) not in _INTS:
        return None
    offset, counts = _int_scalar(ctx, add.inputs[1]), add.inputs[0]
    if offset is None:
        offset, counts = _int_scalar(ctx, add.inputs[0]), add.inputs[1]
    cast = _producer(counts, "Cast")
    found = counts_of(ctx, _cast_to(cast, _INTS) if cast is not None else counts)
    if offset is None or found is None or abs(offset) + found.length >= _EXACT:
        return None
    return dataclasses.replace(found, offset=offset)


def _positions(ctx: RuleContext, b: Builder, p: _Positions, dtype: ir.DataType) -> ir.Value:
    """The positions as *dtype*: in float32, ``m = 1 - Relu(1 - (ids - pad)²)`` (1 for a token, 0 for padding),
    ``MatMul(m, U)`` with U the upper triangle of ones (the running count), ``· m + offset``, then a Cast."""
    f = ir.DataType.FLOAT
    shape = ctx.static_shape(p.ids)
    ids = b.op("Cast", [p.ids], shape=shape, dtype=f, to=f.value)
    distance = b.op("Sub", [ids, b.const(np.float32(p.pad), "pad")], shape=shape, dtype=f)
    square = b.op("Mul", [distance, distance], shape=shape, dtype=f)
    one = b.const(np.float32(1.0), "one")
    below = b.op("Relu", [b.op("Sub", [one, square], shape=shape, dtype=f)], shape=shape, dtype=f)
    mask = b.op("Sub", [one, below], shape=shape, dtype=f)
    upper = np.triu(np.ones((p.length, p.length), np.float32))
    count = b.op("MatMul", [mask, b.const(upper, "running_count")], shape=shape, dtype=f)
    positions = b.op("Add", [b.op("Mul", [count, mask], shape=shape, dtype=f),
                             b.const(np.float32(p.offset), "offset")], shape=shape, dtype=f)
    return b.op("Cast", [positions], shape=shape, dtype=dtype, to=dtype.value)


_EXACTNESS = """Exact for every int32/int64 id: Cast(id) equals pad (below 2^24) only for id = pad, and
    otherwise is an integer at least 1 away, whose square (below 2^63·2^63 < float32's largest) is at least 1,
    so 1 - Relu(1 - square) is exactly 1 (a token) or 0 (padding);
    the counts, products and sums are integers below 2^24 (the sequence length plus the offset), which float32
    holds exactly whatever the order of the additions.  The Cast of the ids stays on the CPU, before every
    partition."""


class PositionIdsViaFloat(Rewrite):
    """Gather(table, positions) of positions computed from an integer token-ids input as RoBERTa numbers the
    tokens that are not padding (``Equal``, ``Not``, ``Cast``, ``CumSum`` along the last axis, ``Mul``,
    ``Cast``, ``Add`` of a constant) -> Gather(table, int32 positions computed in float32):
    1 - Relu(1 - (Cast(ids) - pad)²) is the token indicator, MatMul by the upper triangle of ones its running count,
    then · indicator + offset and a Cast to int32 (for a backend without int64, NNAPI)."""

    __doc__ = f"{__doc__}  {_EXACTNESS}"
    name = "position-ids-via-float"
    op_types = ("Gather",)
    cpu_at_inputs = True

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        if len(node.inputs) != 2:
            return Support.no("not a Gather of two inputs")
        return Support.check(positions_of(ctx, node.inputs[1]) is not None,
                             "the indices are not positions numbered from a token-ids input")

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        p = positions_of(ctx, node.inputs[1])
        assert p is not None
        return [b.op("Gather", [node.inputs[0], _positions(ctx, b, p, ir.DataType.INT32)],
                     shape=ctx.shape(node.outputs[0]), dtype=ctx.dtype(node.outputs[0]),
                     axis=int(attr(node, "axis", 0)))]


class RunningCountViaFloat(Rewrite):
    """Mul(CumSum(c), c) with ``c = Cast(Not(Equal(ids, pad)))`` of an integer token-ids input (RoBERTa's count
    of the tokens that are not padding, 0 on padding) -> the same computed in float32 and Cast to the Mul's
    type: 1 - Relu(1 - (Cast(ids) - pad)²), MatMul by the upper triangle of ones, · the indicator (for a backend
    that takes the integer Cast and Add after it and Gathers with their int64 result: ML Program)."""

    __doc__ = f"{__doc__}  {_EXACTNESS}"
    name = "running-count-via-float"
    op_types = ("Mul",)
    cpu_at_inputs = True

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        return Support.check(counts_of(ctx, node.outputs[0]) is not None,
                             "not a running count of the tokens of a token-ids input")

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        p = counts_of(ctx, node.outputs[0])
        assert p is not None
        return [_positions(ctx, b, p, ctx.dtype(node.outputs[0]))]


class GatherElementsOfUniformConstant(Rewrite):
    """GatherElements(data, indices) of a constant *data* whose elements are all one value v -> the constant v
    in the shape of the indices (transformers' buffered token type ids, zeros, gathered at the position ids).
    Exact wherever onnxruntime runs the node: every valid index picks v (onnxruntime refuses an index out of
    range, which the constant no longer checks)."""

    name = "gather-elements-of-uniform-constant"
    op_types = ("GatherElements",)

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        data = ctx.constant(node.inputs[0]) if node.inputs and node.inputs[0] is not None else None
        if data is None or np.asarray(data).size == 0:
            return Support.no("the data is not a constant")
        flat = np.asarray(data).reshape(-1)
        if not np.all(flat == flat[0]) or (flat.dtype.kind == "f" and np.isnan(flat[0])):
            return Support.no("the data's elements are not all equal")
        return Support.check(len(node.inputs) == 2 and ctx.static_shape(node.outputs[0]) is not None,
                             "the output shape is not static")

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        data = np.asarray(ctx.constant(node.inputs[0]))
        shape = ctx.static_shape(node.outputs[0])
        return [b.const(np.full(shape, data.reshape(-1)[0], data.dtype), "uniform")]
