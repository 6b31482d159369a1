"""Gather (ORT ``gather_op_builder.cc``)."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, CompileError, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import (
    FLOAT,
    FLOAT16,
    INT32,
    INT64,
    CoreMLRule,
    check_type,
    coreml_version,
    is_mlprogram,
    normalize_axis,
    type_name,
)


class Gather(CoreMLRule):
    op_types = ("Gather",)

    def check_types(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """data float32 or int64 (float16: ML Program on Core ML 6 / iOS 16 or later)."""
        dtype = ctx.dtype(unit.target.inputs[0])
        if dtype in (FLOAT, INT64):
            return SUPPORTED
        if dtype == FLOAT16:
            if not is_mlprogram(ctx):
                return Support.no("data is float16; NeuralNetwork takes float32 or int64 (ML Program takes float16)")
            if coreml_version(ctx) < 6:
                return Support.no("float16 data needs Core ML 6 (deployment_target=iOS16 or later)")
            return SUPPORTED
        return Support.no(f"data is {type_name(dtype)}; Core ML's gather takes float32, int64 or float16")

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """indices int32 or int64; scalar indices need static data of rank <= 4; output rank
        (data rank + indices rank - 1) <= 5."""
        node = unit.target
        data_shape, indices_shape = ctx.shape(node.inputs[0]), ctx.shape(node.inputs[1])
        assert data_shape is not None and indices_shape is not None
        result = check_type(ctx, node.inputs[1], {INT32, INT64}, "indices (input 1)", "Core ML's gather")
        if not result:
            return result
        if not indices_shape:
            if any(d is None for d in data_shape):
                return Support.no("scalar indices need a static data shape")
            if len(data_shape) > 4:
                return Support.no(f"scalar indices with rank-{len(data_shape)} data; Core ML takes rank <= 4 here")
        if len(data_shape) + len(indices_shape) - 1 > 5:
            return Support.no(
                f"output rank {len(data_shape) + len(indices_shape) - 1}; Core ML takes rank <= 5"
            )
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        """Negative indices are made positive (Core ML 7+ gathers treat them as out of bounds)."""
        node = unit.target
        x, indices, y = node.inputs[0], node.inputs[1], node.outputs[0]
        rank = b.rank(x)
        axis = normalize_axis(int(attr(node, "axis", 0)), rank)
        if axis is None:
            raise CompileError(f"axis {attr(node, 'axis')} is out of range")
        dim = b.shape(x)[axis]
        index = b.var(indices)
        if isinstance(index, np.ndarray):
            if dim is not None:
                index = np.where(index < 0, index + dim, index).astype(np.int32)
        elif dim is not None:
            negative = b.mb.less(x=index, y=np.int32(0), name=b.tmp(f"{y.name}_neg"))
            shifted = b.mb.add(x=index, y=np.int32(dim), name=b.tmp(f"{y.name}_shift"))
            index = b.mb.select(cond=negative, a=shifted, b=index, name=b.tmp(f"{y.name}_idx"))
        else:
            raise CompileError("dynamic indices into a dynamic dim (cannot make negative indices positive)")
        b.set(y, b.mb.gather(x=b.var(x), indices=index, axis=axis, name=b.name(y)))
