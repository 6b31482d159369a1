"""Conv and ConvTranspose (``conv_op_builder.cc``): QNN Conv2d/Conv3d/DepthWiseConv2d/TransposeConv2d/3d,
1-D convolutions as 2-D with a unit dimension."""

from __future__ import annotations

from ._base import SUPPORTED, QnnRule, Support, attr


class Conv(QnnRule):
    op_types = ("Conv",)

    def check(self, unit, ctx):
        """1-D, 2-D or 3-D; float32/float16 or a QDQ unit; the weight may be an activation.  A dilated one with
        auto_pad SAME_UPPER/SAME_LOWER, or a 3-D one dilated along its first axis or strided along another, fails the
        session."""
        node = unit.target
        rank = ctx.rank(node.inputs[0])
        if rank not in (3, 4, 5):
            return Support.no(f"rank-{rank} input: QNN convolutions are 1-D, 2-D or 3-D")
        dilations = list(attr(node, "dilations", ()) or ())
        if any(d != 1 for d in dilations):
            strides = list(attr(node, "strides", ()) or ())
            if str(attr(node, "auto_pad", "NOTSET")).startswith("SAME") or (rank == 5 and (
                    dilations[0] != 1 or any(s != 1 for s in strides[1:]))):
                return Support.no(f"dilations {dilations} with these strides and padding: onnxruntime-qnn 2.7 takes the "
                                  "Conv, then refuses it in NHWC layout and fails the session (a dilated Conv is taken "
                                  "with explicit pads; a 3-D one not dilated along its first axis, strided along it "
                                  "only)")
        return SUPPORTED


class ConvTranspose(QnnRule):
    op_types = ("ConvTranspose",)

    def check(self, unit, ctx):
        """1-D, 2-D or 3-D without dilations."""
        rank = ctx.rank(unit.target.inputs[0])
        if rank not in (3, 4, 5):
            return Support.no(f"rank-{rank} input: QNN transposed convolutions are 1-D, 2-D or 3-D")
        if any(d != 1 for d in attr(unit.target, "dilations", ()) or ()):
            return Support.no("dilations other than 1: QNN's TransposeConv has no dilation")
        return SUPPORTED
