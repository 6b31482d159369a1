"""Data-movement rules: reshape, flatten, squeeze, transpose, concat, slice, split, pad, gather, resize."""

from __future__ import annotations

import numpy as np
from nnapi_models import I32, I64, U8, at_api, model, node, qdq_unary, support

I64S = np.int64


# -- reshape.py ---------------------------------------------------------------------------------------------
def _reshape(shape, x_shape=(2, 3, 4), const=True, **attrs):
    if const:
        return model(node("Reshape", ["x", "s"], **attrs), {"x": list(x_shape)}, inits={"s": np.array(shape, I64S)},
                     opset=14)
    return model(node("Reshape", ["x", "s"], **attrs), {"x": list(x_shape), "s": ([len(shape)], I64)}, opset=14)


def test_reshape():
    assert support(_reshape([6, 4]), be=at_api(27))
    assert support(_reshape([0, -1]))
    assert support(_reshape([6, 4], const=False)).reason == "shape (input 1) is not a constant initializer"
    assert support(_reshape([6, 4], x_shape=(1, 1, 1, 2, 12))).reason == "input 0 has rank 5; needs rank 1–4"
    assert support(_reshape([0, -1], allowzero=1)).reason == \
        "shape[0] is 0 with allowzero=1 (an empty dim) is not supported"
    assert support(_reshape([0, 4], x_shape=(0, 4))).reason == \
        "shape[0] is 0 (copy the input dim) but the input dim is 0"
    assert "needs opset 5" in support(model(node("Reshape", ["x"], shape=[4]), {"x": [2, 2]}, opset=4)).reason


# -- flatten.py ---------------------------------------------------------------------------------------------
def test_flatten():
    assert support(model(node("Flatten", ["x"], axis=1), {"x": [2, 3, 4]}), be=at_api(27))
    assert support(model(node("Flatten", ["x"], axis=-1), {"x": [2, 3, 4]}))
    assert support(model(node("Flatten", ["x"]), {"x": [1, 1, 1, 1, 2]})).reason == \
        "input 0 has rank 5; needs rank 1–4"
    assert support(model(node("Flatten", ["x"], axis=1), {"x": [0, 3, 0]})).reason == \
        "input shape [0, 3, 0] flattens to [0,0]"


# -- squeeze.py ---------------------------------------------------------------------------------------------
def test_squeeze_and_unsqueeze():
    axes = {"axes": np.array([0], I64S)}
    assert support(model(node("Squeeze", ["x", "axes"]), {"x": [1, 3]}, inits=axes), be=at_api(28))
    assert support(model(node("Squeeze", ["x", "axes"]), {"x": [1, 3]}, inits=axes), be=at_api(27)).reason \
        .startswith("needs NNAPI feature level 2")
    assert support(model(node("Unsqueeze", ["x", "axes"]), {"x": [3]}, inits=axes), be=at_api(27))
    dynamic_axes = model(node("Squeeze", ["x", "axes"]), {"x": [1, 3], "axes": ([1], I64)})
    assert support(dynamic_axes).reason == "axes (input 1) is not a constant initializer"
    assert support(model(node("Unsqueeze", ["x", "axes"]), {"x": [3], "axes": ([1], I64)})).reason == \
        "axes (input 1) is not a constant initializer"
    assert support(model(node("Unsqueeze", ["x"], axes=[0]), {"x": [3]}, opset=11))
    assert support(model(node("Unsqueeze", ["x", "axes"]), {"x": []}, inits=axes)).reason == \
        "input 0 has rank 0; needs rank 1–4"
    assert support(model(node("Squeeze", ["x"]), {"x": [1, 1, 1, 1, 3]})).reason == \
        "input 0 has rank 5; needs rank 1–4"


# -- transpose.py -------------------------------------------------------------------------------------------
def test_transpose():
    m = model(node("Transpose", ["x"], perm=[0, 2, 3, 1]), {"x": [1, 3, 4, 4]})
    assert support(m, be=at_api(28))
    assert support(m, be=at_api(27)).reason.startswith("needs NNAPI feature level 2")
    assert support(model(node("Transpose", ["x"]), {"x": [1, 2, 3, 4, 5]})).reason == \
        "input 0 has rank 5; needs rank 1–4"
    ints = model(node("Transpose", ["x"], ["y"]), {"x": ([2, 3], I64)}, {"y": I64})
    assert support(ints).reason == "input 0 is int64; needs float32 or uint8"


def test_transpose_uint8_only_from_inside_the_partition():
    graph_input = model(node("Transpose", ["x"], ["y"]), {"x": ([2, 3], U8)}, {"y": U8})
    assert "uint8 input 0 is a graph input or initializer" in support(graph_input).reason
    nodes = [node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"), node("Transpose", ["q"], ["y"], name="t")]
    inside = model(nodes, {"x": [2, 3]}, {"y": U8}, {"s": np.float32(0.1), "z": np.uint8(0)})
    assert support(inside, "t")


# -- concat.py ----------------------------------------------------------------------------------------------
def test_concat():
    m = model(node("Concat", ["a", "b"], axis=1), {"a": [1, 2], "b": [1, 3]})
    assert support(m, be=at_api(27))
    assert support(model(node("Concat", ["a", "b"], axis=0), {"a": [1, 1, 1, 1, 2], "b": [1, 1, 1, 1, 2]})).reason \
        == "input 0 has rank 5; needs rank 1–4"
    ints = model(node("Concat", ["a", "b"], ["y"], axis=0), {"a": ([2], I32), "b": ([2], I32)}, {"y": I32})
    assert support(ints).reason == "input 0 is int32; needs float32 or uint8"


def test_concat_uint8_checks_every_input():
    nodes = [node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
             node("Concat", ["q", "u"], ["y"], name="cat", axis=0)]
    m = model(nodes, {"x": [2], "u": ([2], U8)}, {"y": U8}, {"s": np.float32(0.1), "z": np.uint8(0)})
    assert support(m, "cat").reason.startswith("uint8 input 1 is a graph input or initializer")


# -- slice.py -----------------------------------------------------------------------------------------------
def _slice(x_shape=(4, 4), with_axes=True, with_steps=True, dynamic=None):
    inits = {"starts": np.array([1], I64S), "ends": np.array([3], I64S), "axes": np.array([0], I64S),
             "steps": np.array([1], I64S)}
    names = ["x", "starts", "ends", "axes" if with_axes else "", "steps"] if with_steps else \
        ["x", "starts", "ends"] + (["axes"] if with_axes else [])
    inputs = {"x": list(x_shape)}
    if dynamic:
        del inits[dynamic]
        inputs[dynamic] = ([1], I64)
    return model(node("Slice", names), inputs, inits={k: v for k, v in inits.items() if k in names})


def test_slice():
    assert support(_slice(), be=at_api(28))
    assert support(_slice(with_axes=True, with_steps=False))
    assert support(_slice(), be=at_api(27)).reason.startswith("needs NNAPI feature level 2")
    assert support(_slice(dynamic="ends")).reason == "ends (input 2) is not a constant initializer"
    assert support(_slice(dynamic="steps")).reason == "steps (input 4) is not a constant initializer"
    assert support(_slice(x_shape=(0, 4))).reason == "input 0 has a zero dim [0, 4]"
    assert support(_slice(x_shape=(1, 1, 1, 1, 4))).reason == "input 0 has rank 5; needs rank ≤4"
    assert "needs opset 10" in support(model(node("Slice", ["x"], starts=[0], ends=[1]), {"x": [2]}, opset=9)).reason


def test_slice_axes_given_as_empty_name_is_rejected_like_ort():
    assert support(_slice(with_axes=False)).reason == \
        "axes (input 3) is given as an empty name, which ORT's NNAPI EP does not accept here"


# -- split.py -----------------------------------------------------------------------------------------------
def test_split_by_constant_sizes():
    two = ["y0", "y1"]
    m = model(node("Split", ["x", "split"], two, axis=1), {"x": [2, 6]}, two, {"split": np.array([3, 3], I64S)})
    assert support(m, be=at_api(29))
    assert support(m, be=at_api(28)).reason.startswith("needs NNAPI feature level 3")
    uneven = model(node("Split", ["x", "split"], two, axis=1), {"x": [2, 6]}, two, {"split": np.array([2, 4], I64S)})
    assert support(uneven).reason == "split [2, 4] has unequal parts; NNAPI splits into equal parts only"
    dynamic = model(node("Split", ["x", "split"], two, axis=1), {"x": [2, 6], "split": ([2], I64)}, two)
    assert support(dynamic).reason == "split (input 1) is not a constant initializer"


def test_split_by_number_of_outputs():
    three = ["y0", "y1", "y2"]
    assert support(model(node("Split", ["x"], three, axis=-1), {"x": [2, 6]}, three))
    assert support(model(node("Split", ["x"], three), {"x": [4, 2]}, three)).reason == \
        "the axis dim 4 is not divisible into 3 equal parts"
    assert support(model(node("Split", ["x"], three, num_outputs=3, axis=1), {"x": [2, 6]}, three, opset=18))
    assert "needs opset 13" in support(model(node("Split", ["x"], three), {"x": [6]}, three, opset=11)).reason


# -- pad.py -------------------------------------------------------------------------------------------------
def _pad(pads=(0, 1, 0, 1), mode="constant", value=True, x_shape=(2, 3)):
    inits = {"pads": np.array(pads, I64S)}
    names = ["x", "pads"]
    if value:
        inits["value"] = np.float32(0.5)
        names.append("value")
    return model(node("Pad", names, mode=mode), {"x": list(x_shape)}, inits=inits)


def test_pad():
    assert support(_pad(), be=at_api(29))
    assert support(_pad(value=False))
    assert support(_pad(), be=at_api(28)).reason.startswith("needs NNAPI feature level 3")
    assert support(_pad(mode="reflect")).reason == "mode reflect is not supported (constant only)"
    assert support(_pad(pads=(0, -1, 0, 1))).reason == \
        "pads [0, -1, 0, 1] has negative values (cropping is not supported)"
    assert support(_pad(x_shape=(0, 3))).reason == "input 0 has a zero dim [0, 3]"
    dynamic = model(node("Pad", ["x", "pads"]), {"x": [2, 3], "pads": ([4], I64)})
    assert support(dynamic).reason == "pads (input 1) is not a constant initializer"
    dynamic_value = model(node("Pad", ["x", "pads", "v"]), {"x": [2, 3], "v": []}, inits={"pads": np.zeros(4, I64S)})
    assert support(dynamic_value).reason == "constant_value (input 2) is not a constant initializer"


# -- gather.py ----------------------------------------------------------------------------------------------
def test_gather():
    const_idx = model(node("Gather", ["x", "i"], axis=0), {"x": [5, 3]}, inits={"i": np.array([0, 2], I64S)})
    assert support(const_idx, be=at_api(29))
    assert support(const_idx, be=at_api(28)).reason.startswith("needs NNAPI feature level 3")
    dynamic_int32 = model(node("Gather", ["x", "i"]), {"x": [5, 3], "i": ([2], I32)})
    assert support(dynamic_int32)
    dynamic_int64 = model(node("Gather", ["x", "i"]), {"x": [5, 3], "i": ([2], I64)})
    assert support(dynamic_int64).reason == \
        "indices (input 1) is not a constant initializer; only int32 indices may be computed at run time"
    assert support(model(node("Gather", ["x", "i"]), {"x": [0, 3], "i": ([2], I32)})).reason == \
        "data (input 0) has a zero dim [0, 3]"
    assert support(model(node("Gather", ["x", "i"]), {"x": [1, 1, 1, 1, 3], "i": ([2], I32)})).reason == \
        "data (input 0) has rank 5; needs rank 1–4"


# -- resize.py ----------------------------------------------------------------------------------------------
def _resize(scales=None, sizes=None, x_shape=(1, 3, 4, 4), opset=13, x_type=1, **attrs):
    inits = {"roi": np.zeros(0, np.float32)}
    names = ["x", "roi"]
    if scales is not None:
        inits["scales"] = np.array(scales, np.float32)
        names.append("scales")
    else:
        names.append("")
    if sizes is not None:
        inits["sizes"] = np.array(sizes, I64S)
        names.append("sizes")
    return model(node("Resize", names, ["y"], **attrs), {"x": (list(x_shape), x_type)}, {"y": x_type}, inits,
                 opset=opset)


NEAREST = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}


def test_resize_nearest_upsample():
    m = _resize(scales=[1, 1, 2, 2], **NEAREST)
    assert support(m, be=at_api(29))
    assert support(m, be=at_api(28)).reason == "needs NNAPI feature level 3 (Android API 29); target is API 28"


def test_resize_nearest_needs_asymmetric_floor():
    default = _resize(scales=[1, 1, 2, 2])  # nearest, half_pixel, round_prefer_floor
    assert support(default).reason == \
        "nearest mode with coordinate_transformation_mode half_pixel is not supported (asymmetric only)"
    rounding = _resize(scales=[1, 1, 2, 2], mode="nearest", coordinate_transformation_mode="asymmetric")
    assert support(rounding).reason == "nearest_mode round_prefer_floor is not supported (floor only)"


def test_resize_linear_coordinate_modes():
    half_pixel = _resize(scales=[1, 1, 2, 2], mode="linear")
    assert support(half_pixel, be=at_api(30))
    assert support(half_pixel, be=at_api(29)).reason == \
        "linear mode with half_pixel needs NNAPI feature level 4 (Android API 30); target is API 29"
    assert support(_resize(scales=[1, 1, 2, 2], mode="linear", coordinate_transformation_mode="asymmetric"),
                   be=at_api(29))
    pytorch = _resize(scales=[1, 1, 2, 2], mode="linear", coordinate_transformation_mode="pytorch_half_pixel")
    assert "pytorch_half_pixel is not supported" in support(pytorch).reason
    assert support(_resize(scales=[1, 1, 2, 2], mode="cubic")).reason == \
        "mode cubic is not supported (linear or nearest only)"


def test_resize_scales_and_sizes():
    assert support(_resize(sizes=[1, 3, 8, 8], **NEAREST))
    assert support(_resize(sizes=[1, 6, 8, 8], **NEAREST)).reason == \
        "sizes [1, 6, 8, 8] change N or C of the input [1, 3, 4, 4]; only H and W may change"
    assert "resize N or C" in support(_resize(scales=[2, 1, 2, 2], **NEAREST)).reason
    assert support(_resize(scales=[1, 1, 0.5, 0.5], **NEAREST))
    odd = _resize(scales=[1, 1, 0.5, 0.5], x_shape=(1, 3, 5, 5), **NEAREST)
    assert support(odd).reason == "downscaling by scales 0.5×0.5 must divide H and W (5×5) by integer factors"
    assert "by integer factors" in support(_resize(scales=[1, 1, 0.4, 0.4], x_shape=(1, 3, 5, 5), **NEAREST)).reason
    assert "by integer factors" in support(_resize(scales=[1, 1, 2, 0.5], x_shape=(1, 3, 4, 4), **NEAREST)).reason
    assert support(_resize(**NEAREST)).reason == "needs scales (input 2) or sizes (input 3)"


def test_resize_scales_must_be_constant():
    m = model(node("Resize", ["x", "", "scales"], **NEAREST), {"x": [1, 3, 4, 4], "scales": [4]})
    assert support(m).reason == "scales (input 2) is not a constant initializer"


def test_resize_opset_18_attributes():
    assert support(_resize(scales=[1, 1, 2, 2], opset=18, **NEAREST))
    assert support(_resize(scales=[1, 1, 2, 2], opset=18, antialias=1, **NEAREST)).reason == \
        "antialias=1 is not supported"
    assert support(_resize(sizes=[1, 3, 8, 8], opset=18, keep_aspect_ratio_policy="not_larger", **NEAREST)).reason \
        == "keep_aspect_ratio_policy not_larger is not supported (stretch only)"
    assert "needs opset 11" in support(_resize(scales=[1, 1, 2, 2], opset=10, **NEAREST)).reason


def test_resize_rank_and_exclude_outside():
    assert support(_resize(scales=[1, 2, 2], x_shape=(1, 4, 4), **NEAREST)).reason == "input 0 has rank 3; needs rank 4"
    assert support(_resize(scales=[1, 1, 2, 2], exclude_outside=1, **NEAREST)).reason == \
        "exclude_outside=1 is not supported"


def test_resize_uint8_feature_level_2_except_nchw():
    nodes = [node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
             node("Resize", ["q", "", "scales"], ["y"], name="resize", **NEAREST)]
    nhwc = model(nodes, {"x": [1, 4, 4, 3]}, {"y": U8},
                 {"s": np.float32(0.1), "z": np.uint8(0), "scales": np.array([1, 2, 2, 1], np.float32)})
    assert support(nhwc, "resize")
    nchw = model(nodes, {"x": [1, 3, 4, 4]}, {"y": U8},
                 {"s": np.float32(0.1), "z": np.uint8(0), "scales": np.array([1, 1, 2, 2], np.float32)})
    assert support(nchw, "resize")
    # on API 28 the QuantizeLinear is not taken, so the uint8 input would come from outside the partition
    assert "which NNAPI does not take" in support(nhwc, "resize", be=at_api(28)).reason


def test_resize_nchw_uint8_needs_feature_level_3():
    # a QDQ Resize unit keeps its input quantized: uint8 needs only feature level 2, but NCHW needs 3
    nchw = qdq_unary("Resize", extra_inputs=["", "scales"], extra_inits={"scales": np.array([1, 1, 2, 2], np.float32)},
                     **NEAREST)
    assert support(nchw, "target", be=at_api(28)).reason == \
        "an NCHW resize (scale or size of dim 1 matching C) needs NNAPI feature level 3 (Android API 29); target is API 28"
    nhwc = qdq_unary("Resize", shape=(1, 4, 4, 3), extra_inputs=["", "scales"],
                     extra_inits={"scales": np.array([1, 2, 2, 1], np.float32)}, **NEAREST)
    assert support(nhwc, "target", be=at_api(28))
