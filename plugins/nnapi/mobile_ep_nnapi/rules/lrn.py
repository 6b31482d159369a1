"""LRN (ORT ``LRN_op_builder.cc``): LOCAL_RESPONSE_NORMALIZATION."""

from __future__ import annotations

from mobile_ep import NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule, rank_between


class LRNRule(NnapiRule):
    op_types = ("LRN",)
    min_feature_level = 2

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """4-D input."""
        return rank_between(ctx, unit, 4, 4)

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """LOCAL_RESPONSE_NORMALIZATION over channels (NHWC: the last axis) with radius (size-1)/2 and
        alpha/size; an even size has an asymmetric window NNAPI cannot express."""
        node = unit.target
        size = int(attr(node, "size"))
        if size % 2 == 0:
            raise b.fail(f"size {size} is even: ONNX's window is asymmetric, NNAPI's radius is symmetric")
        layout = "onnx" if b.use_nchw else "nhwc"
        x = b.get(node.inputs[0], layout)
        y = b.new(node.outputs[0], layout)
        axis = []
        if b.use_nchw:
            b.require(3, "LRN over axis 1 (NCHW layout)")
            axis = [b.i32(1)]
        b.op(OperationCode.LOCAL_RESPONSE_NORMALIZATION,
             [x.index, b.i32((size - 1) // 2), b.f32(attr(node, "bias", 1.0)), b.f32(attr(node, "alpha", 1e-4) / size),
              b.f32(attr(node, "beta", 0.75)), *axis], [y.index])
