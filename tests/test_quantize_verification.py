"""Verification in quantization steps, and relative errors only where the reference is not near zero."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import quant_models
from onnx import TensorProto, helper, numpy_helper

import mobile_ep
from mobile_ep import runtime

SCALE = 0.05


def _dq_output_model(path, scale=SCALE, per_channel=False):
    """x(float) → QuantizeLinear → DequantizeLinear → y: an output dequantized from quantized data."""
    s = np.array([scale, 2 * scale, 3 * scale], np.float32) if per_channel else np.array(scale, np.float32)
    z = np.zeros(s.shape, np.uint8)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4]),
                               helper.make_tensor_value_info("q", TensorProto.UINT8, [1, 3, 4])],
                              [numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10), str(path))
    return path


def test_outputs_from_quantize_and_dequantize_are_found(tmp_path):
    found = runtime.quantized_outputs(_dq_output_model(tmp_path / "m.onnx"))
    assert set(found) == {"y", "q"}
    assert found["q"].integer and not found["y"].integer
    assert float(found["y"].scale) == pytest.approx(SCALE)


def test_a_dequantized_output_passes_within_one_step_and_fails_beyond():
    q = {"y": runtime.QuantizedOutput(np.array(SCALE))}
    ref = {"y": np.arange(12, dtype=np.float32).reshape(1, 3, 4) * SCALE}
    one_step = {"y": ref["y"] + np.float32(SCALE) * (np.arange(12).reshape(1, 3, 4) % 2)}
    (diff,) = runtime.compare(ref, one_step, quantized=q)
    assert diff.ok and diff.max_steps == 1 and diff.step == pytest.approx(SCALE)
    assert "passes at <= 1" in diff.note
    (float_only,) = runtime.compare(ref, one_step)  # the float tolerance alone rejects one step
    assert not float_only.ok
    (two,) = runtime.compare(ref, {"y": ref["y"] + np.float32(2 * SCALE)}, quantized=q)
    assert not two.ok and two.max_steps == 2


def test_per_channel_steps_use_each_channel_scale():
    scales = np.array([0.1, 0.2, 0.3])
    q = {"y": runtime.QuantizedOutput(scales, axis=1)}
    ref = np.zeros((1, 3, 2), np.float32)
    got = ref + scales.reshape(1, 3, 1).astype(np.float32)  # one step in every channel
    (diff,) = runtime.compare({"y": ref}, {"y": got}, quantized=q)
    assert diff.ok and diff.max_steps == 1
    (worse,) = runtime.compare({"y": ref}, {"y": ref + np.float32(0.2)}, quantized=q)  # 2 steps of channel 0
    assert not worse.ok and worse.max_steps == 2


def test_quantized_integers_pass_at_one_step():
    q = {"q": runtime.QuantizedOutput(np.array(SCALE), integer=True)}
    ref = {"q": np.array([10, 20, 30], np.uint8)}
    (diff,) = runtime.compare(ref, {"q": np.array([11, 20, 29], np.uint8)}, quantized=q)
    assert diff.ok and diff.max_steps == 1 and diff.max_rel is None
    (bad,) = runtime.compare(ref, {"q": np.array([12, 20, 30], np.uint8)}, quantized=q)
    assert not bad.ok and bad.max_steps == 2


def test_relative_error_is_measured_only_above_the_floor():
    ref = {"y": np.array([1e-12, 2.0], np.float32)}
    (diff,) = runtime.compare(ref, {"y": np.array([5e-5, 2.0], np.float32)})
    assert diff.ok and diff.max_rel == 0.0 and diff.rel_floor == runtime.ATOL
    assert diff.as_dict()["rel_error_where_abs_reference_above"] == runtime.ATOL
    (tiny,) = runtime.compare({"y": np.array([1e-12, 0.0], np.float32)}, {"y": np.array([5e-5, 0.0], np.float32)})
    assert tiny.ok and tiny.max_rel is None


def test_convert_reports_step_errors_of_a_qdq_model(tmp_path):
    model = quant_models.write("resnet18", tmp_path / "in")
    result = mobile_ep.convert(model, "nnapi", tmp_path / "out")
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    outputs = [o for v in report["verification"] for o in v["outputs"]]
    assert outputs and all(o["ok"] and o["max_step_error"] <= 1 for o in outputs)
    assert all(o["step"] > 0 for o in outputs)
    assert all(v.ok for v in result.verification)


@pytest.mark.parametrize("ep", ["coreml"])
def test_qdq_groups_written_as_the_cpus_integer_kernels_are_verified_at_the_level_that_runs_them(tmp_path, ep):
    # Core ML takes none of the QDQ groups: convert writes them as onnxruntime's CPU fusions (QLinearConv), the
    # integer kernels the default level makes of them, 4 output steps from the float arithmetic the basic level
    # runs the original's QDQ graph in; the .onnx and .ort are compared with the original at the default level
    source = tmp_path / "ties.onnx"
    onnx.save(quant_models.requantization_ties(), source)
    result = mobile_ep.convert(source, ep, tmp_path / "out")
    written = onnx.load(str(tmp_path / "out" / f"ties.{ep}.onnx"))
    assert ("com.microsoft", "QLinearConv") in {(n.domain, n.op_type) for n in written.graph.node}
    assert runtime.holds_integer_kernels(tmp_path / "out" / f"ties.{ep}.ort")
    assert [v.ok for v in result.verification] == [True, True], result.verification
    outputs = [o for v in result.verification for o in v.outputs]
    assert all(o.max_abs == 0.0 for o in outputs), outputs


def test_a_model_without_integer_kernels_is_not_taken_for_one(tmp_path):
    path = _dq_output_model(tmp_path / "m.onnx")
    assert not runtime.holds_integer_kernels(path)
