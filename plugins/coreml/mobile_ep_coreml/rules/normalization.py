"""GroupNormalization, InstanceNormalization, LayerNormalization (ORT ``normalization_op_builder.cc``)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr

from ._base import FLOAT, FLOAT16, CoreMLRule, is_constant, type_name


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


class InstanceNormalization(_Normalization):
    op_types = ("InstanceNormalization",)
    stash_type_matters = False

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """scale and B constant initializers."""
        return super().check(unit, ctx)
