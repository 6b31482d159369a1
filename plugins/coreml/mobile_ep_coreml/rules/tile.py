"""Tile (ORT ``tile_op_builder.cc``)."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support
from mobile_ep_coreml.mil import MILBuilder

from ._base import (
    BOOL,
    FLOAT,
    FLOAT16,
    INT32,
    INT64,
    CoreMLRule,
    constant_value,
    coreml_version,
    is_mlprogram,
    type_name,
)


class Tile(CoreMLRule):
    op_types = ("Tile",)
    trivial = True

    def check_types(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input float32, int32, int64 or bool (float16: ML Program on Core ML 6 / iOS 16 or later)."""
        dtype = ctx.dtype(unit.target.inputs[0])
        if dtype in (FLOAT, INT32, INT64, BOOL):
            return SUPPORTED
        if dtype == FLOAT16:
            if not is_mlprogram(ctx):
                return Support.no("input is float16; NeuralNetwork takes float32, int32, int64 or bool")
            if coreml_version(ctx) < 6:
                return Support.no("float16 input needs Core ML 6 (deployment_target=iOS16 or later)")
            return SUPPORTED
        return Support.no(f"input is {type_name(dtype)}; Core ML's tile takes float32, int32, int64 or bool")

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """NeuralNetwork: repeats a constant initializer. Constant repeats: one per input dim, all >= 1."""
        node = unit.target
        repeats = constant_value(ctx, node.inputs[1])
        if repeats is None and not is_mlprogram(ctx):
            return Support.no(
                "NeuralNetwork: repeats (input 1) is not a constant initializer (ML Program takes dynamic repeats)"
            )
        rank = ctx.rank(node.inputs[0])
        if repeats is not None:
            repeats = np.asarray(repeats).reshape(-1)
            if repeats.size != rank:
                return Support.no(f"{repeats.size} repeats for a rank-{rank} input")
            if (repeats < 1).any():
                return Support.no(f"repeats {repeats.tolist()}; each must be >= 1 (Core ML has no empty tensors)")
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        b.set(y, b.mb.tile(x=b.var(x), reps=b.var(node.inputs[1]), name=b.name(y)))
