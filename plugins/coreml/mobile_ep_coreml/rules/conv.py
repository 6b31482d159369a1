"""Conv and com.microsoft:FusedConv (ORT ``conv_op_builder.cc``; FusedConv comes from ORT's
ConvActivationFusion)."""

from __future__ import annotations

from typing import Any

import numpy as np

from mobile_ep import SUPPORTED, CompileError, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import (
    FLOAT,
    FLOAT16,
    CoreMLRule,
    check_conv_dims,
    coreml_version,
    is_constant,
    is_mlprogram,
    present,
    shape_text,
    window_pads,
)

#: FusedConv activations ORT lowers, with their activation_params count.
FUSED_ACTIVATIONS = {"Relu": 0, "Sigmoid": 0, "Tanh": 0, "LeakyRelu": 1, "Clip": 2, "HardSigmoid": 2}


def check_conv(unit: NodeUnit, ctx: RuleContext) -> Support:
    """The Conv conditions shared by Conv and FusedConv, in ORT's order."""
    node = unit.target
    mlp = is_mlprogram(ctx)
    weight = node.inputs[1] if len(node.inputs) > 1 else None
    if weight is None:
        return Support.no("no weight (input 1)")
    if not mlp and not is_constant(ctx, weight):
        return Support.no(
            "NeuralNetwork: weight (input 1) is not a constant initializer (ML Program takes a dynamic weight)"
        )
    w_shape, x_shape = ctx.shape(weight), ctx.shape(node.inputs[0])
    y_shape = ctx.shape(node.outputs[0])
    if y_shape is None:
        return Support.no("the output shape is unknown (ORT needs it to check Core ML's dim limit)")
    assert w_shape is not None and x_shape is not None  # every input's shape is checked in check_common
    result = check_conv_dims(ctx, (("weight", w_shape), ("input", x_shape), ("output", y_shape)))
    if not result:
        return result
    if len(w_shape) not in (3, 4):
        return Support.no(
            f"weight has rank {len(w_shape)} ({len(w_shape) - 2}-D conv); ORT takes 1-D and 2-D convolutions only"
        )
    if len(node.inputs) > 2 and not is_constant(ctx, node.inputs[2]):
        if node.inputs[2] is None:
            return Support.no("bias (input 2) is an empty name; ORT's builder rejects it (drop the empty input)")
        return Support.no("bias (input 2) is not a constant initializer")
    if mlp and coreml_version(ctx) < 6 and attr(node, "auto_pad", "NOTSET") == "SAME_LOWER":
        return Support.no(
            "auto_pad=SAME_LOWER in an ML Program needs Core ML 6 (deployment_target=iOS16 or later), "
            "or explicit pads"
        )
    kernel_shape = attr(node, "kernel_shape")
    if kernel_shape is not None:
        spatial = tuple(d if d is not None else 0 for d in w_shape[2:])
        if tuple(kernel_shape) != spatial:
            return Support.no(
                f"kernel_shape {list(kernel_shape)} does not match the weight's spatial dims "
                f"{shape_text(ctx, weight)}[2:]; Core ML takes the kernel from the weight"
            )
    return SUPPORTED


def lower_conv(unit: NodeUnit, ctx: RuleContext, b: MILBuilder, name: str) -> Any:
    """The MIL conv of a Conv or FusedConv node (without FusedConv's activation)."""
    node = unit.target
    x, w = node.inputs[0], node.inputs[1]
    w_shape = b.static_shape(w)
    spatial = len(w_shape) - 2
    strides = [int(s) for s in attr(node, "strides", (1,) * spatial)]
    dilations = [int(d) for d in attr(node, "dilations", (1,) * spatial)]
    pad_type, pads = window_pads(node, ctx, w_shape[2:], strides, dilations)
    weight = b.weight(w) if all(d == 1 for d in dilations) else b.var(w)  # (compressed if fold_qdq made it)
    if not isinstance(weight, np.ndarray) and any(d != 1 for d in dilations):
        raise CompileError("Core ML needs a constant weight for a dilated convolution")
    kwargs: dict[str, Any] = {"x": b.var(x), "weight": weight, "strides": strides, "dilations": dilations,
                              "groups": int(attr(node, "group", 1)), "pad_type": pad_type, "name": name}
    if pad_type == "custom":
        kwargs["pad"] = pads
    if present(node, 2):
        kwargs["bias"] = b.const(node.inputs[2]).astype(b.np_dtype(x))
    return b.mb.conv(**kwargs)


class Conv(CoreMLRule):
    op_types = ("Conv",)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """1-D or 2-D convolution (weight rank 3 or 4); bias a constant initializer; weight, input and
        output dims <= 16384; kernel_shape, if given, equal to the weight's spatial dims. NeuralNetwork:
        weight a constant initializer. ML Program before Core ML 6 (iOS 15): no auto_pad=SAME_LOWER."""
        return check_conv(unit, ctx)

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        y = unit.target.outputs[0]
        b.set(y, lower_conv(unit, ctx, b, b.name(y)))


class FusedConv(CoreMLRule):
    domain = "com.microsoft"
    op_types = ("FusedConv",)
    neuralnetwork = False
    input0_types_mlp = frozenset({FLOAT, FLOAT16})

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """At most 3 inputs (no residual Z); activation Relu, Sigmoid, Tanh, LeakyRelu (1 param), Clip or
        HardSigmoid (2 params) with its activation_params; otherwise as Conv."""
        node = unit.target
        if len(node.inputs) > 3:
            return Support.no("has the residual input Z (input 3), which ORT's Core ML lowering would drop")
        activation = attr(node, "activation", "")
        if activation not in FUSED_ACTIVATIONS:
            known = ", ".join(FUSED_ACTIVATIONS)
            return Support.no(f"activation {activation!r} is not one ORT's CoreML EP fuses ({known})")
        params = attr(node, "activation_params", ())
        if len(params) != FUSED_ACTIVATIONS[activation]:
            return Support.no(
                f"activation {activation} needs {FUSED_ACTIVATIONS[activation]} activation_params, "
                f"got {len(params)}"
            )
        return check_conv(unit, ctx)

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        conv = lower_conv(unit, ctx, b, b.tmp(f"{y.name}_conv"))
        activation = attr(node, "activation", "")
        params = [float(p) for p in attr(node, "activation_params", ())]
        mb, name = b.mb, b.name(y)
        if activation == "Relu":
            out = mb.relu(x=conv, name=name)
        elif activation == "Sigmoid":
            out = mb.sigmoid(x=conv, name=name)
        elif activation == "Tanh":
            out = mb.tanh(x=conv, name=name)
        elif activation == "LeakyRelu":
            out = mb.leaky_relu(x=conv, alpha=b.scalar(params[0], x), name=name)
        elif activation == "HardSigmoid":
            out = mb.sigmoid_hard(x=conv, alpha=b.scalar(params[0], x), beta=b.scalar(params[1], x), name=name)
        else:  # Clip
            low = mb.maximum(x=conv, y=b.scalar(params[0], x), name=b.tmp(f"{y.name}_lo"))
            out = mb.minimum(x=low, y=b.scalar(params[1], x), name=name)
        b.set(y, out)
