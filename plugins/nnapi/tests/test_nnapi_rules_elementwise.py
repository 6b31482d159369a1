"""Elementwise rules: unary, binary, prelu, relu, leakyrelu, elu, clip, cast, identity, minmax, qlinear."""

from __future__ import annotations

import numpy as np
import pytest
from nnapi_models import F16, I8, I32, I64, U8, at_api, model, node, support


# -- unary.py ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Abs", "Exp", "Floor", "Log", "Neg", "Sigmoid", "Sin", "Sqrt", "Tanh"])
def test_unary_ops_are_supported_on_api_31(op):
    assert support(model(node(op, ["x"]), {"x": [1, 3, 4, 4]}))


@pytest.mark.parametrize(("op", "api_ok", "api_too_low"), [("Abs", 29, 28), ("Sqrt", 29, 28), ("Floor", 27, None),
                                                           ("Tanh", 27, None), ("Sigmoid", 27, None)])
def test_unary_feature_levels(op, api_ok, api_too_low):
    m = model(node(op, ["x"]), {"x": [2, 3]})
    assert support(m, be=at_api(api_ok))
    if api_too_low:
        assert support(m, be=at_api(api_too_low)).reason == \
            "needs NNAPI feature level 3 (Android API 29); target is API 28"


def test_sigmoid_rank_1_to_4():
    assert support(model(node("Sigmoid", ["x"]), {"x": [2]}))
    assert support(model(node("Sigmoid", ["x"]), {"x": [1, 2, 3, 4, 5]})).reason == "input 0 has rank 5; needs rank 1–4"
    assert support(model(node("Sigmoid", ["x"]), {"x": []})).reason == "input 0 has rank 0; needs rank 1–4"
    # other unary ops take any rank
    assert support(model(node("Tanh", ["x"]), {"x": [1, 2, 3, 4, 5]}))


def test_unary_needs_opset_6_and_float():
    assert support(model(node("Abs", ["x"]), {"x": [2]}, opset=5)).reason == \
        "opset 5 is not supported (needs opset 6 or later)"
    assert support(model(node("Abs", ["x"], ["y"]), {"x": ([2], I32)}, {"y": I32})).reason == \
        "input 0 is int32; needs float32"
    assert support(model(node("Exp", ["x"], ["y"]), {"x": ([2], F16)}, {"y": F16})).reason == \
        "input 0 is float16; needs float32"


# -- binary.py --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow"])
def test_binary_ops_with_broadcast(op):
    assert support(model(node(op, ["a", "b"]), {"a": [1, 3, 4, 4], "b": [4]}))


@pytest.mark.parametrize(("op", "level", "api"), [("Sub", 2, 28), ("Div", 2, 28), ("Pow", 3, 29)])
def test_binary_feature_levels(op, level, api):
    m = model(node(op, ["a", "b"]), {"a": [2, 2], "b": [2, 2]})
    assert support(m, be=at_api(api))
    assert support(m, be=at_api(api - 1)).reason == \
        f"needs NNAPI feature level {level} (Android API {api}); target is API {api - 1}"
    assert support(model(node("Add", ["a", "b"]), {"a": [2], "b": [2]}), be=at_api(27))


def test_binary_rank_limit_applies_to_both_inputs():
    assert support(model(node("Add", ["a", "b"]), {"a": [1, 1, 1, 1, 2], "b": [2]})).reason == \
        "input 0 has rank 5; needs rank ≤4"
    assert support(model(node("Mul", ["a", "b"]), {"a": [2], "b": [1, 1, 1, 1, 2]})).reason == \
        "input 1 has rank 5; needs rank ≤4"


def test_binary_opset_and_types():
    assert "needs opset 7" in support(model(node("Add", ["a", "b"]), {"a": [2], "b": [2]}, opset=6)).reason
    m = model(node("Add", ["a", "b"], ["y"]), {"a": ([2], I64), "b": ([2], I64)}, {"y": I64})
    assert support(m).reason == "input 0 is int64; needs float32"


def test_pow_needs_both_inputs_float32():
    m = model(node("Pow", ["a", "b"]), {"a": [2], "b": ([2], I32)})
    assert support(m).reason == "inputs are float32 and int32; both must be float32"


def test_plain_add_on_uint8_is_not_quantized():
    m = model(node("Add", ["a", "b"], ["y"]), {"a": ([2], U8), "b": ([2], U8)}, {"y": U8})
    assert support(m).reason == "input 0 is uint8; needs float32"


# -- prelu.py ---------------------------------------------------------------------------------------------
def test_prelu():
    slope = np.full((3, 1, 1), 0.1, np.float32)
    m = model(node("PRelu", ["x", "slope"]), {"x": [1, 3, 4, 4]}, inits={"slope": slope})
    assert support(m)
    assert support(m, be=at_api(28)).reason.startswith("needs NNAPI feature level 3")
    m5 = model(node("PRelu", ["x", "slope"]), {"x": [1, 1, 3, 4, 4]}, inits={"slope": slope})
    assert support(m5).reason == "input 0 has rank 5; needs rank ≤4"


# -- relu.py / elu.py / identity.py ------------------------------------------------------------------------
def test_relu_has_only_the_common_checks():
    assert support(model(node("Relu", ["x"]), {"x": [1, 2, 3, 4, 5, 6]}), be=at_api(27))
    assert support(model(node("Relu", ["x"], ["y"]), {"x": ([2], I32)}, {"y": I32})).reason == \
        "input 0 is int32; needs float32"


def test_elu_needs_feature_level_4():
    m = model(node("Elu", ["x"], alpha=0.5), {"x": [2, 2]})
    assert support(m, be=at_api(30))
    assert support(m, be=at_api(29)).reason == "needs NNAPI feature level 4 (Android API 30); target is API 29"
    assert "needs opset 6" in support(model(node("Elu", ["x"]), {"x": [2]}, opset=1), be=at_api(30)).reason


def test_identity_takes_float_only():
    assert support(model(node("Identity", ["x"]), {"x": [2, 3]}))
    assert support(model(node("Identity", ["x"], ["y"]), {"x": ([2], I64)}, {"y": I64})).reason == \
        "input 0 is int64; needs float32"


# -- leakyrelu.py ------------------------------------------------------------------------------------------
def test_leaky_relu():
    assert support(model(node("LeakyRelu", ["x"], alpha=0.1), {"x": [1, 8]}), be=at_api(27))
    assert support(model(node("LeakyRelu", ["x"]), {"x": [1, 1, 1, 1, 8]})).reason == \
        "input 0 has rank 5; needs rank 1–4"
    assert support(model(node("LeakyRelu", ["x"]), {"x": []})).reason == "input 0 has rank 0; needs rank 1–4"


# -- clip.py -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("low", "high"), [(0.0, 6.0), (-1.0, 1.0)])
def test_clip_relu6_and_relu1(low, high):
    m = model(node("Clip", ["x", "lo", "hi"]), {"x": [1, 4]},
              inits={"lo": np.float32(low), "hi": np.float32(high)})
    assert support(m)
    old = model(node("Clip", ["x"], min=low, max=high), {"x": [1, 4]}, opset=6)
    assert support(old)


def test_clip_other_bounds_are_rejected():
    m = model(node("Clip", ["x", "lo", "hi"]), {"x": [1, 4]}, inits={"lo": np.float32(0), "hi": np.float32(10)})
    assert support(m).reason == "min/max (0, 10) is not supported; only (0, 6) → RELU6 and (-1, 1) → RELU1"
    only_min = model(node("Clip", ["x", "lo"]), {"x": [1, 4]}, inits={"lo": np.float32(0)})
    assert "min/max (0, inf) is not supported" in support(only_min).reason


def test_clip_bounds_must_be_constant():
    m = model(node("Clip", ["x", "lo", "hi"]), {"x": [1, 4], "lo": [], "hi": []})
    assert support(m).reason == "min (input 1) is not a constant initializer"


# -- cast.py -----------------------------------------------------------------------------------------------
def test_cast_to_float_or_int32_from_float():
    assert support(model(node("Cast", ["x"], ["y"], to=I32), {"x": [2]}, {"y": I32}))
    assert support(model(node("Cast", ["x"], to=1), {"x": [2]}))
    m = model(node("Cast", ["x"], ["y"], to=I64), {"x": [2]}, {"y": I64})
    assert support(m).reason == "cast to int64 is not supported (float32 or int32 only)"
    assert support(model(node("Cast", ["x"], ["y"], to=1), {"x": ([2], I64)})).reason == \
        "input 0 is int64; needs float32"
    assert support(model(node("Cast", ["x"], to=1), {"x": [2]}), be=at_api(28)).reason.startswith(
        "needs NNAPI feature level 3")


# -- minmax.py ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Max", "Min"])
def test_min_max_two_inputs(op):
    assert support(model(node(op, ["a", "b"]), {"a": [2, 2], "b": [2]}))
    assert support(model(node(op, ["a", "b", "c"]), {"a": [2], "b": [2], "c": [2]})).reason == \
        "has 3 inputs; exactly 2 are supported"
    assert support(model(node(op, ["a", "b"]), {"a": [2], "b": [2]}), be=at_api(28)).reason.startswith(
        "needs NNAPI feature level 3")


# -- qlinear.py: com.microsoft QLinearAdd / QLinearMul / QLinearSigmoid -------------------------------------
def _qlinear_binary(op, a_type=U8, b_type=U8, y_zp_dtype=np.uint8, per_channel=False, rank=2):
    shape = [1] * (rank - 1) + [4]
    b_np = np.uint8 if b_type == U8 else np.int8
    inits = {
        "a_scale": np.float32(0.1), "a_zp": np.uint8(0) if a_type == U8 else np.int8(0),
        "b_scale": np.full(4, 0.1, np.float32) if per_channel else np.float32(0.1), "b_zp": b_np(0),
        "y_scale": np.float32(0.2), "y_zp": y_zp_dtype(0),
    }
    n = node(op, ["a", "a_scale", "a_zp", "b", "b_scale", "b_zp", "y_scale", "y_zp"], domain="com.microsoft")
    return model(n, {"a": (shape, a_type), "b": (shape, b_type)}, {"y": U8}, inits, ms_opset=True)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_qlinear_add_mul_u8u8(op):
    assert support(_qlinear_binary(op), be=at_api(27))
    assert support(_qlinear_binary(op, b_type=I8)).reason == \
        "quantized input 1 is int8; both inputs must be uint8"
    assert support(_qlinear_binary(op, a_type=I8, b_type=I8)).reason == \
        "quantized input 0 is int8; NNAPI takes uint8 activations only (no int8/s8s8)"


def test_qlinear_add_rejects_per_channel_and_rank_5():
    assert "quantized per channel (4 scales)" in support(_qlinear_binary("QLinearAdd", per_channel=True)).reason
    assert support(_qlinear_binary("QLinearAdd", rank=5)).reason == "input 0 has rank 5; needs rank ≤4"


def test_qlinear_add_scale_must_be_constant():
    n = node("QLinearAdd", ["a", "s", "z", "b", "s", "z", "s", "z"], domain="com.microsoft")
    m = model(n, {"a": ([4], U8), "b": ([4], U8), "s": []}, {"y": U8}, {"z": np.uint8(0)}, ms_opset=True)
    assert support(m).reason == "input 0 scale is not a constant initializer"


def _qlinear_sigmoid(y_scale, y_zp=0):
    n = node("QLinearSigmoid", ["x", "xs", "xz", "ys", "yz"], domain="com.microsoft")
    inits = {"xs": np.float32(0.1), "xz": np.uint8(128), "ys": np.float32(y_scale), "yz": np.uint8(y_zp)}
    return model(n, {"x": ([1, 8], U8)}, {"y": U8}, inits, ms_opset=True)


def test_qlinear_sigmoid_output_scale():
    assert support(_qlinear_sigmoid(1 / 256))
    assert support(_qlinear_sigmoid(0.01)).reason == "output scale is 0.01; needs 0.00390625"
    assert support(_qlinear_sigmoid(1 / 256, 3)).reason == "output zero point is 3; needs 0"
