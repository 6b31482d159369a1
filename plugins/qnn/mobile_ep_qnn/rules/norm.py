"""Normalizations (``batchnormalization_op_builder.cc``, ``instancenormalization_op_builder.cc``,
``layernormalization_op_builder.cc``, ``groupnormalization_op_builder.cc``, ``lrn_op_builder.cc``, LpNormalization
in ``simple_op_builder.cc``)."""

from __future__ import annotations

from ._base import SUPPORTED, QnnRule, Support, attr


class BatchNormalization(QnnRule):
    op_types = ("BatchNormalization",)
    #: The HTP refuses BatchNorm of rank 5.
    max_rank = 4
    constant_inputs = {1: "scale", 2: "bias", 3: "mean", 4: "variance"}

    def check(self, unit, ctx):
        """Inference mode with constant scale, bias, mean and variance."""
        outputs = [v for v in unit.target.outputs if v is not None and v.name]
        if len(outputs) > 1 or attr(unit.target, "training_mode", 0):
            return Support.no("training mode: the QNN EP takes inference-mode BatchNormalization")
        return SUPPORTED


class InstanceNormalization(QnnRule):
    op_types = ("InstanceNormalization",)
    #: The HTP refuses InstanceNorm of rank 5.
    max_rank = 4

    def check(self, unit, ctx):
        """float32/float16 or a QDQ unit."""
        return SUPPORTED


class GroupNormalization(QnnRule):
    op_types = ("GroupNormalization",)
    static_outputs = False  # (checked below, with the reason that applies)

    def check(self, unit, ctx):
        """Rank 3 or more; scale and bias of one value per channel (opset 21's form); epsilon above 0; a number
        of groups that divides the channels; an output whose shape onnxruntime knows.  (An ONNX function: the
        EP is offered it before onnxruntime inlines it.  ONNX has no shape inference for it, so onnxruntime
        knows the output's shape only when the file declares it (value_info, as exporters write); without it
        onnxruntime-qnn 2.7 takes the node, then refuses it in NHWC layout and the session fails when the
        output feeds another node.  Refused then: the model convert writes has it inlined, which the EP takes.)"""
        node = unit.target
        shape = ctx.shape(node.inputs[0])
        if shape is None or len(shape) <= 2:
            return Support.no("an input of rank 2 or less: QNN's GroupNorm takes rank 3 and more")
        if ctx.static_shape(node.outputs[0]) is None:
            return Support.no("the file does not declare the output's shape (ONNX infers none for GroupNormalization): "
                              "onnxruntime-qnn 2.7 then fails the session once the output feeds another node; "
                              "convert writes the op inlined, which the EP takes (or export the model with value_info)")
        channels = shape[1]
        for index, name in ((1, "scale"), (2, "bias")):
            given = ctx.shape(node.inputs[index])
            if given is None or list(given) != [channels]:
                return Support.no(f"{name} is not one value per channel ({channels}): the QNN EP takes opset 21's "
                                  "per-channel form")
        if attr(node, "epsilon", 1e-5) <= 0:
            return Support.no("epsilon is not above 0")
        groups = attr(node, "num_groups", 1)
        if groups <= 0 or channels % groups:
            return Support.no(f"{channels} channels do not split into {groups} groups")
        return SUPPORTED


class LayerNormalization(QnnRule):
    op_types = ("LayerNormalization",)
    #: The HTP refuses LayerNorm of rank 5.
    max_rank = 4
    constant_inputs = {1: "scale", 2: "bias"}

    def check(self, unit, ctx):
        """Constant scale and bias; only the normalized output; over the last axis only; rank 4 at most."""
        node = unit.target
        outputs = [v for v in node.outputs[1:] if v is not None and v.name]
        if outputs:
            return Support.no("the mean or inverse-deviation output: QNN's LayerNorm has only the result")
        rank = ctx.rank(node.inputs[0])
        axis = attr(node, "axis", -1)
        if rank is not None and axis not in (-1, rank - 1):
            return Support.no(f"axis={axis} of a rank-{rank} input: the HTP normalizes over the last axis only")
        return SUPPORTED


class LRN(QnnRule):
    op_types = ("LRN",)

    def check(self, unit, ctx):
        """float32/float16 or a QDQ unit, rank 4."""
        return SUPPORTED


class LpNormalization(QnnRule):
    op_types = ("LpNormalization",)
    #: The HTP refuses L2Norm of rank 5.
    max_rank = 4

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
