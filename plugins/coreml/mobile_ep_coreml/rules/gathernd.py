"""GatherND (ORT ``gather_nd_op_builder.cc``)."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import FLOAT, FLOAT16, INT32, INT64, CoreMLRule, check_type, is_constant


class GatherND(CoreMLRule):
    op_types = ("GatherND",)
    neuralnetwork = False

    def check_types(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """data float32, float16, int32 or int64 (as int32); indices int32 or int64.  Not bool: coremltools'
        gather_nd takes fp16, fp32 and int32 data only (its lowering fails on bool)."""
        node = unit.target
        result = check_type(ctx, node.inputs[0], {FLOAT, FLOAT16, INT32, INT64}, "data (input 0)",
                            "Core ML's gather_nd")
        if result:
            result = check_type(ctx, node.inputs[1], {INT32, INT64}, "indices (input 1)", "Core ML's gather_nd")
        return result

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """batch_dims=0; indices a constant initializer (Core ML miscomputes dynamic indices), not a scalar,
        with a static last dim <= data rank; the data dims it indexes static."""
        node = unit.target
        batch_dims = attr(node, "batch_dims", 0)
        if batch_dims != 0:
            return Support.no(f"batch_dims={batch_dims}; Core ML's gather_nd has no batch dims")
        if not is_constant(ctx, node.inputs[1]):
            return Support.no(
                "indices (input 1) is not a constant initializer; Core ML's gather_nd gives wrong results "
                "for dynamic indices"
            )
        data_shape, indices_shape = ctx.shape(node.inputs[0]), ctx.shape(node.inputs[1])
        assert data_shape is not None and indices_shape is not None
        if not indices_shape:
            return Support.no("indices is a scalar")
        depth = indices_shape[-1]
        if depth is None or depth > len(data_shape):
            return Support.no(f"indices' last dim {depth} exceeds the data rank {len(data_shape)}")
        if any(d is None for d in data_shape[:depth]):
            return Support.no(f"the first {depth} data dims must be static (ORT normalizes negative indices)")
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        indices = b.const(node.inputs[1]).astype(np.int64)
        dims = np.asarray(b.shape(x)[:indices.shape[-1]], dtype=np.int64)
        indices = np.where(indices < 0, indices + dims, indices).astype(np.int32)
        b.set(y, b.mb.gather_nd(x=b.var(x), indices=indices, name=b.name(y)))
