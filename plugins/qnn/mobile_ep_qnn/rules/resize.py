"""Resize, Upsample and GridSample (``resize_op_builder.cc``, ``upsample_op_builder.cc``,
``simple_op_builder.cc``): QNN Resize/ResizeNearestNeighbor/ResizeBilinear to the static output shape."""

from __future__ import annotations

from ._base import SUPPORTED, QnnRule, Support, attr


class Resize(QnnRule):
    op_types = ("Resize",)

    def check(self, unit, ctx):
        """nearest or linear; cubic only given sizes; no antialias, no tf_crop_and_resize, no half_pixel_symmetric,
        no exclude_outside."""
        node = unit.target
        mode = attr(node, "mode", "nearest")
        transform = attr(node, "coordinate_transformation_mode", "half_pixel")
        if attr(node, "antialias", 0):
            return Support.no("antialias=1: QNN's Resize has no antialiasing")
        if transform in ("tf_crop_and_resize", "half_pixel_symmetric"):
            return Support.no(f"coordinate_transformation_mode={transform}: QNN's Resize has no such mode")
        if attr(node, "exclude_outside", 0):
            return Support.no("exclude_outside=1: QNN's Resize does not take it")
        if mode == "cubic":
            sizes = node.inputs[3] if len(node.inputs) > 3 else None
            if sizes is None:
                return Support.no("cubic given by scales: the QNN HTP's validation refuses it (given by sizes it "
                                  "is taken)")
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
