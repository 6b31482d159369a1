"""The NaN guard exporters put after an attention softmax, as arithmetic mobile EPs take.

Part of the rewrite library :mod:`mobile_ep.passes.rewrites` (which exports this class).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from mobile_ep.contract import RuleContext, Support, attr
from mobile_ep.contract.rewrite import Builder, Rewrite

__all__ = ["SoftmaxNanGuard"]

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


class SoftmaxNanGuard(Rewrite):
    """Where(IsNaN(s), 0, s) after s = Softmax(scores + mask) on the last axis, the mask a Where(cond, 0, m) of a
    constant m (what transformers' scaled-dot-product attention exports) -> with m finite, s itself (the mask
    makes no NaN); with m = -inf, the rows every key is masked in (where Softmax gives NaN and the guard 0) are
    found from the mask: R = Min(ReduceMean(Exp(mask)) * 1e30, 1) is 1 where a key is kept and 0 where none is;
    Softmax(scores + Max(mask, Log(1 - R))) * R (Add, Softmax, Mul, Exp, ReduceMean, Min, Sub, Log, Max).
    Exact where the scores are finite: the guard's other NaNs, from infinite or NaN scores, stay NaN."""

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
            where = _producer(mask, "Where")
            if where is None or len(where.inputs) != 3 or _scalar_constant(ctx, where.inputs[1]) != 0.0:
                continue
            fill = _scalar_constant(ctx, where.inputs[2])
            if fill is None or np.isnan(fill) or fill == np.inf:
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
                    axes=[len(rows) - 1], keepdims=1)
        r = b.op("Min", [b.op("Mul", [kept, scalar(_BIG)], shape=rows, dtype=f), scalar(1.0)], shape=rows, dtype=f)
        floor = b.op("Log", [b.op("Sub", [scalar(1.0), r], shape=rows, dtype=f)], shape=rows, dtype=f)
        finite_mask = b.op("Max", [mask, floor], shape=mask_shape, dtype=f)
        z = b.op("Add", [scores, finite_mask], shape=shape, dtype=f)
        probs = b.op("Softmax", [z], shape=shape, dtype=f, axis=-1)
        return [b.op("Mul", [probs, r], shape=shape, dtype=f)]
