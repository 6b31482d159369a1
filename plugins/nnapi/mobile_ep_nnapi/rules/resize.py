"""Resize, plain or as a QDQ unit (ORT ``resize_op_builder.cc``): RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, DataType, NodeUnit, RuleContext, Support, attr

from ._base import FLOAT_OR_UINT8, NnapiRule, input_value, needs_feature_level, rank_between
from ._quant import check_quantized_io

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

