"""Resize (ORT ``resize_op_builder.cc``)."""

from __future__ import annotations

import math

import numpy as np

from mobile_ep import SUPPORTED, CompileError, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import CoreMLRule, constant_value, is_mlprogram, normalize_axis, present


def _reciprocal_divides(n: int, scale: float) -> bool:
    """ORT ``ReciprocalIsAFactorOfN``: 1/scale is (nearly) an integer factor of n; scale in (0, 1)."""
    if not 0.0 < scale < 1.0:
        return False
    factor = 1.0 / scale
    rounded = round(factor)
    return abs(factor - rounded) < 1e-4 and n % int(rounded) == 0


class Resize(CoreMLRule):
    op_types = ("Resize",)
    min_opset = 11  # Resize-10 lacks most of the attributes
    allow_empty_inputs = True  # roi and scales are often given as empty tensors

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Input without 0 dims, rank 4 (ML Program: 3 to 5); antialias=0; mode nearest (nearest_mode
        floor) or linear; exclude_outside=0; keep_aspect_ratio_policy stretch; scales or sizes a constant
        initializer resizing only the last 2 dims (scales need those dims static). Upsampling by whole
        factors; downsampling only in ML Program, by factors dividing the input size. NeuralNetwork:
        coordinate_transformation_mode asymmetric; sizes need a static input and whole multiples. ML
        Program: nearest needs asymmetric; linear takes half_pixel, align_corners, pytorch_half_pixel (output
        H and W > 1) or asymmetric with sizes."""
        node = unit.target
        mlp = is_mlprogram(ctx)
        shape = ctx.shape(node.inputs[0])
        assert shape is not None
        if 0 in shape:
            return Support.no("the input has a 0 dim; Core ML takes no empty tensors")
        rank = len(shape)
        if mlp and not 3 <= rank <= 5:
            return Support.no(f"rank-{rank} input; ML Program takes rank 3 to 5")
        if not mlp and rank != 4:
            return Support.no(f"NeuralNetwork: rank-{rank} input; needs rank 4")
        if attr(node, "antialias", 0) != 0:
            return Support.no("antialias=1 is not supported")
        mode = attr(node, "mode", "nearest")
        if mode not in ("nearest", "linear"):
            return Support.no(f"mode {mode}; Core ML takes nearest or linear")
        if mode == "nearest":
            nearest_mode = attr(node, "nearest_mode", "round_prefer_floor")
            if nearest_mode != "floor":
                return Support.no(f"nearest_mode {nearest_mode}; Core ML takes floor only")
        if attr(node, "exclude_outside", 0) != 0:
            return Support.no("exclude_outside=1 is not supported")
        policy = attr(node, "keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            return Support.no(f"keep_aspect_ratio_policy {policy}; only stretch")

        using_sizes = present(node, 3)
        using_scales = not using_sizes and present(node, 2)
        if not using_scales and not using_sizes:
            return Support.no("neither scales nor sizes is given")
        axes = self._axes(node, rank)
        if axes is None:
            return Support.no(f"axes {list(attr(node, 'axes'))} are out of range for rank {rank}")
        dims = [-1 if d is None else d for d in shape]  # ORT's view of dynamic dims
        out_h = out_w = 0
        if using_scales:
            if dims[-2] == -1 or dims[-1] == -1:
                return Support.no("scales need the input's last 2 dims (H, W) static (or give sizes)")
            data = constant_value(ctx, node.inputs[2])
            if data is None:
                return Support.no("scales (input 2) is not a constant initializer")
            scales = [float(np.float32(s)) for s in np.asarray(data).reshape(-1)]
            if len(scales) < len(axes) or len(scales) < 2:
                return Support.no(f"{len(scales)} scales for {len(axes)} axes")
            for index, axis in enumerate(axes):
                if axis < rank - 2 and scales[index] != 1.0:
                    return Support.no(f"scale {scales[index]:g} on axis {axis}; Core ML resizes only the last 2 dims")
            scale_h, scale_w = scales[-2], scales[-1]
            if scale_h >= 1.0 and scale_w >= 1.0:
                for name, scale in (("H", scale_h), ("W", scale_w)):
                    if round(scale) != scale:
                        return Support.no(f"{name} scale {scale:g} is not a whole number")
            elif scale_h <= 1.0 and scale_w <= 1.0:
                if not mlp:
                    return Support.no("NeuralNetwork: downsampling is not supported (use model_format=MLProgram)")
                for name, size, scale in (("H", dims[-2], scale_h), ("W", dims[-1], scale_w)):
                    if not _reciprocal_divides(size, scale):
                        return Support.no(
                            f"downsampling {name} by scale {scale:g}; 1/scale must be a whole factor of {size}"
                        )
            else:
                return Support.no(f"scales H {scale_h:g}, W {scale_w:g}: both must upsample or both downsample")
            # float32 arithmetic, as in ORT
            out_h = _round_half_away(float(np.float32(dims[-2]) * np.float32(scale_h)))
            out_w = _round_half_away(float(np.float32(dims[-1]) * np.float32(scale_w)))
        else:
            data = constant_value(ctx, node.inputs[3])
            if data is None:
                return Support.no("sizes (input 3) is not a constant initializer")
            sizes = [int(s) for s in np.asarray(data).reshape(-1)]
            if len(sizes) < len(axes) or len(sizes) < 2:
                return Support.no(f"{len(sizes)} sizes for {len(axes)} axes")
            for index, axis in enumerate(axes):
                # ORT compares with the input dim at the same *position* as the size.
                if axis < rank - 2 and dims[index] != sizes[index]:
                    return Support.no(
                        f"size {sizes[index]} for axis {axis} of size {_dim(dims[index])}; Core ML resizes "
                        "only the last 2 dims"
                    )
            out_h, out_w = sizes[-2], sizes[-1]
            if not mlp:
                if -1 in dims:
                    return Support.no("NeuralNetwork: sizes need a static input shape")
                for name, size, out in (("H", dims[-2], out_h), ("W", dims[-1], out_w)):
                    if out % size != 0:
                        return Support.no(
                            f"NeuralNetwork: output {name} {out} is not a multiple of the input's {size} "
                            "(upsampling by whole factors only)"
                        )

        coordinate_mode = attr(node, "coordinate_transformation_mode", "half_pixel")
        if not mlp:
            if coordinate_mode != "asymmetric":
                return Support.no(
                    f"NeuralNetwork: coordinate_transformation_mode {coordinate_mode}; only asymmetric"
                )
        elif mode == "nearest":
            if coordinate_mode != "asymmetric":
                return Support.no(
                    f"mode nearest with coordinate_transformation_mode {coordinate_mode}; needs asymmetric"
                )
        else:
            if coordinate_mode == "pytorch_half_pixel" and out_h > 1 and out_w > 1:
                coordinate_mode = "half_pixel"  # identical when the output is larger than 1x1
            if not (coordinate_mode in ("half_pixel", "align_corners")
                    or (using_sizes and coordinate_mode == "asymmetric")):
                return Support.no(
                    f"mode linear with coordinate_transformation_mode "
                    f"{attr(node, 'coordinate_transformation_mode', 'half_pixel')}"
                    f"{' and scales' if coordinate_mode == 'asymmetric' else ''}; Core ML takes half_pixel, "
                    "align_corners, pytorch_half_pixel (output > 1x1) or asymmetric with sizes"
                )
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        """nearest (asymmetric, floor): upsample_nearest_neighbor by whole factors, else
        resize_nearest_neighbor; linear: resize_bilinear sampling half_pixel as UNALIGN_CORNERS,
        align_corners as STRICT_ALIGN_CORNERS and asymmetric as DEFAULT."""
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        in_h, in_w = b.shape(x)[-2:]
        out_shape = b.shape(y)
        out_h, out_w = out_shape[-2:]
        if None in (out_h, out_w):
            raise CompileError("the output's last 2 dims must be static")
        mb = b.mb
        if attr(node, "mode", "nearest") == "nearest":
            if in_h is not None and in_w is not None and out_h % in_h == 0 and out_w % in_w == 0:
                b.set(y, mb.upsample_nearest_neighbor(x=b.var(x), scale_factor_height=out_h // in_h,
                                                      scale_factor_width=out_w // in_w, name=b.name(y)))
            else:
                b.set(y, mb.resize_nearest_neighbor(x=b.var(x), target_size_height=out_h, target_size_width=out_w,
                                                    name=b.name(y)))
            return
        mode = attr(node, "coordinate_transformation_mode", "half_pixel")
        sampling = {"half_pixel": "UNALIGN_CORNERS", "pytorch_half_pixel": "UNALIGN_CORNERS",
                    "align_corners": "STRICT_ALIGN_CORNERS", "asymmetric": "DEFAULT"}.get(mode)
        if sampling is None:
            raise CompileError(f"coordinate_transformation_mode {mode} has no Core ML sampling mode")
        b.set(y, mb.resize_bilinear(x=b.var(x), target_size_height=out_h, target_size_width=out_w,
                                    sampling_mode=sampling, name=b.name(y)))

    @staticmethod
    def _axes(node, rank: int) -> list[int] | None:  # type: ignore[no-untyped-def]
        axes = attr(node, "axes")
        if not axes:
            return list(range(rank))
        result = [normalize_axis(int(a), rank) for a in axes]
        if any(a is None for a in result):
            return None
        return [int(a) for a in result]  # type: ignore[arg-type]


def _round_half_away(value: float) -> int:
    """C's llround: halves away from zero."""
    return int(math.floor(value + 0.5)) if value >= 0 else -int(math.floor(-value + 0.5))


def _dim(dim: int) -> str:
    return "dynamic" if dim == -1 else str(dim)
