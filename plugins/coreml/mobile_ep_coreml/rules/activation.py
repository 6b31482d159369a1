"""Activations (ORT ``activation_op_builder.cc``): Sigmoid, Tanh, Relu, LeakyRelu, PRelu, HardSigmoid,
Gelu, Elu, Softplus."""

from __future__ import annotations

import math

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import FLOAT, FLOAT16, CoreMLRule, is_constant


class Activation(CoreMLRule):
    """Base checks only."""

    op_types = ("Sigmoid", "Tanh", "Relu", "LeakyRelu")
    min_opset = 6

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        op = node.op_type
        if op == "LeakyRelu":
            b.set(y, b.mb.leaky_relu(x=b.var(x), alpha=b.scalar(attr(node, "alpha", 0.01), x), name=b.name(y)))
        else:
            fn = {"Sigmoid": b.mb.sigmoid, "Tanh": b.mb.tanh, "Relu": b.mb.relu}[op]
            b.set(y, fn(x=b.var(x), name=b.name(y)))


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

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        slope = b.const(node.inputs[1]).astype(b.np_dtype(x))
        rank = b.rank(x)
        if slope.size == 1:
            b.set(y, b.mb.leaky_relu(x=b.var(x), alpha=slope.reshape(()), name=b.name(y)))
        elif rank == 4:  # a [C,1,1] slope on NCHW: Core ML's per-channel prelu
            b.set(y, b.mb.prelu(x=b.var(x), alpha=slope.reshape(-1), name=b.name(y)))
        else:  # rank 3 [C,H,W]: the slope broadcasts over dim 0, not Core ML's channel axis
            xv = b.var(x)
            negative = b.mb.mul(x=xv, y=slope, name=b.tmp(f"{y.name}_neg"))
            keep = b.mb.greater_equal(x=xv, y=b.scalar(0, x), name=b.tmp(f"{y.name}_pos"))
            b.set(y, b.mb.select(cond=keep, a=xv, b=negative, name=b.name(y)))


class HardSigmoid(CoreMLRule):
    """Base checks only (float32 or float16 input)."""

    op_types = ("HardSigmoid",)
    min_opset = 6
    input0_types_mlp = frozenset({FLOAT, FLOAT16})

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        b.set(y, b.mb.sigmoid_hard(x=b.var(x), alpha=b.scalar(attr(node, "alpha", 0.2), x),
                                   beta=b.scalar(attr(node, "beta", 0.5), x), name=b.name(y)))


class MLProgramActivation(CoreMLRule):
    """Base checks only (Gelu keeps its approximate mode)."""

    op_types = ("Gelu", "Elu")
    min_opset = 6
    neuralnetwork = False

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        if node.op_type == "Elu":
            b.set(y, b.mb.elu(x=b.var(x), alpha=b.scalar(attr(node, "alpha", 1.0), x), name=b.name(y)))
        else:
            mode = "TANH_APPROXIMATION" if attr(node, "approximate", "none") == "tanh" else "EXACT"
            b.set(y, b.mb.gelu(x=b.var(x), mode=mode, name=b.name(y)))


class Softplus(CoreMLRule):
    """Base checks only."""

    op_types = ("Softplus",)
    neuralnetwork = False

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        b.set(node.outputs[0], b.mb.softplus(x=b.var(node.inputs[0]), name=b.name(node.outputs[0])))
