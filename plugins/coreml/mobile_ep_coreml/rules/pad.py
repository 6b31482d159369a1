"""Pad (ORT ``pad_op_builder.cc``)."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import FLOAT, FLOAT16, CoreMLRule, check_type, initializer_value, is_mlprogram, present, type_name


class Pad(CoreMLRule):
    op_types = ("Pad",)
    min_opset = 11  # before Pad-11, pads and value were attributes

    def check_types(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input float32 (ML Program: float32 or float16)."""
        allowed = {FLOAT, FLOAT16} if is_mlprogram(ctx) else {FLOAT}
        return check_type(ctx, unit.target.inputs[0], allowed, "data (input 0)")

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """pads an initializer, all >= 0; axes, if given, an initializer. NeuralNetwork: rank >= 2,
        mode constant with constant_value a float32 initializer, padding only the last 2 dims. ML Program:
        mode constant (constant_value, if given, an initializer) or reflect (last 2 dims only, each pad
        smaller than its dim)."""
        node = unit.target
        mlp = is_mlprogram(ctx)
        shape = ctx.shape(node.inputs[0])
        assert shape is not None
        if not shape:
            return Support.no("the input is a scalar")
        if not mlp and len(shape) < 2:
            return Support.no(f"NeuralNetwork: rank-{len(shape)} input; needs rank >= 2")
        mode = attr(node, "mode", "constant")
        modes = ("constant", "reflect") if mlp else ("constant",)
        if mode not in modes:
            return Support.no(f"mode {mode}; {'ML Program' if mlp else 'NeuralNetwork'} takes {' or '.join(modes)}")
        if mode == "constant":
            if not present(node, 2):
                if not mlp:
                    return Support.no("NeuralNetwork: constant_value (input 2) must be given")
            elif initializer_value(ctx, node.inputs[2]) is None:
                return Support.no("constant_value (input 2) is not an initializer")
            if not mlp:
                value_type = ctx.dtype(node.inputs[2])
                if value_type != FLOAT:
                    return Support.no(f"NeuralNetwork: constant_value is {type_name(value_type)}; needs float32")
        pads = initializer_value(ctx, node.inputs[1])
        if pads is None:
            return Support.no("pads (input 1) is not an initializer")
        pads = np.asarray(pads, dtype=np.int64).reshape(-1)
        if (pads < 0).any():
            return Support.no(f"negative pads {pads.tolist()} (cropping) are not supported")
        rank = len(shape)
        if present(node, 3):
            axes_data = initializer_value(ctx, node.inputs[3])
            if axes_data is None:
                return Support.no("axes (input 3) is not an initializer")
            axes = [int(a) + rank if a < 0 else int(a) for a in np.asarray(axes_data).reshape(-1)]
        else:
            axes = list(range(rank))
        if len(pads) != 2 * len(axes):
            return Support.no(f"{len(pads)} pads for {len(axes)} axes")
        n = len(axes)
        if not mlp or mode != "constant":
            for i, axis in enumerate(axes):
                if axis < rank - 2 and (pads[i] != 0 or pads[i + n] != 0):
                    where = "NeuralNetwork" if not mlp else f"mode {mode}"
                    return Support.no(f"{where}: pads on axis {axis}; only the last 2 dims may be padded")
        if mode == "reflect":
            for i, axis in enumerate(axes):
                dim = shape[axis] if 0 <= axis < rank else None
                if dim is None or pads[i] >= dim or pads[i + n] >= dim:
                    return Support.no(
                        f"reflect pads {[int(pads[i]), int(pads[i + n])]} on axis {axis} of size "
                        f"{'dynamic' if dim is None else dim}; each must be smaller than a static dim"
                    )
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        """Core ML pads the last N dims ([begin, end] per dim); leading unpadded dims are left out."""
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        rank = b.rank(x)
        pads = np.asarray(initializer_value(ctx, node.inputs[1]), dtype=np.int64).reshape(-1)
        if present(node, 3):
            axes = [int(a) + rank if a < 0 else int(a) for a in np.asarray(initializer_value(ctx, node.inputs[3]))
                    .reshape(-1)]
        else:
            axes = list(range(rank))
        per_dim = [[0, 0] for _ in range(rank)]
        for i, axis in enumerate(axes):
            per_dim[axis] = [int(pads[i]), int(pads[i + len(axes)])]
        first = next((d for d in range(rank) if per_dim[d] != [0, 0]), rank - 1)
        first = min(first, rank - 2) if rank >= 2 else 0
        flat = [v for dim in per_dim[first:] for v in dim]
        mode = attr(node, "mode", "constant")
        value = 0.0
        if mode == "constant" and present(node, 2):
            value = float(np.asarray(initializer_value(ctx, node.inputs[2])).reshape(-1)[0])
        b.set(y, b.mb.pad(x=b.var(x), pad=np.array(flat, dtype=np.int32), mode=mode,
                          constant_val=b.scalar(value, x), name=b.name(y)))
