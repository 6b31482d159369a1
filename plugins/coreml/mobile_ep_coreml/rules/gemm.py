"""Gemm (ORT ``gemm_op_builder.cc``, shared with MatMul)."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import CoreMLRule, is_constant


class Gemm(CoreMLRule):
    op_types = ("Gemm",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """B a constant initializer; transA=0, alpha=1, beta=1; C, if given, a constant initializer of
        shape [], [1], [N] or [1,N]."""
        node = unit.target
        b_shape = ctx.shape(node.inputs[1])
        assert b_shape is not None
        if not is_constant(ctx, node.inputs[1]):
            return Support.no("B (input 1) is not a constant initializer")
        trans_a, trans_b = attr(node, "transA", 0), attr(node, "transB", 0)
        alpha, beta = attr(node, "alpha", 1.0), attr(node, "beta", 1.0)
        if trans_a != 0 or alpha != 1.0 or beta != 1.0:
            return Support.no(
                f"transA={trans_a}, alpha={alpha:g}, beta={beta:g}; ORT takes only transA=0, alpha=1, beta=1"
            )
        if len(node.inputs) == 3:
            c = node.inputs[2]
            if not is_constant(ctx, c):
                return Support.no("C (input 2) is not a constant initializer")
            c_shape = ctx.shape(c)
            assert c_shape is not None
            n = b_shape[0] if trans_b else b_shape[-1]
            valid = (
                len(c_shape) == 0
                or (len(c_shape) == 1 and c_shape[0] in (1, n))
                or (len(c_shape) == 2 and c_shape[0] == 1 and c_shape[1] == n)
            )
            if not valid:
                return Support.no(f"C has shape {list(c_shape)}; ORT takes [], [1], [N] or [1,N] with N={n}")
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        """Core ML's linear: weight [N, K] (B transposed unless transB), bias [N]."""
        node = unit.target
        a, y = node.inputs[0], node.outputs[0]
        dtype = b.np_dtype(a)
        weight = b.const(node.inputs[1]).astype(dtype)
        if not attr(node, "transB", 0):
            weight = np.ascontiguousarray(weight.T)
        kwargs = {"x": b.var(a), "weight": weight, "name": b.name(y)}
        if len(node.inputs) == 3 and node.inputs[2] is not None:
            kwargs["bias"] = np.broadcast_to(b.const(node.inputs[2]).astype(dtype).reshape(-1),
                                             (weight.shape[0],)).copy()
        b.set(y, b.mb.linear(**kwargs))
