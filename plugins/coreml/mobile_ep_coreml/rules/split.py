"""Split (ORT ``split_op_builder.cc``)."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import CoreMLRule, constant_value, normalize_axis, present


class Split(CoreMLRule):
    op_types = ("Split",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """The split axis dim static. Given split sizes (input from opset 13, attribute before): a constant
        initializer of >= 2 sizes, all > 0, summing to the dim. Otherwise >= 2 outputs dividing the dim
        evenly; from opset 18 num_outputs (>= 2, the output count, <= the dim)."""
        node = unit.target
        shape = ctx.shape(node.inputs[0])
        assert shape is not None
        raw_axis = int(attr(node, "axis", 0))
        axis = normalize_axis(raw_axis, len(shape))
        if axis is None:
            return Support.no(f"axis {raw_axis} is out of range for rank {len(shape)}")
        dim = shape[axis]
        outputs = len(node.outputs)
        if present(node, 1):
            data = constant_value(ctx, node.inputs[1])
            if data is None:
                return Support.no("split (input 1) is not a constant initializer")
            sizes = [int(v) for v in np.asarray(data).reshape(-1)]
            return self._check_sizes(sizes, dim, "split")
        if attr(node, "split") is not None:
            return self._check_sizes([int(v) for v in attr(node, "split")], dim, "split attribute")
        if ctx.node_opset(node) >= 18:
            num_outputs = attr(node, "num_outputs")
            if num_outputs is None:
                return Support.no("neither split nor num_outputs is given")
            if num_outputs < 2:
                return Support.no(f"num_outputs={num_outputs}; Core ML's split needs >= 2 outputs")
            if num_outputs != outputs or dim is None or num_outputs > dim:
                return Support.no(
                    f"num_outputs={num_outputs} with {outputs} outputs and a split dim of "
                    f"{'dynamic size' if dim is None else dim}; needs num_outputs = outputs <= a static dim"
                )
            return SUPPORTED
        if outputs < 2:
            return Support.no(f"{outputs} output; Core ML's split needs >= 2")
        if dim is None:
            return Support.no("the split axis dim is dynamic; give split sizes or fix the shape")
        if dim % outputs != 0:
            return Support.no(f"dim {dim} does not divide evenly into {outputs} outputs")
        return SUPPORTED

    @staticmethod
    def _check_sizes(sizes: list[int], dim: int | None, what: str) -> Support:
        if len(sizes) < 2:
            return Support.no(f"{what} has {len(sizes)} size; Core ML's split needs >= 2 outputs")
        if dim is None:
            return Support.no("the split axis dim is dynamic")
        if sum(sizes) != dim:
            return Support.no(f"{what} sizes {sizes} sum to {sum(sizes)}, not the dim {dim}")
        if any(s <= 0 for s in sizes):
            return Support.no(f"{what} sizes {sizes} include a size <= 0")
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x = node.inputs[0]
        shape = b.shape(x)
        axis = normalize_axis(int(attr(node, "axis", 0)), len(shape))
        assert axis is not None
        dim = shape[axis]
        outputs = list(node.outputs)
        if present(node, 1):
            sizes = [int(v) for v in np.asarray(constant_value(ctx, node.inputs[1])).reshape(-1)]
        elif attr(node, "split") is not None:
            sizes = [int(v) for v in attr(node, "split")]
        else:  # equal parts; from opset 18 the last may be smaller
            assert dim is not None
            chunk = -(-dim // len(outputs))
            sizes = [min(chunk, dim - i * chunk) for i in range(len(outputs))]
        parts = b.mb.split(x=b.var(x), split_sizes=np.array(sizes, np.int32), axis=axis,
                           name=b.tmp(f"{outputs[0].name}_split"))
        for value, part in zip(outputs, parts, strict=True):
            b.set(value, part)
