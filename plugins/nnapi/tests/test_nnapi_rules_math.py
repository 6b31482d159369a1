"""Matrix and reduction rules: gemm, matmul, softmax, reducemean, and standalone quantize/dequantize."""

from __future__ import annotations

import numpy as np
from nnapi_models import I8, I32, U8, at_api, model, node, support


# -- gemm.py ------------------------------------------------------------------------------------------------
def _gemm(c_shape=(4,), b_const=True, c=True, **attrs):
    inits = {}
    inputs = {"a": [2, 3]}
    trans_b = attrs.get("transB", 0)
    b_shape = (4, 3) if trans_b else (3, 4)
    if b_const:
        inits["b"] = np.ones(b_shape, np.float32)
    else:
        inputs["b"] = list(b_shape)
    names = ["a", "b"]
    if c:
        inits["c"] = np.ones(c_shape, np.float32)
        names.append("c")
    return model(node("Gemm", names, **attrs), inputs, inits=inits)


def test_gemm_fully_connected():
    assert support(_gemm(), be=at_api(27))
    assert support(_gemm(c=False))
    assert support(_gemm(b_const=False, transB=1))
    assert support(_gemm(b_const=False)).reason == \
        "B (input 1) is not a constant initializer (needed unless transB=1)"


def test_gemm_attributes():
    assert support(_gemm(transA=1)).reason == "needs transA=0, alpha=1, beta=1 (got transA=1, alpha=1, beta=1)"
    assert support(_gemm(alpha=2.0)).reason == "needs transA=0, alpha=1, beta=1 (got transA=0, alpha=2, beta=1)"
    assert "beta=0.5" in support(_gemm(beta=0.5)).reason
    assert "needs opset 7" in support(model(node("Gemm", ["a", "b"]), {"a": [2, 3], "b": [3, 4]}, opset=6)).reason


def test_gemm_bias_shape():
    assert support(_gemm(c_shape=(1, 4)), be=at_api(28))
    assert support(_gemm(c_shape=(1, 4)), be=at_api(27)).reason == \
        "a 2-D C (input 2) needs NNAPI feature level 2 (Android API 28); target is API 27"
    assert support(_gemm(c_shape=(2, 4))).reason == "C (input 2) has shape [2, 4]; needs [N] or [1,…,1,N]"
    assert support(_gemm(c_shape=())).reason == "C (input 2) is a scalar; needs a 1-D bias"
    assert support(_gemm(c_shape=(1,))).reason == "C (input 2) has 1 elements; needs 4 (the output width)"


# -- matmul.py ----------------------------------------------------------------------------------------------
def test_matmul_2d_needs_constant_b():
    const_b = model(node("MatMul", ["a", "b"]), {"a": [2, 3]}, inits={"b": np.ones((3, 4), np.float32)})
    assert support(const_b, be=at_api(27))
    dynamic_b = model(node("MatMul", ["a", "b"]), {"a": [2, 3], "b": [3, 4]})
    assert support(dynamic_b).reason == "B (input 1) is not a constant initializer"


def test_matmul_batched():
    batched = model(node("MatMul", ["a", "b"]), {"a": [2, 5, 3], "b": [2, 3, 4]})
    assert support(batched, be=at_api(29))
    assert support(batched, be=at_api(28)).reason == \
        "a batched (3-D+) MatMul needs NNAPI feature level 3 (Android API 29); target is API 28"
    mismatched = model(node("MatMul", ["a", "b"]), {"a": [2, 5, 3], "b": [1, 3, 4]})
    assert "must have the same rank and the same leading (batch) dims" in support(mismatched).reason
    mixed = model(node("MatMul", ["a", "b"]), {"a": [2, 5, 3]}, inits={"b": np.ones((3, 4), np.float32)})
    assert support(mixed).reason == \
        "A is 3-D and B 2-D; both must be 2-D (or both 3-D+ for a batched float MatMul)"


def _qlinear_matmul(b_dtype=np.int8, b_zp=0, b_scale=0.1, b_const=True):
    inits = {"as": np.float32(0.1), "az": np.uint8(0), "bs": np.asarray(b_scale, np.float32),
             "bz": np.asarray(b_zp, b_dtype), "ys": np.float32(0.2), "yz": np.uint8(0)}
    inputs = {"a": ([2, 3], U8)}
    if b_const:
        inits["b"] = np.ones((3, 4), b_dtype)
    else:
        inputs["b"] = ([3, 4], I8 if b_dtype == np.int8 else U8)
    n = node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"])
    return model(n, inputs, {"y": U8}, inits)


def test_qlinear_matmul():
    assert support(_qlinear_matmul())
    assert support(_qlinear_matmul(b_dtype=np.uint8, b_zp=128))
    assert support(_qlinear_matmul(b_const=False)).reason == "B (input 3) is not a constant initializer"
    assert support(_qlinear_matmul(b_scale=[0.1] * 3, b_zp=0)).reason == \
        "the MatMul weight (input 1) is quantized per channel; only per-tensor is supported"
    assert "non-zero zero points" in support(_qlinear_matmul(b_zp=1)).reason


# -- softmax.py ---------------------------------------------------------------------------------------------
def test_softmax_opset_13():
    m = model(node("Softmax", ["x"], axis=-1), {"x": [2, 5]})
    assert support(m, be=at_api(28))
    assert support(m, be=at_api(27)).reason.startswith("needs NNAPI feature level 2")
    assert support(model(node("Softmax", ["x"]), {"x": [1, 1, 1, 1, 5]})).reason == \
        "input 0 has rank 5; needs rank ≤4"


def test_softmax_below_feature_level_3():
    assert support(model(node("Softmax", ["x"], axis=1), {"x": [2, 5, 3]}))
    rank3 = model(node("Softmax", ["x"], axis=-1), {"x": [2, 5, 3]})
    assert support(rank3, be=at_api(28)).reason == \
        "input rank 3: below feature level 3 (API 29; target is API 28) only rank 2 or 4 is supported"
    axis1 = model(node("Softmax", ["x"], axis=1), {"x": [1, 3, 4, 4]})
    assert support(axis1, be=at_api(28)).reason == \
        "axis 1 is not the last dim: below feature level 3 (API 29; target is API 28) only the last axis is supported"
    # ORT reads an absent axis as 1, not ONNX's -1
    no_axis = model(node("Softmax", ["x"]), {"x": [1, 3, 4, 4]})
    assert "axis 1 is not the last dim" in support(no_axis, be=at_api(28)).reason


def test_softmax_before_opset_13_is_coerced_to_2d():
    assert support(model(node("Softmax", ["x"], axis=1), {"x": [1, 1, 1, 1, 5]}, opset=11), be=at_api(28))


# -- reducemean.py ------------------------------------------------------------------------------------------
def test_reduce_mean():
    m = model(node("ReduceMean", ["x"], axes=[2, 3], keepdims=1), {"x": [1, 3, 4, 4]})
    assert support(m, be=at_api(28))
    assert support(m, be=at_api(27)).reason.startswith("needs NNAPI feature level 2")
    axes18 = model(node("ReduceMean", ["x", "axes"]), {"x": [1, 3, 4, 4]}, inits={"axes": np.array([1])}, opset=18)
    assert support(axes18)
    dynamic = model(node("ReduceMean", ["x", "axes"]), {"x": [1, 3, 4, 4], "axes": ([1], 7)}, opset=18)
    assert support(dynamic).reason == "axes (input 1) is not a constant initializer"
    noop = model(node("ReduceMean", ["x"], noop_with_empty_axes=1), {"x": [2, 3]}, opset=18)
    assert support(noop).reason == "noop_with_empty_axes=1 is not supported (opset 18+)"
    assert support(model(node("ReduceMean", ["x"]), {"x": [1, 1, 1, 1, 2]})).reason == \
        "input 0 has rank 5; needs rank 1–4"


# -- quantize.py --------------------------------------------------------------------------------------------
def _dq(x_type=U8, zp=128, scale=0.1, **attrs):
    zp = None if zp is None else np.asarray(zp, np.uint8 if x_type == U8 else np.int8 if x_type == I8 else np.int32)
    scale = np.asarray(scale, np.float32)
    names = ["x", "s"] + (["z"] if zp is not None else [])
    inits = {"s": scale, **({"z": zp} if zp is not None else {})}
    return model(node("DequantizeLinear", names, **attrs), {"x": ([1, 4], x_type)}, inits=inits)


def test_dequantize_linear():
    assert support(_dq(), be=at_api(27))
    assert support(_dq(zp=None))
    assert support(_dq(x_type=I8, zp=0)).reason == \
        "quantized input 0 is int8; NNAPI takes uint8; int8 only for the weight of Conv/MatMul/Gemm"
    assert support(_dq(x_type=I32, zp=0)).reason.startswith("quantized input 0 is int32")
    per_channel = _dq(scale=[0.1] * 4, zp=[0] * 4, axis=1)
    assert support(per_channel).reason == ("input 0 is quantized per channel (4 scales); NNAPI takes per-tensor "
                                           "quantization (per channel only for an int8 Conv weight)")
    dynamic_scale = model(node("DequantizeLinear", ["x", "s"]), {"x": ([1, 4], U8), "s": []})
    assert support(dynamic_scale).reason == "input 0 scale is not a constant initializer"


def test_quantize_linear():
    m = model(node("QuantizeLinear", ["x", "s", "z"]), {"x": [1, 4]}, {"y": U8}, {"s": np.float32(0.1),
                                                                                "z": np.uint8(0)})
    assert support(m, be=at_api(29))
    assert support(m, be=at_api(28)).reason == "needs NNAPI feature level 3 (Android API 29); target is API 28"
    s8 = model(node("QuantizeLinear", ["x", "s", "z"]), {"x": [1, 4]}, {"y": I8}, {"s": np.float32(0.1),
                                                                                 "z": np.int8(0)})
    assert support(s8).reason == \
        "quantized output 0 is int8; NNAPI takes uint8; int8 only for the weight of Conv/MatMul/Gemm"
    zp_dynamic = model(node("QuantizeLinear", ["x", "s", "z"]), {"x": [1, 4], "z": ([], U8)}, {"y": U8},
                       {"s": np.float32(0.1)})
    assert support(zp_dynamic).reason == "output 0 zero point is not a constant initializer"
