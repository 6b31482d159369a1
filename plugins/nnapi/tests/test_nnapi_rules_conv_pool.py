"""Layout-sensitive rules: conv, pool, batchnorm, lrn, depthtospace, and their QLinear forms."""

from __future__ import annotations

import numpy as np
import pytest
from nnapi_models import I8, U8, at_api, model, node, support
from onnx import helper


def _conv(weight_shape=(4, 3, 3, 3), x_shape=(1, 3, 8, 8), weight_const=True, **attrs):
    inputs = {"x": list(x_shape)}
    inits = {}
    if weight_const:
        inits["w"] = np.ones(weight_shape, np.float32)
    else:
        inputs["w"] = list(weight_shape)
    return model(node("Conv", ["x", "w"], **attrs), inputs, inits=inits)


# -- conv.py ------------------------------------------------------------------------------------------------
def test_conv_2d_with_constant_weight():
    assert support(_conv())
    assert support(_conv(), be=at_api(28))
    assert support(_conv(), be=at_api(27)).reason == "needs NNAPI feature level 2 (Android API 28); target is API 27"


def test_conv_weight_must_be_constant_and_4d():
    assert support(_conv(weight_const=False)).reason == "weight (input 1) is not a constant initializer"
    conv1d = _conv(weight_shape=(4, 3, 3), x_shape=(1, 3, 8))
    assert support(conv1d).reason == "weight is 3-D; only 2-D convolution (4-D weight) is supported"


def test_conv_weight_overridable_initializer_is_not_constant():
    m = _conv()
    m.graph.input.append(helper.make_tensor_value_info("w", 1, [4, 3, 3, 3]))  # a default a session may replace
    assert support(m).reason == "weight (input 1) is not a constant initializer"


def test_conv_dilations():
    dilated = _conv(dilations=[2, 2])
    assert support(dilated)
    assert support(dilated, be=at_api(28)).reason == \
        "a dilated convolution needs NNAPI feature level 3 (Android API 29); target is API 28"
    depthwise = _conv(weight_shape=(6, 1, 3, 3), x_shape=(1, 6, 8, 8), group=6, dilations=[2, 2])
    assert support(depthwise)
    grouped = _conv(weight_shape=(6, 2, 3, 3), x_shape=(1, 6, 8, 8), group=3, dilations=[2, 2])
    assert support(grouped).reason == "dilations ≠1 are not supported on a grouped (non-depthwise) convolution"
    assert support(_conv(weight_shape=(6, 2, 3, 3), x_shape=(1, 6, 8, 8), group=3))


def test_conv_use_nchw_needs_feature_level_3():
    assert support(_conv(), be=at_api(28, use_nchw=True)).reason == \
        "needs NNAPI feature level 3 (Android API 29); target is API 28"
    assert support(_conv(), be=at_api(29, use_nchw=True))


def _qlinear_conv(w_dtype=np.int8, w_zp=0, bias_const=True, x_type=U8, domain=None, w_scale=None):
    w_scale = np.float32(0.01) if w_scale is None else np.asarray(w_scale, np.float32)
    inits = {
        "xs": np.float32(0.02), "xz": np.uint8(128) if x_type == U8 else np.int8(0),
        "w": np.ones((4, 3, 3, 3), w_dtype), "ws": w_scale, "wz": np.asarray(w_zp, dtype=w_dtype),
        "ys": np.float32(0.05), "yz": np.uint8(128),
    }
    inputs = {"x": ([1, 3, 8, 8], x_type)}
    if bias_const:
        inits["b"] = np.zeros(4, np.int32)
    else:
        inputs["b"] = ([4], 6)
    n = node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], domain=domain,
             kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    return model(n, inputs, {"y": U8}, inits, ms_opset=domain is not None)


def test_qlinear_conv_u8s8_and_u8u8():
    assert support(_qlinear_conv())
    assert support(_qlinear_conv(w_dtype=np.uint8, w_zp=128))


def test_qlinear_conv_rejections():
    assert support(_qlinear_conv(w_zp=3)).reason == \
        "the int8 weight (input 1) has non-zero zero points; NNAPI needs symmetric (zero point 0)"
    assert support(_qlinear_conv(bias_const=False)).reason == "bias (input 8) is not a constant initializer"
    assert support(_qlinear_conv(x_type=I8)).reason == \
        "quantized input 0 is int8; NNAPI takes uint8 activations only (no int8/s8s8)"


def test_qlinear_conv_per_channel_weight_needs_feature_level_3():
    m = _qlinear_conv(w_scale=[0.01, 0.02, 0.03, 0.04], w_zp=[0, 0, 0, 0])
    assert support(m)
    assert support(m, be=at_api(28)).reason == \
        "a per-channel quantized weight needs NNAPI feature level 3 (Android API 29); target is API 28"
    mismatch = _qlinear_conv(w_scale=[0.01, 0.02], w_zp=0)
    assert support(mismatch).reason == "the weight has 4 output channels but 2 scales"
    u8_per_channel = _qlinear_conv(w_dtype=np.uint8, w_scale=[0.01] * 4, w_zp=0)
    assert "is quantized per channel (4 scales)" in support(u8_per_channel).reason


def test_com_microsoft_qlinear_conv_is_rejected():
    answer = support(_qlinear_conv(domain="com.microsoft"))
    assert answer.reason == "the com.microsoft (NHWC) variant is not supported; use ai.onnx QLinearConv"


# -- pool.py ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["AveragePool", "MaxPool"])
def test_pools(op):
    m = model(node(op, ["x"], kernel_shape=[2, 2], strides=[2, 2]), {"x": [1, 3, 8, 8]})
    assert support(m, be=at_api(28))
    assert support(m, be=at_api(27)).reason.startswith("needs NNAPI feature level 2")
    assert support(m, be=at_api(28, use_nchw=True)).reason.startswith("needs NNAPI feature level 3")


@pytest.mark.parametrize(("attrs", "reason"), [
    ({"count_include_pad": 1}, "count_include_pad=1 is not supported"),
    ({"ceil_mode": 1}, "ceil_mode=1 is not supported"),
    ({"dilations": [2, 2]}, "dilations ≠1 are not supported"),
])
def test_average_pool_attribute_limits(attrs, reason):
    m = model(node("AveragePool", ["x"], kernel_shape=[2, 2], **attrs), {"x": [1, 3, 8, 8]}, opset=19)
    assert support(m).reason == reason


def test_max_pool_limits():
    m = model(node("MaxPool", ["x"], kernel_shape=[2, 2], storage_order=1), {"x": [1, 3, 8, 8]})
    assert support(m).reason == "storage_order=1 is not supported"
    with_indices = model(node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2]), {"x": [1, 3, 8, 8]},
                         {"y": 1, "idx": 7})
    assert support(with_indices).reason == "the Indices output (output 1) is not supported"
    pool1d = model(node("MaxPool", ["x"], kernel_shape=[2]), {"x": [1, 3, 8]})
    assert support(pool1d).reason == "input 0 has rank 3; needs rank 4"
    pool3d = model(node("MaxPool", ["x"], kernel_shape=[2, 2, 2]), {"x": [1, 3, 8, 8]})
    assert support(pool3d).reason == "kernel_shape has 3 dims; only 2-D pooling is supported"


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pools_need_4d(op):
    assert support(model(node(op, ["x"]), {"x": [1, 3, 8, 8]}))
    assert support(model(node(op, ["x"]), {"x": [1, 3, 8]})).reason == "input 0 has rank 3; needs rank 4"


def test_max_pool_uint8_only_inside_a_partition():
    # uint8 straight from a graph input: no scale/zero point to give NNAPI
    m = model(node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2]), {"x": ([1, 3, 8, 8], U8)}, {"y": U8})
    assert "uint8 input 0 is a graph input or initializer" in support(m).reason
    # uint8 from a QuantizeLinear NNAPI takes: fine
    nodes = [node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
             node("MaxPool", ["q"], ["y"], name="pool", kernel_shape=[2, 2])]
    inside = model(nodes, {"x": [1, 3, 8, 8]}, {"y": U8}, {"s": np.float32(0.1), "z": np.uint8(0)})
    assert support(inside, "pool")
    # the same QuantizeLinear below feature level 3 is not taken, so the MaxPool input is a partition input
    answer = support(inside, "pool", be=at_api(28))
    assert answer.reason == ("uint8 input 0 comes from QuantizeLinear 'q', which NNAPI does not take, so it would "
                             "be a partition input")
    # AveragePool has no plain uint8 form
    avg = model(node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2]), {"x": ([1, 3, 8, 8], U8)}, {"y": U8})
    assert support(avg).reason == "input 0 is uint8; needs float32"


def _qlinear_average_pool(y_scale=0.1, y_zp=3):
    n = node("QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], domain="com.microsoft", kernel_shape=[2, 2])
    inits = {"xs": np.float32(0.1), "xz": np.uint8(3), "ys": np.float32(y_scale), "yz": np.uint8(y_zp)}
    return model(n, {"x": ([1, 3, 8, 8], U8)}, {"y": U8}, inits, ms_opset=True)


def test_qlinear_average_pool_needs_equal_scales():
    assert support(_qlinear_average_pool())
    assert support(_qlinear_average_pool(y_scale=0.2)).reason == \
        "output scale 0.2 differs from input scale 0.1; they must be equal"
    assert support(_qlinear_average_pool(y_zp=4)).reason == \
        "output zero point 4 differs from input zero point 3; they must be equal"
    assert support(_qlinear_average_pool(), be=at_api(27)).reason.startswith("needs NNAPI feature level 2")


# -- batchnorm.py -------------------------------------------------------------------------------------------
def _batchnorm(const=True, outputs=("y",), x_shape=(1, 3, 4, 4), opset=13, **attrs):
    params = {name: np.ones(3, np.float32) for name in ("scale", "b", "mean", "var")}
    inputs = {"x": list(x_shape)}
    if not const:
        inputs["mean"] = [3]
        del params["mean"]
    n = node("BatchNormalization", ["x", "scale", "b", "mean", "var"], list(outputs), **attrs)
    return model(n, inputs, dict.fromkeys(outputs, 1), params, opset=opset)


def test_batchnorm():
    assert support(_batchnorm(), be=at_api(27))
    assert support(_batchnorm(const=False)).reason == "mean (input 3) is not a constant initializer"
    assert support(_batchnorm(x_shape=(1, 3, 2, 2, 2))).reason == "input 0 has rank 5; needs rank ≤4"
    training = _batchnorm(outputs=("y", "running_mean", "running_var"), training_mode=1, opset=15)
    assert support(training).reason == "has 3 outputs (training mode); export the model in inference mode"
    assert support(_batchnorm(opset=7, spatial=0)).reason == "spatial=0 (non-spatial) is not supported"
    assert "needs opset 7" in support(_batchnorm(opset=6)).reason


# -- lrn.py -------------------------------------------------------------------------------------------------
def test_lrn():
    m = model(node("LRN", ["x"], size=3), {"x": [1, 3, 4, 4]})
    assert support(m, be=at_api(28))
    assert support(m, be=at_api(27)).reason.startswith("needs NNAPI feature level 2")
    assert support(model(node("LRN", ["x"], size=3), {"x": [1, 3, 4]})).reason == "input 0 has rank 3; needs rank 4"


# -- depthtospace.py ----------------------------------------------------------------------------------------
def test_depth_to_space():
    dcr = model(node("DepthToSpace", ["x"], blocksize=2), {"x": [1, 8, 2, 2]})
    assert support(dcr, be=at_api(27))
    crd = model(node("DepthToSpace", ["x"], blocksize=2, mode="CRD"), {"x": [1, 8, 2, 2]})
    assert support(crd).reason == "mode CRD is not supported (DCR only)"
    assert support(model(node("DepthToSpace", ["x"], blocksize=2), {"x": [8, 2, 2]})).reason == \
        "input 0 has rank 3; needs rank 4"
    assert support(dcr, be=at_api(28, use_nchw=True)).reason == \
        "NCHW layout (use_nchw) needs NNAPI feature level 3 (Android API 29); target is API 28"
    assert support(dcr, be=at_api(29, use_nchw=True))
