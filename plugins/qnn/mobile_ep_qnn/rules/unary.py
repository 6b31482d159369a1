"""Element-wise unary ops and activations (``simple_op_builder.cc``, ``reciprocal_op_builder.cc``,
``tan_op_builder.cc``, ``isnan_op_builder.cc``, ``thresholdedrelu_op_builder.cc``): QNN ElementWise* and
activation ops."""

from __future__ import annotations

from ._base import FLOATS, INTS, SUPPORTED, QnnRule


class FloatUnary(QnnRule):
    op_types = ("Ceil", "Cos", "Exp", "Floor", "Log", "Round", "Sigmoid", "Sin", "Sqrt", "Tanh", "Atan",
                "Reciprocal", "Elu", "Gelu", "HardSigmoid", "HardSwish", "LeakyRelu", "Relu", "Selu", "IsNaN",
                "Softplus", "Tan", "ThresholdedRelu")

    def check(self, unit, ctx):
        """float32 or float16 input."""
        return SUPPORTED


class SignedUnary(QnnRule):
    op_types = ("Abs", "Neg", "Sign")
    input_types = {0: FLOATS | INTS}

    def check(self, unit, ctx):
        """float32, float16, int32 or int64 input."""
        return SUPPORTED
