"""Clip (ORT ``clip_op_builder.cc`` with ``GetClipMinMax`` from ``shared/utils/utils.cc``)."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import FLOAT, FLOAT16, CoreMLRule, constant_value, present, type_name

_LOWEST = float(np.finfo(np.float32).min)
_HIGHEST = float(np.finfo(np.float32).max)


class Clip(CoreMLRule):
    op_types = ("Clip",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """min and max (attributes before opset 11, else optional inputs) constant initializers, read as
        float32/float16 (so integer Clip only without min/max), and min != max."""
        node = unit.target
        low, high = _LOWEST, _HIGHEST
        if ctx.node_opset(node) < 11:
            low = float(np.float32(attr(node, "min", _LOWEST)))
            high = float(np.float32(attr(node, "max", _HIGHEST)))
        else:
            dtype = ctx.dtype(node.inputs[0])
            for index, name in ((1, "min"), (2, "max")):
                if not present(node, index):
                    continue
                data = constant_value(ctx, node.inputs[index])
                if data is None:
                    return Support.no(f"{name} (input {index}) is not a constant initializer")
                if dtype not in (FLOAT, FLOAT16):
                    return Support.no(
                        f"{name} is given for a {type_name(dtype)} input; ORT reads min/max as float32 or "
                        "float16 only"
                    )
                if data.size == 0:
                    return Support.no(f"{name} (input {index}) is empty")
                value = float(np.float32(data.reshape(-1)[0]))
                if index == 1:
                    low = value
                else:
                    high = value
        if low == high:
            return Support.no(f"min and max are both {low:g}; ORT's CoreML EP rejects a constant output")
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        low: float | None = None
        high: float | None = None
        if ctx.node_opset(node) < 11:
            low, high = attr(node, "min"), attr(node, "max")
        else:
            if present(node, 1):
                low = float(np.asarray(constant_value(ctx, node.inputs[1])).reshape(-1)[0])
            if present(node, 2):
                high = float(np.asarray(constant_value(ctx, node.inputs[2])).reshape(-1)[0])
        mb, value = b.mb, b.var(x)
        if low is not None and high is not None and low <= high:
            b.set(y, mb.clip(x=value, alpha=b.scalar(low, x), beta=b.scalar(high, x), name=b.name(y)))
            return
        if low is not None:  # min(max(x, low), high), as ONNX: with low > high everything is high
            value = mb.maximum(x=value, y=b.scalar(low, x), name=b.name(y) if high is None else b.tmp(f"{y.name}_lo"))
        if high is not None:
            value = mb.minimum(x=value, y=b.scalar(high, x), name=b.name(y))
        if low is None and high is None:
            value = mb.identity(x=value, name=b.name(y))
        b.set(y, value)
