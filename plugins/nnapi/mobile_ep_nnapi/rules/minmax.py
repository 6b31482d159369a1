"""Max and Min (ORT ``minmax_op_builder.cc``): MAXIMUM, MINIMUM."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support

from ._base import NnapiRule, extended, input_count
from .binary import BINARY_OPS


class MinMaxRule(NnapiRule):
    op_types = ("Max", "Min")
    min_feature_level = 3
    # opset 5 and below have the consumed_inputs attribute
    min_opset = 6

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Exactly 2 inputs."""
        count = input_count(unit)
        if count != 2 and not (extended(ctx) and count >= 1 and all(v is not None for v in unit.target.inputs)):
            return Support.no(f"has {count} inputs; exactly 2 are supported")
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """MAXIMUM/MINIMUM; with compile_ops=extended, N inputs as a chain (one input: a copy)."""
        code, _ = BINARY_OPS[unit.op_type]
        inputs = list(unit.target.inputs)
        out = unit.target.outputs[0]
        if len(inputs) == 1:
            b.alias(out, inputs[0])
            return
        perm = b.elementwise_layout(inputs, out)
        current = b.broadcast(inputs[0], perm).index
        shape = b.shape(out)
        for position, value in enumerate(inputs[1:], start=2):
            other = b.broadcast(value, perm).index
            if position == len(inputs):
                target = b.new(out, perm).index
            else:
                # the running result has the broadcast shape of the inputs so far
                partial = tuple(np.broadcast_shapes(*(b.shape(v) for v in inputs[:position])))
                if perm != tuple(range(len(perm))):  # NHWC: every operand was made 4-D
                    partial = (1,) * (len(shape) - len(partial)) + partial
                dims = b.dims(partial, perm if len(partial) == len(perm) else ())
                target = b.scratch(b.model.operands[current].type, dims)
            b.op(code, [current, other], [target])
            current = target
