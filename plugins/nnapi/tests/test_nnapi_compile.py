"""Lowering ONNX to NNAPI (each rule's ``lower``) and the emulator: layout, weight layouts, padding, fused
activations, quantization, feature levels, relaxed fp16, compile-only claims; numbers against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from nnapi_compile_kit import compile_whole, emulate, nnapi_model, ops, ort_run, random
from nnapi_models import BOOL, model, node
from onnx import numpy_helper

from mobile_ep import CompileError
from mobile_ep.testing import supports_all
from mobile_ep_nnapi import NnapiBackend, emulator, serialize
from mobile_ep_nnapi.nnapi import DevicePolicy, FuseCode, OperandCode, OperationCode, PaddingCode


def close(proto, feeds, backend=None, rtol=1e-5, atol=1e-5):
    payload = compile_whole(proto, backend)
    got = emulate(payload, feeds, backend)
    want = ort_run(proto, feeds)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=rtol, atol=atol, err_msg=name)
    return payload


def operation(payload, code):
    m = nnapi_model(payload)
    return m, next(op for op in m.operations if op.code == code)


def test_a_cnn_runs_in_nhwc_with_transposes_only_at_the_boundaries():
    proto = model([node("Conv", ["x", "w1"], ["c1"], name="c1", pads=[1, 1, 1, 1]), node("Relu", ["c1"], ["r"]),
                   node("Conv", ["r", "w2"], ["c2"], name="c2", strides=[2, 2]),
                   node("MaxPool", ["c2"], ["y"], kernel_shape=[2, 2])],
                  {"x": [1, 3, 12, 12]}, inits={"w1": random((8, 3, 3, 3), 1), "w2": random((4, 8, 1, 1), 2)})
    payload = close(proto, {"x": random((1, 3, 12, 12), 3)})
    assert ops(payload) == ["TRANSPOSE", "CONV_2D", "CONV_2D", "MAX_POOL_2D", "TRANSPOSE"]
    m, conv = operation(payload, OperationCode.CONV_2D)
    assert m.value(conv.inputs[-1]) == FuseCode.RELU  # the Relu went into the convolution
    filt = m.operands[conv.inputs[1]]
    assert filt.dims == (8, 3, 3, 3)  # OHWI
    np.testing.assert_array_equal(m.value(conv.inputs[1]), np.transpose(numpy_helper.to_array(
        proto.graph.initializer[0]), (0, 2, 3, 1)))
    assert m.operands[m.inputs[0]].dims == (1, 3, 12, 12) and m.operands[m.outputs[0]].dims == (1, 4, 5, 5)


def test_transposes_cancel_where_they_meet_nhwc():
    """An NHWC model input transposed to NCHW for a Conv, and the Conv's result transposed back to NHWC:
    both ONNX Transposes are free, the NNAPI model has no TRANSPOSE at all."""
    proto = model([node("Transpose", ["x"], ["t"], name="in", perm=[0, 3, 1, 2]), node("Conv", ["t", "w"], ["c"]),
                   node("Transpose", ["c"], ["y"], name="out", perm=[0, 2, 3, 1])],
                  {"x": [1, 6, 6, 3]}, inits={"w": random((5, 3, 1, 1))})
    payload = close(proto, {"x": random((1, 6, 6, 3), 1)})
    assert ops(payload) == ["CONV_2D"]


@pytest.mark.parametrize("auto_pad, pads, form", [
    ("SAME_UPPER", None, "implicit"), ("VALID", None, "implicit"), ("NOTSET", [1, 1, 1, 1], "implicit"),
    ("NOTSET", [0, 1, 2, 1], "explicit"), ("SAME_LOWER", None, "explicit"),
])
def test_padding_is_implicit_when_nnapi_can_say_it(auto_pad, pads, form):
    attrs = {"auto_pad": auto_pad, "strides": [2, 2]} if pads is None else {"pads": pads, "strides": [2, 2]}
    size = 8 if auto_pad == "SAME_LOWER" else 9  # 8: the odd pixel of SAME goes first (explicit pads)
    proto = model([node("Conv", ["x", "w"], **attrs)], {"x": [1, 2, size, size]}, inits={"w": random((3, 2, 3, 3))})
    payload = close(proto, {"x": random((1, 2, size, size), 2)})
    m, conv = operation(payload, OperationCode.CONV_2D)
    assert len(conv.inputs) == (7 if form == "implicit" else 10)
    if form == "implicit":
        assert m.value(conv.inputs[3]) in (PaddingCode.SAME, PaddingCode.VALID)


def test_depthwise_and_grouped_convolutions():
    proto = model([node("Conv", ["x", "wd"], ["d"], name="dw", group=4, pads=[1, 1, 1, 1]),
                   node("Conv", ["d", "wg"], ["y"], name="grouped", group=2)],
                  {"x": [1, 4, 7, 7]}, inits={"wd": random((8, 1, 3, 3), 1), "wg": random((6, 4, 1, 1), 2)})
    feeds = {"x": random((1, 4, 7, 7), 3)}
    payload = close(proto, feeds)
    m, dw = operation(payload, OperationCode.DEPTHWISE_CONV_2D)
    assert m.operands[dw.inputs[1]].dims == (1, 3, 3, 8) and m.value(dw.inputs[6]) == 2  # [1,H,W,O], multiplier
    assert "GROUPED_CONV_2D" in ops(payload)
    older = close(proto, feeds, NnapiBackend().configure({"api_level": "28"}))  # no GROUPED_CONV_2D before FL3
    assert "GROUPED_CONV_2D" not in ops(older) and ops(older).count("CONV_2D") == 2


def test_activations_fold_into_their_producer_only_when_alone():
    proto = model([node("Add", ["a", "b"], ["s"]), node("Clip", ["s"], ["y"], min=0.0, max=6.0),
                   node("Mul", ["a", "b"], ["p"]), node("Relu", ["p"], ["z"]), node("Sigmoid", ["p"], ["q"])],
                  {"a": [2, 3], "b": [2, 3]}, outputs=("y", "z", "q"), opset=10)
    payload = close(proto, {"a": random((2, 3), 1, -9, 9), "b": random((2, 3), 2, -9, 9)})
    m, add = operation(payload, OperationCode.ADD)
    assert m.value(add.inputs[2]) == FuseCode.RELU6
    _, mul = operation(payload, OperationCode.MUL)
    assert m.value(mul.inputs[2]) == FuseCode.NONE and "RELU" in ops(payload)  # p has two consumers


def _qdq_conv(per_channel: bool):
    w = np.random.default_rng(5).integers(-100, 100, size=(4, 3, 3, 3)).astype(np.int8)
    w_scale = np.float32([0.02, 0.01, 0.03, 0.015]) if per_channel else np.float32(0.02)
    w_zp = np.zeros(4, np.int8) if per_channel else np.int8(0)
    bias = np.int32([100, -50, 0, 7])
    nodes = [node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="q0"),
             node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"], name="dq0"),
             node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], name="dqw", axis=0),
             node("DequantizeLinear", ["b", "bs"], ["bd"], name="dqb", axis=0),
             node("Conv", ["xd", "wd", "bd"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             node("QuantizeLinear", ["c", "ys", "yz"], ["yq"], name="q1"),
             node("DequantizeLinear", ["yq", "ys", "yz"], ["y"], name="dq1")]
    inits = {"xs": np.float32(0.05), "xz": np.uint8(128), "w": w, "ws": w_scale, "wz": w_zp, "b": bias,
             "bs": np.float32(0.05) * w_scale, "ys": np.float32(0.1), "yz": np.uint8(120)}
    return model(nodes, {"x": [1, 3, 6, 6]}, inits=inits)


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
def test_quantized_convolution(per_channel):
    proto = _qdq_conv(per_channel)
    feeds = {"x": random((1, 3, 6, 6), 7, -5, 5)}
    payload = compile_whole(proto)
    m, conv = operation(payload, OperationCode.CONV_2D)
    x, filt, bias = (m.operands[i] for i in conv.inputs[:3])
    assert x.code == OperandCode.TENSOR_QUANT8_ASYMM and (x.scale, x.zero_point) == (np.float32(0.05), 128)
    assert bias.code == OperandCode.TENSOR_INT32
    if per_channel:
        assert filt.code == OperandCode.TENSOR_QUANT8_SYMM_PER_CHANNEL and filt.channel_quant.channel_dim == 0
        assert bias.scale == 0.0
    else:
        assert filt.code == OperandCode.TENSOR_QUANT8_ASYMM and filt.zero_point == 128  # int8 + 128
        assert bias.scale == pytest.approx(0.05 * 0.02)
    got, want = emulate(payload, feeds)["y"], ort_run(proto, feeds)["y"]
    assert np.max(np.abs(got - want)) <= 0.1 + 1e-6  # at most one quantization step (scale 0.1)


def test_feature_levels_gate_every_operation():
    proto = model([node("LeakyRelu", ["x"], alpha=0.2)], {"x": [2, 5]})
    feeds = {"x": random((2, 5), 1)}
    assert ops(close(proto, feeds)) == ["PRELU"]
    old = close(proto, feeds, NnapiBackend().configure({"api_level": "28"}))
    assert "PRELU" not in ops(old) and nnapi_model(old).feature_level == 2
    d2s = model([node("DepthToSpace", ["x"], blocksize=2)], {"x": [1, 8, 2, 2]})
    with pytest.raises(CompileError, match="feature level 2"):
        compile_whole(d2s, NnapiBackend().configure({"api_level": "27"}))
    resize = model([node("Resize", ["x", "", "scales"], coordinate_transformation_mode="half_pixel", mode="linear")],
                   {"x": [1, 2, 3, 3]}, inits={"scales": np.float32([1, 1, 2, 2])})
    payload = close(resize, {"x": random((1, 2, 3, 3), 2)})
    _, op = operation(payload, OperationCode.RESIZE_BILINEAR)
    assert len(op.inputs) == 6  # layout, align_corners, half_pixel_centers: feature level 4


def test_relaxed_fp16_computes_in_fp16():
    proto = model([node("Mul", ["a", "b"], ["p"]), node("Add", ["p", "a"], ["y"])], {"a": [64], "b": [64]})
    feeds = {"a": random((64,), 1, -3, 3), "b": random((64,), 2, -3, 3)}
    backend = NnapiBackend().configure({"use_fp16": "true"})
    payload = compile_whole(proto, backend)
    assert nnapi_model(payload).relax_fp16 and payload.metadata["rtol"] == "0.02"
    got = emulate(payload, feeds, backend)["y"]
    a16, b16 = feeds["a"].astype(np.float16), feeds["b"].astype(np.float16)
    np.testing.assert_array_equal(got, (a16 * b16 + a16).astype(np.float32))
    exact = feeds["a"] * feeds["b"] + feeds["a"]
    assert not np.array_equal(got, exact)
    np.testing.assert_allclose(got, exact, rtol=0.02, atol=0.01)


def test_options_reach_the_serialized_model():
    proto = model([node("Relu", ["x"])], {"x": [3]})
    payload = compile_whole(proto, NnapiBackend().configure({"cpu_disabled": "true", "preference": "low_power"}))
    m = nnapi_model(payload)
    assert m.device_policy == DevicePolicy.CPU_DISABLED and m.preference == 0
    assert nnapi_model(compile_whole(proto, NnapiBackend().configure({"cpu_only": "true"}))).device_policy == 2


def test_nchw_option_uses_the_layout_flag_instead_of_transposes():
    proto = model([node("Conv", ["x", "w"], ["c"]), node("AveragePool", ["c"], kernel_shape=[2, 2])],
                  {"x": [1, 2, 6, 6]}, inits={"w": random((3, 2, 3, 3))})
    payload = close(proto, {"x": random((1, 2, 6, 6), 4)}, NnapiBackend().configure({"use_nchw": "true"}))
    assert "TRANSPOSE" not in ops(payload)
    m, conv = operation(payload, OperationCode.CONV_2D)
    assert m.value(conv.inputs[-1]) == np.bool_(True)


def test_empty_and_scalar_outputs():
    split = model([node("Split", ["x", "parts"], ["a", "b"], axis=0)], {"x": [0]}, outputs=("a", "b"),
                  inits={"parts": np.int64([0, 0])})
    payload = compile_whole(split)
    assert not nnapi_model(payload).outputs
    assert emulate(payload, {"x": np.zeros(0, np.float32)})["a"].shape == (0,)
    mean = model([node("ReduceMean", ["x"], keepdims=0)], {"x": [2, 3]}, opset=13)
    close(mean, {"x": random((2, 3), 1)})


def test_compile_only_claims_need_the_option():
    proto = model([node("HardSwish", ["x"])], {"x": [1, 4]}, opset=14)
    assert not supports_all(proto, NnapiBackend())["hardswish_0"]
    extended = NnapiBackend().configure({"compile_ops": "extended"})
    payload = close(proto, {"x": random((1, 4), 1, -5, 5)}, extended)
    assert ops(payload) == ["HARD_SWISH"]
    assert not supports_all(proto, extended.configure({"api_level": "29"}))["hardswish_0"]  # FL4
    # the registry ORT's predictions come from is untouched by the option
    default_ops = NnapiBackend().rules.op_types()
    assert set(default_ops) < set(extended.rules.op_types()) and ("", "HardSwish") not in default_ops


def test_extended_forms_of_ort_ops():
    extended = NnapiBackend().configure({"compile_ops": "extended"})
    clip = model([node("Clip", ["x", "lo", "hi"])], {"x": [5]}, inits={"lo": np.float32(-0.5), "hi": np.float32(2)})
    assert not supports_all(clip, NnapiBackend())["clip_0"]
    assert ops(close(clip, {"x": random((5,), 1, -3, 3)}, extended)) == ["MAXIMUM", "MINIMUM"]
    pool = model([node("AveragePool", ["x"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1,
                       strides=[2, 2])], {"x": [1, 2, 7, 7]})
    close(pool, {"x": random((1, 2, 7, 7), 2)}, extended)


def test_comparisons_and_logic_produce_bool8():
    extended = NnapiBackend().configure({"compile_ops": "extended"})
    proto = model([node("Greater", ["a", "b"], ["g"]), node("Not", ["g"], ["n"]), node("And", ["n", "m"], ["y"])],
                  {"a": [3, 4], "b": [4], "m": ([3, 4], BOOL)}, outputs={"y": BOOL})
    rng = np.random.default_rng(3)
    payload = close(proto, {"a": random((3, 4), 1), "b": random((4,), 2), "m": rng.integers(0, 2, (3, 4)).astype(bool)},
                    extended)
    m = nnapi_model(payload)
    assert m.operands[m.outputs[0]].code == OperandCode.TENSOR_BOOL8


def test_the_emulator_refuses_malformed_models():
    proto = model([node("Relu", ["x"])], {"x": [3]})
    m = nnapi_model(compile_whole(proto))
    with pytest.raises(CompileError, match="1 inputs"):
        emulator.run(m, [])
    with pytest.raises(CompileError, match="int32"):
        emulator.run(m, [np.zeros(3, np.int32)])
    m.operands[m.outputs[0]].dims = (4,)
    with pytest.raises(CompileError, match="shape"):
        emulator.run(m, [np.zeros(3, np.float32)])


def test_uint8_ops_keep_their_quantization_inside_a_partition():
    proto = model([node("QuantizeLinear", ["x", "s", "z"], ["q"]), node("MaxPool", ["q"], ["p"], kernel_shape=[2, 2]),
                   node("DequantizeLinear", ["p", "s", "z"])],
                  {"x": [1, 2, 4, 4]}, inits={"s": np.float32(0.1), "z": np.uint8(10)})
    payload = close(proto, {"x": random((1, 2, 4, 4), 5, -1, 10)}, atol=1e-6)
    m, pool = operation(payload, OperationCode.MAX_POOL_2D)
    assert m.operands[pool.outputs[0]].code == OperandCode.TENSOR_QUANT8_ASYMM
    assert (m.operands[pool.outputs[0]].scale, m.operands[pool.outputs[0]].zero_point) == (np.float32(0.1), 10)
    assert serialize.read(payload.data).operands[m.inputs[0]].code == OperandCode.TENSOR_FLOAT32
