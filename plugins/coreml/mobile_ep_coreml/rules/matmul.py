"""MatMul (ORT ``gemm_op_builder.cc``, shared with Gemm)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support
from mobile_ep_coreml.mil import MILBuilder

from ._base import CoreMLRule, is_constant, is_mlprogram


class MatMul(CoreMLRule):
    op_types = ("MatMul",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """NeuralNetwork: A and B rank 2, B a constant initializer. ML Program: B may be dynamic; a 1-D
        input against an N-D one (N > 1) is rejected (Core ML bug, apple/coremltools#2263)."""
        node = unit.target
        a_rank, b_rank = ctx.rank(node.inputs[0]), ctx.rank(node.inputs[1])
        mlp = is_mlprogram(ctx)
        if not mlp and not is_constant(ctx, node.inputs[1]):
            return Support.no(
                "NeuralNetwork: B (input 1) is not a constant initializer (ML Program takes a dynamic B)"
            )
        if mlp:
            assert a_rank is not None and b_rank is not None  # every input's shape is checked in check_common
            if (a_rank == 1 and b_rank > 1) or (a_rank > 1 and b_rank == 1):
                return Support.no(
                    f"rank-{a_rank} A with rank-{b_rank} B; Core ML's matmul mishandles a 1-D input against "
                    "an N-D one (reshape it to 2-D)"
                )
        elif a_rank != 2 or b_rank != 2:
            return Support.no(
                f"NeuralNetwork: A rank {a_rank}, B rank {b_rank}; only 2-D x 2-D (use model_format=MLProgram)"
            )
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        a, c, y = node.inputs[0], node.inputs[1], node.outputs[0]
        if b.rank(a) == 1 and b.rank(c) == 1:  # a dot product (coremltools' matmul refuses 1-D x 1-D)
            product = b.mb.mul(x=b.var(a), y=b.var(c), name=b.tmp(f"{y.name}_mul"))
            b.set(y, b.mb.reduce_sum(x=product, axes=[0], keep_dims=False, name=b.name(y)))
            return
        b.set(y, b.mb.matmul(x=b.var(a), y=b.var(c), name=b.name(y)))
