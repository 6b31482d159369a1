"""ConvTranspose (ORT ``convtranspose_op_builder.cc``)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import CoreMLRule, check_conv_dims, is_constant, present


class ConvTranspose(CoreMLRule):
    op_types = ("ConvTranspose",)
    neuralnetwork = False

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Weight and bias constant initializers; weight and input dims <= 16384; auto_pad not SAME_*;
        with explicit pads all pads equal; kernel_shape, if given, equal to the weight's spatial dims; no
        output_shape; output_padding all 0."""
        node = unit.target
        weight = node.inputs[1] if len(node.inputs) > 1 else None
        if not is_constant(ctx, weight):
            return Support.no("weight (input 1) is not a constant initializer")
        if len(node.inputs) > 2 and not is_constant(ctx, node.inputs[2]):
            return Support.no("bias (input 2) is not a constant initializer")
        w_shape, x_shape = ctx.shape(weight), ctx.shape(node.inputs[0])
        assert w_shape is not None and x_shape is not None
        result = check_conv_dims(ctx, (("weight", w_shape), ("input", x_shape)))
        if not result:
            return result
        auto_pad = attr(node, "auto_pad", "NOTSET")
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            return Support.no(f"auto_pad={auto_pad} is not supported; give explicit, equal pads")
        if auto_pad == "NOTSET":
            pads = attr(node, "pads") or (0,)  # ONNX default: no padding
            if len(set(pads)) > 1:
                return Support.no(
                    f"pads {list(pads)} are not all equal; Core ML gives inconsistent results across devices"
                )
        kernel_shape = attr(node, "kernel_shape")
        if kernel_shape is not None and tuple(kernel_shape) != tuple(w_shape[2:]):
            return Support.no(
                f"kernel_shape {list(kernel_shape)} does not match the weight's spatial dims {list(w_shape[2:])}"
            )
        if attr(node, "output_shape") is not None:
            return Support.no("output_shape is set; Core ML's output for it is inconsistent (give pads instead)")
        output_padding = attr(node, "output_padding")
        if output_padding is not None and any(p != 0 for p in output_padding):
            return Support.no(f"output_padding {list(output_padding)}; Core ML has no output padding")
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        weight = b.const(node.inputs[1]).astype(b.np_dtype(x))
        spatial = weight.ndim - 2
        onnx_pads = [int(p) for p in (attr(node, "pads") or [0] * (2 * spatial))]
        if attr(node, "auto_pad", "NOTSET") == "VALID":
            onnx_pads = [0] * (2 * spatial)
        kwargs = {
            "x": b.var(x), "weight": weight, "pad_type": "custom",
            "pad": [v for i in range(spatial) for v in (onnx_pads[i], onnx_pads[i + spatial])],
            "strides": [int(s) for s in attr(node, "strides", (1,) * spatial)],
            "dilations": [int(d) for d in attr(node, "dilations", (1,) * spatial)],
            "groups": int(attr(node, "group", 1)), "name": b.name(y),
        }
        if present(node, 2):
            kwargs["bias"] = b.const(node.inputs[2]).astype(b.np_dtype(x))
        b.set(y, b.mb.conv_transpose(**kwargs))
