"""Resize, Upsample and GridSample (``resize_op_builder.cc``, ``upsample_op_builder.cc``,
``simple_op_builder.cc``): QNN Resize/ResizeNearestNeighbor/ResizeBilinear to the static output shape."""

from __future__ import annotations

from ._base import FLOATS, NHWC_REFUSED_INTS, SUPPORTED, QnnRule, Support, attr, nhwc_plain_integer


class Resize(QnnRule):
    op_types = ("Resize",)
    input_types = {0: FLOATS | NHWC_REFUSED_INTS}

    def check(self, unit, ctx):
        """nearest, linear or cubic (given by scales or sizes); no antialias, no tf_crop_and_resize, no
        half_pixel_symmetric, no exclude_outside (the EP takes it, computing a wrong result); nearest: at rank 4 not
        round_prefer_floor or ceil with asymmetric coordinates, at other ranks floor (half_pixel, asymmetric) or
        round_prefer_ceil (align_corners) only; tf_half_pixel_for_nn with floor at rank 4 only; cubic with constant
        scales equal to the output's sizes over the input's; a plain int32, int8 or uint8 input fails the session."""
        answer = self._modes(unit, ctx)
        return nhwc_plain_integer(unit, ctx) if answer else answer

    def _modes(self, unit, ctx) -> Support:
        node = unit.target
        mode = attr(node, "mode", "nearest")
        transform = attr(node, "coordinate_transformation_mode", "half_pixel")
        if attr(node, "antialias", 0):
            return Support.no("antialias=1: QNN's Resize has no antialiasing")
        if transform in ("tf_crop_and_resize", "half_pixel_symmetric"):
            return Support.no(f"coordinate_transformation_mode={transform}: QNN's Resize has no such mode")
        if attr(node, "exclude_outside", 0):
            return Support.no("exclude_outside=1: onnxruntime-qnn 2.7 takes it (cubic) but computes as without it (on the "
                              "HTP simulator 7% of the output's scale off the CPU's result): left to the CPU")
        if transform == "tf_half_pixel_for_nn" and mode != "nearest":
            return Support.no(f"mode={mode} with tf_half_pixel_for_nn coordinates: the QNN EP takes that mode with "
                              "nearest only")
        if mode == "cubic":
            answer = _cubic_scales(node, ctx)
            if not answer:
                return answer
        if mode == "nearest":
            answer = _nearest(attr(node, "nearest_mode", "round_prefer_floor"), transform, ctx.rank(node.inputs[0]))
            if not answer:
                return answer
        return SUPPORTED


def _cubic_scales(node, ctx) -> Support:
    """Cubic Resize given by scales: constant scales, each the output's size over the input's (the HTP's Resize
    works the scale out from the shapes)."""
    given = node.inputs[2] if len(node.inputs) > 2 else None
    scales = ctx.constant(given) if given is not None else None
    if given is not None and scales is None and ctx.static_shape(given) != (0,):
        return Support.no("cubic with scales the graph computes or reads: the QNN EP takes cubic Resize only with "
                          "constant scales")
    source, result = ctx.static_shape(node.inputs[0]), ctx.static_shape(node.outputs[0])
    if scales is None or not scales.size or source is None or result is None or len(scales) != len(source):
        return SUPPORTED
    for axis, (scale, size, out) in enumerate(zip(scales.reshape(-1).tolist(), source, result, strict=True)):
        if abs(scale - out / size) > 1e-5:
            return Support.no(f"cubic with scale {scale:g} on axis {axis} for {size} -> {out}: the QNN EP takes cubic "
                              "Resize only when each scale is the output's size over the input's")
    return SUPPORTED


class GridSample(QnnRule):
    op_types = ("GridSample",)

    def check(self, unit, ctx):
        """4-D, bilinear or nearest."""
        node = unit.target
        if attr(node, "mode", "linear") in ("cubic", "bicubic"):
            return Support.no("cubic mode: QNN's GridSample is bilinear or nearest")
        rank = ctx.rank(node.inputs[0])
        if rank != 4:
            return Support.no(f"rank-{rank} input: QNN's GridSample is 2-D")
        return SUPPORTED


#: Nearest-neighbour modes (nearest_mode, coordinate_transformation_mode) the HTP takes, by rank: rank 4 (QNN's
#: ResizeNearestNeighbor) refuses rounding half down or ceil with asymmetric coordinates; other ranks (QNN's
#: Resize) take floor with half_pixel or asymmetric and round_prefer_ceil with align_corners.
_NEAREST_REFUSED_RANK4 = {("round_prefer_floor", "asymmetric"), ("ceil", "asymmetric")}
_NEAREST_TAKEN_OTHER_RANKS = {("floor", "half_pixel"), ("floor", "asymmetric"), ("round_prefer_ceil", "align_corners")}


def _nearest(nearest_mode: str, transform: str, rank: int | None) -> Support:
    if transform == "tf_half_pixel_for_nn" and (rank != 4 or nearest_mode != "floor"):
        return Support.no(f"nearest_mode={nearest_mode} with tf_half_pixel_for_nn coordinates at rank {rank}: the QNN EP "
                          "takes tf_half_pixel_for_nn with floor at rank 4 only")
    if rank == 4:
        if (nearest_mode, transform) in _NEAREST_REFUSED_RANK4:
            return Support.no(f"nearest_mode={nearest_mode} with {transform} coordinates: the HTP's "
                              "ResizeNearestNeighbor refuses it")
        return SUPPORTED
    if (nearest_mode, transform) == ("floor", "align_corners"):
        return Support.no(f"nearest_mode=floor with align_corners coordinates at rank {rank}: onnxruntime-qnn 2.7 "
                          "takes it, then refuses it in NHWC layout and fails the session")
    if (nearest_mode, transform) not in _NEAREST_TAKEN_OTHER_RANKS:
        return Support.no(f"nearest_mode={nearest_mode} with {transform} coordinates at rank {rank}: the HTP's Resize "
                          "refuses it (at rank 3 or 5 it takes floor with half_pixel or asymmetric coordinates, "
                          "round_prefer_ceil with align_corners; no pytorch_half_pixel)")
    return SUPPORTED
