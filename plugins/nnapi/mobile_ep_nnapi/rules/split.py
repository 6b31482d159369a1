"""Split (ORT ``split_op_builder.cc``): SPLIT."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule, input_value


class SplitRule(NnapiRule):
    op_types = ("Split",)
    min_feature_level = 3
    # Split before 13 takes `split` as an attribute
    min_opset = 13

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """`split`, when given, a constant initializer of equal parts summing to the axis dim; otherwise the axis
        dim divisible by the number of outputs (opset 18+: num_outputs required, equal to the outputs and ≤ the
        axis dim)."""
        shape = ctx.static_shape(input_value(unit, 0))
        if not shape:
            return Support.no("input 0 is a scalar")
        axis = attr(unit.target, "axis", 0)
        if not -len(shape) <= axis < len(shape):
            return Support.no(f"axis {axis} is out of range for rank {len(shape)}")
        dim = shape[axis]
        split_value = input_value(unit, 1)
        if split_value is not None:
            split = ctx.constant(split_value)
            if split is None:
                return Support.no("split (input 1) is not a constant initializer")
            parts = [int(v) for v in np.asarray(split).reshape(-1)]
            if sum(parts) != dim:
                return Support.no(f"split {parts} sums to {sum(parts)}, not the axis dim {dim}")
            if len(set(parts)) > 1:
                return Support.no(f"split {parts} has unequal parts; NNAPI splits into equal parts only")
            return SUPPORTED
        outputs = len(unit.target.outputs)
        if ctx.node_opset(unit.target) >= 18:
            count = attr(unit.target, "num_outputs")
            if count is None:
                return Support.no("num_outputs is required without a split input (opset 18+)")
            if count != outputs or count > dim:
                return Support.no(f"num_outputs {count} must equal the {outputs} outputs and be ≤ the axis dim {dim}")
            outputs = count
        if outputs == 0 or dim % outputs != 0:
            return Support.no(f"the axis dim {dim} is not divisible into {outputs} equal parts")
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """SPLIT into equal parts along the axis of the input's layout (nothing to do for empty parts)."""
        node = unit.target
        x_value = node.inputs[0]
        outs = list(node.outputs)
        if x_value in b.empty or 0 in b.shape(x_value) or all(0 in b.shape(o) for o in outs):
            b.empty.update(outs)
            return
        axis = int(attr(node, "axis", 0)) % b.rank(x_value)
        x = b.get(x_value, b.preferred(x_value))
        ys = [b.new(o, x.perm).index for o in outs]
        b.op(OperationCode.SPLIT, [x.index, b.i32(x.perm.index(axis)), b.i32(len(ys))], ys)
