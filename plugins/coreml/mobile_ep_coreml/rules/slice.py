"""Slice (ORT ``slice_op_builder.cc``)."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support
from mobile_ep_coreml.mil import MILBuilder

from ._base import (
    FLOAT,
    FLOAT16,
    INT64,
    CoreMLRule,
    constant_value,
    coreml_version,
    is_mlprogram,
    present,
    shape_text,
    type_name,
)


def normalized_slices(shape: tuple[int, ...], starts: list[int], ends: list[int], axes: list[int] | None,
                      steps: list[int] | None) -> list[tuple[int, int, int]] | str:
    """(start, end, step) per dim after ONNX's clamping, or why the arguments are invalid."""
    rank = len(shape)
    if axes is None:
        axes = list(range(len(starts)))
    if steps is None:
        steps = [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        return "starts, ends, axes and steps differ in length"
    result = [(0, d, 1) for d in shape]
    seen: set[int] = set()
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        if not -rank <= axis < rank:
            return f"axis {axis} is out of range"
        axis = axis + rank if axis < 0 else axis
        if axis in seen:
            return f"axis {axis} is repeated"
        seen.add(axis)
        if step == 0:
            return "a step is 0"
        dim = shape[axis]
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        result[axis] = (start, end, step)
    return result


class Slice(CoreMLRule):
    op_types = ("Slice",)
    min_opset = 10  # before Slice-10, starts/ends/axes were attributes

    def check_types(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """data float32 or int64 (float16: ML Program on Core ML 6 / iOS 16 or later)."""
        dtype = ctx.dtype(unit.target.inputs[0])
        if dtype in (FLOAT, INT64):
            return SUPPORTED
        if dtype == FLOAT16 and is_mlprogram(ctx):
            if coreml_version(ctx) >= 6:
                return SUPPORTED
            return Support.no("float16 data needs Core ML 6 (deployment_target=iOS16 or later)")
        extra = " (ML Program also takes float16)" if dtype == FLOAT16 else ""
        return Support.no(f"data is {type_name(dtype)}; Core ML's slice takes float32 or int64{extra}")

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """A static data shape; starts, ends, axes and steps constant initializers; no dim sliced to an
        empty range."""
        node = unit.target
        shape = ctx.static_shape(node.inputs[0])
        if shape is None:
            return Support.no(
                f"data shape {shape_text(ctx, node.inputs[0])} is not static (fix it with --shape or --dim)"
            )
        args: dict[str, list[int] | None] = {}
        for index, name in ((1, "starts"), (2, "ends"), (3, "axes"), (4, "steps")):
            if index >= 3 and not present(node, index):
                args[name] = None
                continue
            data = constant_value(ctx, node.inputs[index]) if present(node, index) else None
            if data is None:
                return Support.no(f"{name} (input {index}) is not a constant initializer")
            args[name] = [int(v) for v in np.asarray(data).reshape(-1)]
        slices = normalized_slices(shape, args["starts"] or [], args["ends"] or [], args["axes"], args["steps"])
        if isinstance(slices, str):
            return Support.no(slices)
        for axis, (start, end, step) in enumerate(slices):
            if (step > 0 and start >= end) or (step < 0 and start <= end):
                return Support.no(f"axis {axis} is sliced to an empty range; Core ML has no empty tensors")
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        """Core ML's slice_by_index on ONNX's clamped bounds (a reverse slice through index 0 masks its
        end)."""
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        shape = b.static_shape(x)
        args = [None if not present(node, i) else [int(v) for v in np.asarray(constant_value(ctx, node.inputs[i]))
                                                    .reshape(-1)] for i in (1, 2, 3, 4)]
        slices = normalized_slices(shape, args[0] or [], args[1] or [], args[2], args[3])
        assert not isinstance(slices, str)
        begin = [s for s, _, _ in slices]
        end = [0 if e < 0 else e for _, e, _ in slices]
        end_mask = [e < 0 for _, e, _ in slices]
        b.set(y, b.mb.slice_by_index(x=b.var(x), begin=np.array(begin, np.int32), end=np.array(end, np.int32),
                                     stride=np.array([st for _, _, st in slices], np.int32), end_mask=end_mask,
                                     name=b.name(y)))
