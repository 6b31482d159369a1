"""Resize, plain or as a QDQ unit (ORT ``resize_op_builder.cc``): RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, DataType, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import FLOAT_OR_UINT8, NnapiRule, input_value, needs_feature_level, rank_between
from ._quant import check_quantized_io, unit_inputs, unit_outputs

#: An impossible feature level, for an input without a type (ORT returns INT_MAX there).
_UNREACHABLE = 1_000


def reciprocal_divides(n: int, scale: float) -> bool:
    """1/scale is (within 1e-4) an integer factor of n, for 0 < scale < 1 (ORT's ``ReciprocalIsAFactorOfN``)."""
    if not 0.0 < scale < 1.0:
        return False
    factor = 1.0 / scale
    rounded = round(factor)
    return abs(factor - rounded) < 1e-4 and rounded != 0 and n % int(rounded) == 0


class ResizeRule(NnapiRule):
    op_types = ("Resize",)
    qdq_op_types = frozenset({"Resize"})
    min_feature_level = 2
    # Resize-10 lacks the attributes the mapping needs
    min_opset = 11
    input_dtypes = FLOAT_OR_UINT8
    internal_uint8 = frozenset({"Resize"})

    def feature_level(self, unit: NodeUnit, ctx: RuleContext) -> int:
        dtype = ctx.dtype(input_value(unit, 0))
        if dtype is None:
            return _UNREACHABLE
        return 2 if dtype == DataType.UINT8 else 3

    def check_common(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        if ctx.dtype(input_value(unit, 0)) is None:
            return Support.no("input 0 has no element type")
        return super().check_common(unit, ctx)

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        result = super().check_io(unit, ctx)
        if not result or unit.kind != "qdq":
            return result
        result = check_quantized_io(unit, ctx, (0,))
        return check_quantized_io(unit, ctx, (0,), output=True) if result else result

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Feature level 3 for float32 (2 for uint8); 4-D input; mode linear or nearest; exclude_outside=0;
        linear: coordinate mode half_pixel or align_corners (feature level 4+) or asymmetric; nearest:
        asymmetric with nearest_mode floor; opset 18+: antialias=0, no axes, keep_aspect_ratio_policy stretch;
        scales or sizes a constant initializer leaving N and C unchanged; downscaling by scales only by an
        integer factor of H and W; an NCHW-shaped resize (scale/size of dim 1 = C) needs feature level 3."""
        result = rank_between(ctx, unit, 4, 4)
        if not result:
            return result
        node = unit.target
        mode = attr(node, "mode", "nearest")
        if mode not in ("linear", "nearest"):
            return Support.no(f"mode {mode} is not supported (linear or nearest only)")
        if attr(node, "exclude_outside", 0) != 0:
            return Support.no("exclude_outside=1 is not supported")
        coordinates = attr(node, "coordinate_transformation_mode", "half_pixel")
        if mode == "linear":
            if coordinates not in ("half_pixel", "align_corners", "asymmetric"):
                return Support.no(f"linear mode with coordinate_transformation_mode {coordinates} is not supported "
                                  "(half_pixel, align_corners or asymmetric)")
            if coordinates != "asymmetric":
                result = needs_feature_level(ctx, 4, f"linear mode with {coordinates}")
                if not result:
                    return result
        else:
            if coordinates != "asymmetric":
                return Support.no(f"nearest mode with coordinate_transformation_mode {coordinates} is not supported "
                                  "(asymmetric only)")
            nearest = attr(node, "nearest_mode", "round_prefer_floor")
            if nearest != "floor":
                return Support.no(f"nearest_mode {nearest} is not supported (floor only)")
        if ctx.node_opset(node) >= 18:
            if attr(node, "antialias", 0) != 0:
                return Support.no("antialias=1 is not supported")
            if attr(node, "axes", ()):
                return Support.no("the axes attribute is not supported")
            policy = attr(node, "keep_aspect_ratio_policy", "stretch")
            if policy != "stretch":
                return Support.no(f"keep_aspect_ratio_policy {policy} is not supported (stretch only)")
        return self._check_scales_or_sizes(unit, ctx)

    @staticmethod
    def _check_scales_or_sizes(unit: NodeUnit, ctx: RuleContext) -> Support:
        input_shape = ctx.static_shape(input_value(unit, 0))
        assert input_shape is not None  # checked by the common checks
        scales_value = input_value(unit, 2)
        sizes_value = input_value(unit, 3)
        scales = ctx.constant(scales_value)
        # An empty scales tensor (Resize-11/13 with sizes) means "use sizes".
        use_scales = scales_value is not None and not (scales is not None and scales.size == 0)
        if not use_scales and sizes_value is None:
            return Support.no("needs scales (input 2) or sizes (input 3)")
        if use_scales:
            if scales is None:
                return Support.no("scales (input 2) is not a constant initializer")
            s = [float(np.float32(v)) for v in np.asarray(scales).reshape(-1)]
            if len(s) != 4:
                return Support.no(f"scales (input 2) has {len(s)} values; needs 4")
            nchw = s[1] == 1.0
            scale_n, scale_c = s[0], (s[1] if nchw else s[3])
            scale_h, scale_w = (s[2], s[3]) if nchw else (s[1], s[2])
            if scale_n != 1.0 or scale_c != 1.0:
                return Support.no(f"scales {s} resize N or C; only H and W may change")
            if scale_h < 1.0 or scale_w < 1.0:
                h_in, w_in = (input_shape[2], input_shape[3]) if nchw else (input_shape[1], input_shape[2])
                if h_in == 0 or w_in == 0:
                    return Support.no("downscaling needs known, non-zero input H and W")
                if not (reciprocal_divides(h_in, scale_h) and reciprocal_divides(w_in, scale_w)):
                    return Support.no(f"downscaling by scales {scale_h:g}×{scale_w:g} must divide H and W "
                                      f"({h_in}×{w_in}) by integer factors")
        else:
            sizes = ctx.constant(sizes_value)
            if sizes is None:
                return Support.no("sizes (input 3) is not a constant initializer")
            z = [int(v) for v in np.asarray(sizes).reshape(-1)]
            if len(z) != 4:
                return Support.no(f"sizes (input 3) has {len(z)} values; needs 4")
            nchw = z[1] == input_shape[1]
            channel = 1 if nchw else 3
            if z[0] != input_shape[0] or z[channel] != input_shape[channel]:
                return Support.no(f"sizes {z} change N or C of the input {list(input_shape)}; only H and W may change")
        if nchw:
            result = needs_feature_level(ctx, 3, "an NCHW resize (scale or size of dim 1 matching C)")
            if not result:
                return result
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        """RESIZE_BILINEAR or RESIZE_NEAREST_NEIGHBOR (feature level 3) to the static output size, in NHWC;
        align_corners / half_pixel map to NNAPI's flags (feature level 4).  NNAPI maps coordinates with the
        size ratio, ONNX with the given scale: a scale whose output size is not exact is refused."""
        node = unit.target
        x_io, y_io = unit_inputs(unit)[0], unit_outputs(unit)[0]
        in_shape, out_shape = b.shape(x_io.value), b.shape(y_io.value)
        nchw_data = in_shape[1] == out_shape[1]  # as ORT decides: sizes keep dim 1, or scales[1] is 1
        scales_value = input_value(unit, 2)
        scales = ctx.constant(scales_value) if scales_value is not None else None
        if scales is not None and scales.size == 4:
            nchw_data = float(np.asarray(scales).reshape(-1)[1]) == 1.0
        hw = (2, 3) if nchw_data else (1, 2)
        mode = attr(node, "mode", "nearest")
        coordinates = attr(node, "coordinate_transformation_mode", "half_pixel")
        if scales is not None and scales.size == 4 and coordinates != "align_corners":
            s = np.asarray(scales, dtype=np.float32).reshape(-1)
            for axis in hw:
                if abs(float(in_shape[axis]) * float(s[axis]) - out_shape[axis]) > 1e-4:
                    raise b.fail(f"scale {float(s[axis]):g} of a {in_shape[axis]}-pixel axis gives no whole output size; "
                                 "NNAPI would sample with the size ratio instead")
        use_nchw = b.use_nchw and nchw_data
        if nchw_data:
            layout = "onnx" if use_nchw else "nhwc"
        else:  # the ONNX tensor is NHWC already
            layout = "onnx"
        x = b.get(x_io, layout)
        quantized = ctx.dtype(x_io.value) == DataType.UINT8
        source, target = b.quant(x_io.value), b.quant(y_io.value) if unit.kind == "qdq" else None
        y = b.like(y_io.value, x_io.value, layout) if quantized else b.new(y_io, layout)
        out_h, out_w = out_shape[hw[0]], out_shape[hw[1]]
        args = [x.index, b.i32(out_w), b.i32(out_h)]
        align, half = coordinates == "align_corners", coordinates == "half_pixel" and mode == "linear"
        if mode == "linear":
            code = OperationCode.RESIZE_BILINEAR
            if align or half:
                b.require(4, f"coordinate_transformation_mode {coordinates}")
                args += [b.flag(use_nchw), b.flag(align), b.flag(half)]
            else:
                args += b.layout_flag(use_nchw)
        else:
            code = OperationCode.RESIZE_NEAREST_NEIGHBOR
            args.append(b.flag(use_nchw))
        b.op(code, args, [y.index])
        if quantized and target is not None and target != source:
            dims = b.model.operands[y.index].dims
            b.bind(y_io.value, b.requantize(y, dims, source, target), y.perm)
            b.set_quant(y_io.value, target)

