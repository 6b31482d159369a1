"""pad.py, reshape.py, resize.py, shape.py, slice.py, softmax.py, split.py, squeeze.py, tile.py."""

from __future__ import annotations

import numpy as np
import pytest
from coreml_testing import BOTH, F16, I32, I64, MLP, NN, B, const, coreml, i64, no, single, x, yes


# -- pad.py ---------------------------------------------------------------------------------------------
def _pad(pads, shape=(1, 3, 4, 4), mode="constant", value=True, axes=None, elem_type=None, opset=18):
    inputs = [x(shape, elem_type or 1), i64("p", pads)]
    if value is True:
        inputs.append(const("v", 0.0))
    elif value is not None:
        inputs.append(value)
    elif axes is not None:
        inputs.append(None)
    if axes is not None:
        inputs.append(i64("axes", axes))
    return single("Pad", inputs, opset=opset, mode=mode)


@BOTH
def test_pad_last_two_dims(backend):
    yes(_pad([0, 0, 1, 1, 0, 0, 1, 1]), backend)
    yes(_pad([1, 1, 1, 1], axes=[2, 3], value=True), backend)


@BOTH
def test_pad_conditions_both_formats(backend):
    no(_pad([0, 0, -1, 0, 0, 0, 0, 0]), backend, "negative pads")
    no(single("Pad", [x(), x((8,), I64, "p"), const("v", 0.0)]), backend, "pads (input 1) is not an initializer")
    no(_pad([0, 0, 1, 1, 0, 0, 1, 1], opset=10), backend, "takes it from opset 11")
    no(_pad([1, 1], shape=(), value=True, axes=None), backend, "the input is a scalar")


def test_pad_neuralnetwork():
    no(_pad([0, 1, 0, 0, 0, 1, 0, 0]), NN, "NeuralNetwork: pads on axis 1; only the last 2 dims may be padded")
    no(_pad([1, 1], shape=(4,)), NN, "NeuralNetwork: rank-1 input; needs rank >= 2")
    no(_pad([0, 0, 1, 1, 0, 0, 1, 1], value=None), NN, "NeuralNetwork: constant_value (input 2) must be given")
    no(_pad([0, 0, 1, 1, 0, 0, 1, 1], mode="reflect"), NN, "mode reflect; NeuralNetwork takes constant")
    no(_pad([0, 0, 1, 1, 0, 0, 1, 1], elem_type=F16, value=const("v", 0.0, np.float16)), NN,
       "data (input 0) is float16; NeuralNetwork takes float32 only")


def test_pad_mlprogram():
    yes(_pad([0, 1, 0, 0, 0, 1, 0, 0]), MLP)  # constant mode pads any dim
    yes(_pad([1, 1], shape=(4,)), MLP)
    yes(_pad([0, 0, 1, 1, 0, 0, 1, 1], value=None), MLP)  # constant_value defaults to 0
    yes(_pad([0, 0, 1, 1, 0, 0, 1, 1], mode="reflect", value=None), MLP)
    yes(_pad([0, 0, 1, 1, 0, 0, 1, 1], elem_type=F16, value=const("v", 0.0, np.float16)), MLP)
    no(_pad([0, 0, 1, 1, 0, 0, 1, 1], mode="edge"), MLP, "mode edge; ML Program takes constant or reflect")
    no(_pad([0, 0, 1, 1, 0, 0, 1, 1], elem_type=I64, value=i64("v", 0)), MLP,
       "data (input 0) is int64; ML Program takes float32 or float16")


def test_pad_reflect_limits():
    no(_pad([0, 1, 1, 1, 0, 1, 1, 1], mode="reflect", value=None), MLP, "mode reflect: pads on axis 1")
    no(_pad([0, 0, 4, 1, 0, 0, 1, 1], mode="reflect", value=None), MLP, "reflect pads [4, 1] on axis 2 of size 4")
    no(_pad([0, 0, 1, 1, 0, 0, 1, 1], shape=("N", 3, 4, 4), mode="reflect", value=None), MLP,
       "on axis 0 of size dynamic")


def test_pad_axes_must_be_an_initializer():
    m = single("Pad", [x(), i64("p", [1, 1, 1, 1]), const("v", 0.0), x((2,), I64, "axes")], opset=18)
    no(m, MLP, "axes (input 3) is not an initializer")


# -- reshape.py ---------------------------------------------------------------------------------------
@BOTH
def test_reshape(backend):
    yes(single("Reshape", [x((2, 3, 4)), i64("s", [6, -1])]), backend)
    yes(single("Reshape", [x((2, 3, 4)), i64("s", [0, 12])], allowzero=0), backend)


@BOTH
def test_reshape_conditions(backend):
    no(single("Reshape", [x((2, 3, 4)), x((2,), I64, "s")]), backend, "shape (input 1) is not a constant initializer")
    no(single("Reshape", [x(("N", 3, 4)), i64("s", [-1, 12])]), backend, "the input shape [N,3,4] is not static")
    no(single("Reshape", [x(()), i64("s", [1])]), backend, "the input is a scalar")
    no(single("Reshape", [x((64,)), i64("s", [2] * 6)]), backend, "new shape has 6 dims; Core ML takes rank <= 5")
    no(single("Reshape", [x((2, 3, 4)), i64("s", [0, 12])], allowzero=1), backend, "allowzero=1 with a 0 in shape")
    no(single("Reshape", [x((2, 3, 4)), i64("s", [24])], opset=4), backend, "takes it from opset 5")


# -- resize.py ----------------------------------------------------------------------------------------
def _resize(shape=(1, 3, 4, 4), scales=None, sizes=None, opset=18, **attrs):
    inputs = [x(shape), None]
    inputs.append(const("scales", scales) if scales is not None else None)
    if sizes is not None:
        inputs.append(i64("sizes", sizes))
    while inputs[-1] is None:
        inputs.pop()
    return single("Resize", inputs, opset=opset, **attrs)


NEAREST = {"mode": "nearest", "nearest_mode": "floor", "coordinate_transformation_mode": "asymmetric"}


@BOTH
def test_resize_nearest_upsample(backend):
    yes(_resize(scales=[1, 1, 2, 2], **NEAREST), backend)
    yes(_resize(sizes=[1, 3, 8, 12], **NEAREST), backend)


@BOTH
def test_resize_common_conditions(backend):
    no(_resize(scales=[1, 1, 2, 2], mode="cubic"), backend, "mode cubic")
    no(_resize(scales=[1, 1, 2, 2], mode="nearest"), backend, "nearest_mode round_prefer_floor; Core ML takes floor only")
    no(_resize(scales=[1, 1, 2, 2], antialias=1, **NEAREST), backend, "antialias=1")
    no(_resize(scales=[1, 1, 2, 2], exclude_outside=1, **NEAREST), backend, "exclude_outside=1")
    no(_resize(sizes=[1, 3, 8, 8], keep_aspect_ratio_policy="not_larger", **NEAREST), backend,
       "keep_aspect_ratio_policy not_larger")
    no(_resize(scales=[1, 2, 2, 2], **NEAREST), backend, "scale 2 on axis 1; Core ML resizes only the last 2 dims")
    no(_resize(sizes=[2, 3, 8, 8], **NEAREST), backend, "size 2 for axis 0 of size 1")
    no(_resize(scales=[1, 1, 1.5, 2], **NEAREST), backend, "H scale 1.5 is not a whole number")
    no(_resize(scales=[1, 1, 2, 0.5], **NEAREST), backend, "both must upsample or both downsample")
    no(_resize(**NEAREST), backend, "neither scales nor sizes is given")
    no(single("Resize", [x(), None, x((4,), 1, "scales")], opset=18, **NEAREST), backend,
       "scales (input 2) is not a constant initializer")
    no(_resize(scales=[1, 1, 2, 2], opset=10), backend, "takes it from opset 11")


@BOTH
def test_resize_empty_roi_and_scales_are_fine_but_empty_input_is_not(backend):
    m = single("Resize", [x(), const("roi", np.zeros(0)), const("scales", np.zeros(0)), i64("sizes", [1, 3, 8, 8])],
               opset=13, **NEAREST)
    yes(m, backend)
    no(_resize(shape=(1, 0, 4, 4), scales=[1, 1, 2, 2], **NEAREST), backend, "the input has a 0 dim")


def test_resize_scales_need_static_hw():
    no(_resize(shape=(1, 3, "H", 4), scales=[1, 1, 2, 2], **NEAREST), MLP, "scales need the input's last 2 dims")


def test_resize_rank():
    m = _resize(shape=(1, 4, 4), scales=[1, 2, 2], **NEAREST)
    yes(m, MLP)
    no(m, NN, "NeuralNetwork: rank-3 input; needs rank 4")
    no(_resize(shape=(4, 4), scales=[2, 2], **NEAREST), MLP, "rank-2 input; ML Program takes rank 3 to 5")


def test_resize_downsample():
    m = _resize(scales=[1, 1, 0.5, 0.5], **NEAREST)
    yes(m, MLP)
    no(m, NN, "NeuralNetwork: downsampling is not supported")
    no(_resize(shape=(1, 3, 6, 6), scales=[1, 1, 0.25, 0.25], **NEAREST), MLP,
       "1/scale must be a whole factor of 6")
    # ORT checks both H and W against (0, 1): an unchanged H fails the factor test
    no(_resize(scales=[1, 1, 1, 0.5], **NEAREST), MLP, "downsampling H by scale 1")


def test_resize_neuralnetwork_sizes():
    no(_resize(sizes=[1, 3, 6, 8], **NEAREST), NN, "output H 6 is not a multiple of the input's 4")
    no(_resize(shape=("N", 3, 4, 4), sizes=[1, 3, 8, 8], **NEAREST), NN, "size 1 for axis 0 of size dynamic")
    yes(_resize(sizes=[1, 3, 6, 8], **NEAREST), MLP)


def test_resize_coordinate_modes():
    linear = {"mode": "linear"}
    for mode in ("half_pixel", "align_corners", "pytorch_half_pixel"):
        yes(_resize(scales=[1, 1, 2, 2], coordinate_transformation_mode=mode, **linear), MLP)
        no(_resize(scales=[1, 1, 2, 2], coordinate_transformation_mode=mode, **linear), NN,
           f"NeuralNetwork: coordinate_transformation_mode {mode}; only asymmetric")
    yes(_resize(scales=[1, 1, 2, 2], coordinate_transformation_mode="asymmetric", **linear), NN)
    yes(_resize(sizes=[1, 3, 8, 8], coordinate_transformation_mode="asymmetric", **linear), MLP)
    no(_resize(scales=[1, 1, 2, 2], coordinate_transformation_mode="asymmetric", **linear), MLP,
       "coordinate_transformation_mode asymmetric and scales")
    no(_resize(sizes=[1, 3, 1, 1], shape=(1, 3, 1, 1), coordinate_transformation_mode="pytorch_half_pixel",
               **linear), MLP, "pytorch_half_pixel")
    no(_resize(scales=[1, 1, 2, 2], mode="nearest", nearest_mode="floor",
               coordinate_transformation_mode="half_pixel"), MLP, "mode nearest with coordinate_transformation_mode half_pixel")


# -- shape.py -------------------------------------------------------------------------------------------
@BOTH
def test_shape(backend):
    yes(single("Shape", [x()]), backend)


def test_shape_types():
    yes(single("Shape", [x((2, 3), I32)]), MLP)
    no(single("Shape", [x((2, 3), I32)]), NN, "the input is int32; NeuralNetwork takes float32 only")
    no(single("Shape", [x((2, 3), B)]), MLP, "the input is bool")


def test_shape_slicing():
    m = single("Shape", [x()], opset=15, start=1, end=3)
    yes(m, MLP)
    no(m, NN, "NeuralNetwork: start/end slicing is not supported")
    no(single("Shape", [x()], opset=15, start=2, end=2), MLP, "select no dims")
    no(single("Shape", [x()], opset=15, end=4), MLP, "end=4 is outside [-4, 3]; ORT's CoreML EP throws on it")
    no(single("Shape", [x()], opset=15, start=-5), MLP, "start=-5 is outside [-4, 3]")
    no(single("Shape", [x(())]), MLP, "a scalar input; ORT's ML Program builder throws on it")
    yes(single("Shape", [x(())]), NN)


# -- slice.py ---------------------------------------------------------------------------------------------
def _slice(starts, ends, axes=None, steps=None, shape=(4, 6), elem_type=1, opset=13):
    inputs = [x(shape, elem_type), i64("s", starts), i64("e", ends)]
    if axes is not None or steps is not None:
        inputs.append(i64("a", axes) if axes is not None else None)
    if steps is not None:
        inputs.append(i64("t", steps))
    return single("Slice", inputs, opset=opset)


@BOTH
def test_slice(backend):
    yes(_slice([1], [3], [1]), backend)
    yes(_slice([-1], [-100], [1], [-1]), backend)
    yes(_slice([0, 0], [2**62, 2**62]), backend)
    yes(_slice([1], [3], [1], elem_type=I64), backend)


@BOTH
def test_slice_conditions(backend):
    no(_slice([3], [1], [1]), backend, "axis 1 is sliced to an empty range")
    no(_slice([10], [20], [1]), backend, "axis 1 is sliced to an empty range")
    no(_slice([1], [3], [1], shape=("N", 6)), backend, "data shape [N,6] is not static")
    no(single("Slice", [x((4, 6)), x((1,), I64, "s"), i64("e", [3])], opset=13), backend,
       "starts (input 1) is not a constant initializer")
    no(single("Slice", [x((4, 6)), i64("s", [0]), i64("e", [3]), x((1,), I64, "a")], opset=13), backend,
       "axes (input 3) is not a constant initializer")
    no(_slice([0], [3], [1], [0]), backend, "a step is 0")
    no(_slice([0, 0], [1, 1], [1, 1]), backend, "axis 1 is repeated")
    no(_slice([1], [3], [1], opset=9), backend, "takes it from opset 10")
    no(_slice([1], [3], [1], elem_type=I32), backend, "data is int32; Core ML's slice takes float32 or int64")


def test_slice_float16():
    m = _slice([1], [3], [1], elem_type=F16)
    no(m, NN, "data is float16; Core ML's slice takes float32 or int64 (ML Program also takes float16)")
    no(m, MLP, "float16 data needs Core ML 6")
    yes(m, coreml(deployment_target="iOS16"))


# -- softmax.py ---------------------------------------------------------------------------------------------
@BOTH
def test_softmax(backend):
    yes(single("Softmax", [x(("N", 10))]), backend)
    yes(single("Softmax", [x((2, 10))], opset=11), backend)
    no(single("Softmax", [x(("N", 10))], opset=11), backend, "dynamic input shape [N,10] before opset 13")


# -- split.py -----------------------------------------------------------------------------------------------
@BOTH
def test_split_sizes_input(backend):
    yes(single("Split", [x((6, 4)), i64("s", [2, 4])], ["a", "b"]), backend)
    no(single("Split", [x((6, 4)), i64("s", [2, 3])], ["a", "b"]), backend, "sizes [2, 3] sum to 5, not the dim 6")
    no(single("Split", [x((6, 4)), i64("s", [0, 6])], ["a", "b"]), backend, "include a size <= 0")
    no(single("Split", [x((6, 4)), i64("s", [6])], ["a"]), backend, "split has 1 size")
    no(single("Split", [x(("N", 4)), i64("s", [2, 4])], ["a", "b"]), backend, "the split axis dim is dynamic")
    no(single("Split", [x((6, 4)), x((2,), I64, "s")], ["a", "b"]), backend, "split (input 1) is not a constant")


@BOTH
def test_split_attribute_before_opset_13(backend):
    yes(single("Split", [x((6, 4))], ["a", "b"], opset=11, split=[2, 4]), backend)
    no(single("Split", [x((6, 4))], ["a", "b"], opset=11, split=[2, 2]), backend, "split attribute sizes [2, 2]")


@BOTH
def test_split_even(backend):
    yes(single("Split", [x((6, 4))], ["a", "b", "c"], opset=13), backend)
    no(single("Split", [x((6, 4))], ["a", "b", "c", "d"], opset=13), backend, "dim 6 does not divide evenly")
    no(single("Split", [x(("N", 4))], ["a", "b"], opset=13), backend, "the split axis dim is dynamic")
    no(single("Split", [x((6, 4))], ["a"], opset=13), backend, "1 output; Core ML's split needs >= 2")


@BOTH
def test_split_num_outputs_opset_18(backend):
    yes(single("Split", [x((6, 4))], ["a", "b"], opset=18, num_outputs=2), backend)
    no(single("Split", [x((6, 4))], ["a"], opset=18, num_outputs=1), backend, "num_outputs=1")
    no(single("Split", [x(("N", 4))], ["a", "b"], opset=18, num_outputs=2), backend, "split dim of dynamic size")


# -- squeeze.py ---------------------------------------------------------------------------------------------
@BOTH
def test_squeeze(backend):
    yes(single("Squeeze", [x((1, 3, 1)), i64("a", [0])]), backend)
    yes(single("Squeeze", [x((1, 3, 1))]), backend)
    yes(single("Squeeze", [x((1, 3, 1))], opset=11, axes=[0]), backend)
    no(single("Squeeze", [x((1, 3, 1)), x((1,), I64, "a")]), backend, "axes (input 1) is not a constant initializer")


def test_unsqueeze():
    m = single("Unsqueeze", [x((3, 4)), i64("a", [0])])
    yes(m, MLP)
    no(m, NN, "needs the ML Program format")
    no(single("Unsqueeze", [x((3, 4)), x((1,), I64, "a")]), MLP, "axes (input 1) is not a constant initializer")
    no(single("Unsqueeze", [x((1, 2, 3, 4)), i64("a", [0, 1])]), MLP, "output rank 6; Core ML takes rank <= 5")
    no(single("Unsqueeze", [x((1, 2, 3, 4))], opset=11, axes=[0, 1]), MLP, "output rank 6")
    yes(single("Unsqueeze", [x((2, 3, 4))], opset=11, axes=[0, 1]), MLP)


# -- tile.py ------------------------------------------------------------------------------------------------
@BOTH
@pytest.mark.parametrize("elem_type", [1, I32, I64, B])
def test_tile_types(backend, elem_type):
    yes(single("Tile", [x((2, 3), elem_type), i64("r", [2, 1])]), backend)


def test_tile_float16_needs_mlprogram_and_coreml6():
    m = single("Tile", [x((2, 3), F16), i64("r", [2, 1])])
    no(m, NN, "input is float16; NeuralNetwork takes float32, int32, int64 or bool")
    no(m, MLP, "float16 input needs Core ML 6")
    yes(m, coreml(deployment_target="iOS16"))


def test_tile_repeats():
    dynamic = single("Tile", [x((2, 3)), x((2,), I64, "r")])
    yes(dynamic, MLP)
    no(dynamic, NN, "NeuralNetwork: repeats (input 1) is not a constant initializer")
    no(single("Tile", [x((2, 3)), i64("r", [2, 0])]), MLP, "repeats [2, 0]; each must be >= 1")
    no(single("Tile", [x((2, 3)), i64("r", [2, 1, 1])]), MLP, "3 repeats for a rank-2 input")
    no(single("Tile", [x((2, 3), 11), i64("r", [2, 1])]), MLP, "input is float64")
