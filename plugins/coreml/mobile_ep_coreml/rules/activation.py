"""Activations (ORT ``activation_op_builder.cc``): Sigmoid, Tanh, Relu, LeakyRelu, PRelu, HardSigmoid,
Gelu, Elu, Softplus."""

from __future__ import annotations

import math

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support

from ._base import FLOAT, FLOAT16, CoreMLRule, is_constant


class Activation(CoreMLRule):
    """Base checks only."""

    op_types = ("Sigmoid", "Tanh", "Relu", "LeakyRelu")
    min_opset = 6


class PRelu(CoreMLRule):
    op_types = ("PRelu",)
    min_opset = 6

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """X rank 3 or 4 with a static channel dim (X.shape[-3]); slope a constant initializer of shape
        [C,1,1] or holding a single value (a single slope needs C > 1)."""
        node = unit.target
        x_shape = ctx.shape(node.inputs[0])
        assert x_shape is not None  # checked by check_common
        if len(x_shape) not in (3, 4):
            return Support.no(f"X has rank {len(x_shape)}; Core ML's prelu takes rank 3 or 4")
        channels = x_shape[-3]
        if channels is None:
            return Support.no("X's channel dim (shape[-3]) is dynamic; Core ML's prelu needs it static")
        slope = node.inputs[1] if len(node.inputs) > 1 else None
        if not is_constant(ctx, slope):
            return Support.no("slope (input 1) is not a constant initializer")
        slope_shape = ctx.static_shape(slope)
        if slope_shape is None:
            return Support.no("slope (input 1) has no static shape")
        per_channel = len(slope_shape) == 3 and all(d == 1 for d in slope_shape[1:])
        single = math.prod(slope_shape) == 1
        if not per_channel and not single:
            return Support.no(
                f"slope has shape {list(slope_shape)}; Core ML takes a [C,1,1] slope or a single value"
            )
        if single and channels == 1:
            return Support.no("a single slope value with one channel is not supported by Core ML's prelu weight")
        return SUPPORTED


class HardSigmoid(CoreMLRule):
    """Base checks only (float32 or float16 input)."""

    op_types = ("HardSigmoid",)
    min_opset = 6
    input0_types_mlp = frozenset({FLOAT, FLOAT16})


class MLProgramActivation(CoreMLRule):
    """Base checks only (Gelu keeps its approximate mode)."""

    op_types = ("Gelu", "Elu")
    min_opset = 6
    neuralnetwork = False


class Softplus(CoreMLRule):
    """Base checks only."""

    op_types = ("Softplus",)
    neuralnetwork = False


