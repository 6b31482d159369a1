"""GroupNormalization, InstanceNormalization, LayerNormalization (ORT ``normalization_op_builder.cc``)."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, CompileError, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import FLOAT, FLOAT16, CoreMLRule, is_constant, normalize_axis, present, type_name


class _Normalization(CoreMLRule):
    neuralnetwork = False
    stash_type_matters = True

    def check_types(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """X, scale and B all float32 or all float16."""
        node = unit.target
        values = [node.inputs[0], node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else node.inputs[0]]
        dtypes = [ctx.dtype(v) for v in values]
        if any(d is None for d in dtypes):
            return Support.no("an input has no known element type")
        if len(set(dtypes)) != 1:
            names = ", ".join(type_name(d) for d in dtypes)
            return Support.no(f"inputs have mixed types ({names}); ORT needs X, scale and B of one type")
        if dtypes[0] not in (FLOAT, FLOAT16):
            return Support.no(f"inputs are {type_name(dtypes[0])}; ORT takes float32 or float16")
        return SUPPORTED

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        node = unit.target
        if len(node.outputs) != 1:
            return Support.no(f"{len(node.outputs)} outputs (training mode); export the model for inference")
        if self.stash_type_matters and attr(node, "stash_type", 1) != 1:
            return Support.no(f"stash_type={attr(node, 'stash_type')}; Core ML computes in float32 only (1)")
        if not is_constant(ctx, node.inputs[1]):
            return Support.no("scale (input 1) is not a constant initializer")
        if len(node.inputs) > 2 and not is_constant(ctx, node.inputs[2]):
            return Support.no("B (input 2) is not a constant initializer")
        return SUPPORTED


class Normalization(_Normalization):
    op_types = ("GroupNormalization", "LayerNormalization")

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """One output (inference mode); stash_type=1; scale and B constant initializers."""
        return super().check(unit, ctx)

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        dtype = b.np_dtype(x)
        epsilon = b.scalar(attr(node, "epsilon", 1e-5), x)
        scale = b.const(node.inputs[1]).astype(dtype)
        bias = b.const(node.inputs[2]).astype(dtype) if present(node, 2) else None
        mb = b.mb
        if node.op_type == "LayerNormalization":
            rank = b.rank(x)
            axis = normalize_axis(int(attr(node, "axis", -1)), rank)
            if axis is None:
                raise CompileError(f"axis {attr(node, 'axis')} is out of range")
            normalized = b.shape(x)[axis:]
            if any(d is None for d in normalized):
                raise CompileError("the normalized dims must be static (Core ML's gamma has their shape)")
            gamma = np.broadcast_to(scale, normalized).copy()
            beta = np.broadcast_to(bias, normalized).copy() if bias is not None else None
            b.set(y, mb.layer_norm(x=b.var(x), axes=list(range(axis, rank)), gamma=gamma, beta=beta,
                                   epsilon=epsilon, name=b.name(y)))
            return
        # GroupNormalization: normalize [N, G, C/G * spatial] over its last axis, then scale per channel.
        shape = b.static_shape(x)
        groups = int(attr(node, "num_groups"))
        channels = shape[1]
        if channels % groups:
            raise CompileError(f"{channels} channels do not divide into {groups} groups")
        grouped = mb.reshape(x=b.var(x), shape=[shape[0], groups, -1], name=b.tmp(f"{y.name}_groups"))
        normal = mb.layer_norm(x=grouped, axes=[2], epsilon=epsilon, name=b.tmp(f"{y.name}_norm"))
        restored = mb.reshape(x=normal, shape=list(shape), name=b.tmp(f"{y.name}_restore"))
        per_channel = [1, channels] + [1] * (len(shape) - 2)
        if scale.size == groups and groups != channels:  # opset 18: one scale and bias per group
            scale = np.repeat(scale.reshape(-1), channels // groups)
            bias = np.repeat(bias.reshape(-1), channels // groups) if bias is not None else None
        scaled = mb.mul(x=restored, y=scale.reshape(per_channel),
                        name=b.name(y) if bias is None else b.tmp(f"{y.name}_scaled"))
        if bias is not None:
            scaled = mb.add(x=scaled, y=bias.reshape(per_channel), name=b.name(y))
        b.set(y, scaled)


class InstanceNormalization(_Normalization):
    op_types = ("InstanceNormalization",)
    stash_type_matters = False

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """scale and B constant initializers."""
        return super().check(unit, ctx)

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        dtype = b.np_dtype(x)
        b.set(y, b.mb.instance_norm(x=b.var(x), gamma=b.const(node.inputs[1]).astype(dtype).reshape(-1),
                                    beta=b.const(node.inputs[2]).astype(dtype).reshape(-1),
                                    epsilon=b.scalar(attr(node, "epsilon", 1e-5), x), name=b.name(y)))
