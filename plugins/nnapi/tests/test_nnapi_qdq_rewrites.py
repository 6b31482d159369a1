"""convert's rewrites of QDQ units ORT's NNAPI EP refuses (mobile_ep_nnapi.qdq_rewrites): applied in QDQ units
only, claimed after convert as the written file is partitioned again, and verified within one output step."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from nnapi_models import I8, U8, model, node, qdq_inits, qdq_unary
from onnx import numpy_helper

import mobile_ep


def _convert(m, tmp_path):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    return mobile_ep.check(path, "nnapi"), mobile_ep.convert(path, "nnapi", tmp_path / "out")


def _steps(result) -> float:
    return max(o.max_steps for v in result.verification for o in v.outputs)


def test_qdq_flatten_becomes_a_qdq_reshape(tmp_path):
    checked, converted = _convert(qdq_unary("Flatten", axis=1), tmp_path)
    assert checked.backends["nnapi"].supported_nodes == 0  # a QDQ Flatten unit: refused whole
    after = converted.check
    assert [r["rewrite"] for r in after.rewrites] == ["qdq-flatten-to-reshape"]
    assert after.supported_nodes == after.nodes == 3 and len(after.partitions) == 1
    assert _steps(converted) == 0


def test_qdq_sigmoid_becomes_float_tanh_between_dequantize_and_quantize(tmp_path):
    m = qdq_unary("Sigmoid", out_scale=1 / 255, out_zp=0)
    checked, converted = _convert(m, tmp_path)
    assert checked.backends["nnapi"].supported_nodes == 0
    after = converted.check
    assert [r["rewrite"] for r in after.rewrites] == ["qdq-sigmoid-to-tanh"]
    assert after.supported_nodes == after.nodes and len(after.partitions) == 1
    assert all(v.ok for v in converted.verification) and _steps(converted) <= 1


def test_a_float_sigmoid_is_left_alone(tmp_path):
    checked, converted = _convert(model(node("Sigmoid", ["x"]), {"x": [1, 3, 8, 8]}), tmp_path)
    assert converted.check.rewrites == [] and converted.check.supported_nodes == 1


# -- whole QDQ units ORT's EP refuses, to the single nodes it takes ---------------------------------------
def _ort(path, feeds) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0].astype(np.int32)


def _max_step_difference(original, converted, shape, seeds=range(8)) -> int:
    """The largest difference, in output steps, between onnxruntime's CPU result on the original and on the
    written model, over random uint8 inputs."""
    worst = 0
    for seed in seeds:
        feeds = {"x": np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8)}
        worst = max(worst, int(np.abs(_ort(original, feeds) - _ort(converted.outputs["onnx"], feeds)).max()))
    return worst


def _conv_then(op_type, shape=(1, 3, 9, 9), channels=4, out_scale=0.05, out_zp=0, opset=13, per_channel=False,
               **attrs):
    """x(u8) -> QDQ Conv (int8 weights, per tensor or per output channel; int32 bias; Relu) -> Q(0.05, 0) -> DQ ->
    *op_type* -> Q(out) -> y."""
    rng = np.random.default_rng(0)
    weights = rng.integers(-127, 128, (channels, 3, 3, 3)).astype(np.int8)
    w_scale = np.linspace(0.005, 0.02, channels).astype(np.float32) if per_channel else np.array(0.01, np.float32)
    inits = {**qdq_inits("x", scale=0.02, zero_point=128), "w_q": weights,
             "w_scale": w_scale, "w_zp": np.zeros(w_scale.shape, np.int8),
             "b_q": rng.integers(-500, 500, channels).astype(np.int32), "b_scale": (np.float32(0.02) * w_scale),
             "b_zp": np.zeros(w_scale.shape, np.int32), **qdq_inits("c", scale=0.05, zero_point=0),
             **qdq_inits("y", scale=out_scale, zero_point=out_zp)}
    nodes = [
        node("DequantizeLinear", ["x", "x_scale", "x_zp"], ["x_dq"], name="dq_x"),
        node("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["w_dq"], name="dq_w", **({"axis": 0} if per_channel else {})),
        node("DequantizeLinear", ["b_q", "b_scale", "b_zp"], ["b_dq"], name="dq_b", **({"axis": 0} if per_channel else {})),
        node("Conv", ["x_dq", "w_dq", "b_dq"], ["conv_out"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Relu", ["conv_out"], ["relu_out"], name="relu"),
        node("QuantizeLinear", ["relu_out", "c_scale", "c_zp"], ["c"], name="q_c"),
        node("DequantizeLinear", ["c", "c_scale", "c_zp"], ["c_dq"], name="dq_c"),
        node(op_type, ["c_dq"], ["op_out"], name="target", **attrs),
        node("QuantizeLinear", ["op_out", "y_scale", "y_zp"], ["y"], name="q_y"),
    ]
    return model(nodes, {"x": (list(shape), U8)}, {"y": U8}, inits, opset=opset)


def _with_conv_after(m):
    """*m* with a QDQ 1×1 Conv unit after its output y (work enough for the cost model to keep a partition)."""
    channels = next(init.dims[0] for init in m.graph.initializer if init.name == "w_q")
    m.graph.initializer.extend([
        numpy_helper.from_array(np.random.default_rng(1).integers(-127, 128, (channels, channels, 1, 1)).astype(np.int8),
                                "w2_q"),
        numpy_helper.from_array(np.array(0.01, np.float32), "w2_scale"),
        numpy_helper.from_array(np.array(0, np.int8), "w2_zp"),
        numpy_helper.from_array(np.array(0.1, np.float32), "z_scale"),
        numpy_helper.from_array(np.array(128, np.uint8), "z_zp")])
    m.graph.node.extend([
        node("DequantizeLinear", ["y", "y_scale", "y_zp"], ["y_dq"], name="dq_y"),
        node("DequantizeLinear", ["w2_q", "w2_scale", "w2_zp"], ["w2_dq"], name="dq_w2"),
        node("Conv", ["y_dq", "w2_dq"], ["conv2_out"], name="conv2", kernel_shape=[1, 1]),
        node("QuantizeLinear", ["conv2_out", "z_scale", "z_zp"], ["z"], name="q_z")])
    m.graph.output[0].name = "z"
    return m


MAX_POOL_INPUT = (1, 3, 32, 32)


def _conv_then_max_pool(pool_scale=0.05, pool_zp=0, opset=13, per_channel=False):
    return _with_conv_after(_conv_then("MaxPool", shape=MAX_POOL_INPUT, channels=16, out_scale=pool_scale,
                                       out_zp=pool_zp, opset=opset, per_channel=per_channel, kernel_shape=[3, 3],
                                       strides=[2, 2], pads=[1, 1, 1, 1]))


@pytest.mark.parametrize("shape", [(1, 3, 7, 7), (1, 3, 1, 5), (1, 3, 200, 200)])
def test_qdq_global_average_pool_becomes_a_depthwise_qlinearconv(tmp_path, shape):
    # (200×200: 255·255·H·W overflows int32, so the weight is below 255)
    checked, converted = _convert(_conv_then("GlobalAveragePool", shape=shape, out_scale=0.01, out_zp=100), tmp_path)
    before = checked.backends["nnapi"]
    assert before.supported_nodes < before.nodes  # ORT's EP refuses a QDQ GlobalAveragePool unit
    after = converted.check
    assert [r["rewrite"] for r in after.rewrites] == ["qdq-gap-to-qlinearconv"]
    assert after.supported_nodes == after.nodes and len(after.partitions) == 1
    # integer sum, one rounding: measured at most one output step from onnxruntime's float mean
    assert _max_step_difference(tmp_path / "m.onnx", converted, shape) <= 1
    compiled = mobile_ep.convert(tmp_path / "m.onnx", "nnapi", tmp_path / "compiled", compile=True)
    assert len(compiled.check.partitions) == 1 and all(v.ok for v in compiled.verification)
    assert _steps(compiled) <= 1


def test_a_float_or_int8_global_average_pool_is_not_made_a_qlinearconv(tmp_path):
    _, converted = _convert(model(node("GlobalAveragePool", ["x"]), {"x": [1, 3, 8, 8]}), tmp_path / "float")
    assert converted.check.rewrites == []
    int8 = qdq_unary("GlobalAveragePool")
    for init in int8.graph.initializer:  # int8 data: NNAPI's QLinearConv takes uint8 activations only
        if init.name.endswith("_zp"):
            init.CopyFrom(numpy_helper.from_array(np.array(0, np.int8), init.name))
    for value in (*int8.graph.input, *int8.graph.output):
        value.type.tensor_type.elem_type = I8
    _, converted = _convert(int8, tmp_path / "int8")
    assert converted.check.rewrites == [] and converted.check.supported_nodes == 0


@pytest.mark.parametrize("per_channel", [False, True], ids=["per-tensor", "per-channel"])
def test_qdq_conv_and_max_pool_become_qlinearconv_and_a_uint8_max_pool(tmp_path, per_channel):
    checked, converted = _convert(_conv_then_max_pool(per_channel=per_channel), tmp_path)
    before = checked.backends["nnapi"]
    assert before.supported_nodes < before.nodes  # ORT's EP refuses the QDQ MaxPool unit
    after = converted.check
    assert [r["rewrite"] for r in after.rewrites] == ["qdq-maxpool-to-uint8"]
    assert after.supported_nodes == after.nodes == 6 and len(after.partitions) == 1
    assert _max_step_difference(tmp_path / "m.onnx", converted, MAX_POOL_INPUT) == 0  # exact
    compiled = mobile_ep.convert(tmp_path / "m.onnx", "nnapi", tmp_path / "compiled", compile=True)
    # (the emulator requantizes the convolutions in fixed point, as NNAPI does: within one step of onnxruntime's)
    assert len(compiled.check.partitions) == 1 and all(v.ok for v in compiled.verification) and _steps(compiled) <= 1


def test_a_max_pool_unit_is_left_alone_when_the_uint8_form_would_differ_or_be_refused(tmp_path):
    # output scale differs from the input's: no MaxPool unit forms (ORT's selector needs equal parameters), so
    # its DequantizeLinear, float MaxPool and QuantizeLinear are taken one by one, and a uint8 MaxPool would differ
    _, converted = _convert(_conv_then_max_pool(pool_scale=0.1), tmp_path / "scale")
    assert converted.check.rewrites == [] and "MaxPool" in converted.check.partitions[0].ops
    # fed by a graph input, not a Conv unit: ORT's EP takes no uint8 MaxPool on a partition input
    _, converted = _convert(qdq_unary("MaxPool", kernel_shape=[2, 2], strides=[2, 2]), tmp_path / "input")
    assert converted.check.rewrites == [] and converted.check.supported_nodes == 0
    # opset 11 (no uint8 MaxPool in ONNX): ORT forms no MaxPool unit either (its selector takes the opset-12
    # definition only), so the float MaxPool between its DequantizeLinear and QuantizeLinear is taken as it is
    _, converted = _convert(_conv_then_max_pool(opset=11), tmp_path / "opset")
    assert converted.check.rewrites == [] and "MaxPool" in converted.check.partitions[0].ops
