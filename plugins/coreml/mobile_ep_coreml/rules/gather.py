"""Gather (ORT ``gather_op_builder.cc``)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support

from ._base import (
    FLOAT,
    FLOAT16,
    INT32,
    INT64,
    CoreMLRule,
    check_type,
    coreml_version,
    is_mlprogram,
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
