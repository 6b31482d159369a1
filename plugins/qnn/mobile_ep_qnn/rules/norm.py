"""Normalizations (``batchnormalization_op_builder.cc``, ``instancenormalization_op_builder.cc``,
``layernormalization_op_builder.cc``, ``groupnormalization_op_builder.cc``, ``lrn_op_builder.cc``, LpNormalization
in ``simple_op_builder.cc``)."""

from __future__ import annotations

from ._base import SUPPORTED, QnnRule, Support, attr


class BatchNormalization(QnnRule):
    op_types = ("BatchNormalization",)
    constant_inputs = {1: "scale", 2: "bias", 3: "mean", 4: "variance"}

    def check(self, unit, ctx):
        """Inference mode with constant scale, bias, mean and variance."""
        outputs = [v for v in unit.target.outputs if v is not None and v.name]
        if len(outputs) > 1 or attr(unit.target, "training_mode", 0):
            return Support.no("training mode: the QNN EP takes inference-mode BatchNormalization")
        return SUPPORTED


class InstanceNormalization(QnnRule):
    op_types = ("InstanceNormalization",)

    def check(self, unit, ctx):
        """float32/float16 or a QDQ unit."""
        return SUPPORTED


class LayerNormalization(QnnRule):
    op_types = ("LayerNormalization",)
    constant_inputs = {1: "scale", 2: "bias"}

    def check(self, unit, ctx):
        """Constant scale and bias; only the normalized output."""
        outputs = [v for v in unit.target.outputs[1:] if v is not None and v.name]
        if outputs:
            return Support.no("the mean or inverse-deviation output: QNN's LayerNorm has only the result")
        return SUPPORTED


class LRN(QnnRule):
    op_types = ("LRN",)

    def check(self, unit, ctx):
        """float32/float16 or a QDQ unit, rank 4."""
        return SUPPORTED


class LpNormalization(QnnRule):
    op_types = ("LpNormalization",)

    def check(self, unit, ctx):
        """p=2 (QNN's L2Norm)."""
        if attr(unit.target, "p", 2) != 2:
            return Support.no("p other than 2: QNN has L2 normalization only")
        return SUPPORTED


class RMSNormalization(QnnRule):
    op_types = ("RMSNormalization",)

    def check(self, unit, ctx):
        """float32/float16, normalized over the last axis (QNN RmsNorm)."""
        rank = ctx.rank(unit.target.inputs[0])
        axis = attr(unit.target, "axis", -1)
        if rank is not None and axis not in (-1, rank - 1):
            return Support.no("an axis other than the last: the QNN EP builds RMSNormalization over the last axis")
        return SUPPORTED
