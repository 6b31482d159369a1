"""``convert --ep qnn --compile``: the EPContext model and QNN context binary made by onnxruntime-qnn, run on the
HTP simulator against onnxruntime's CPU result."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import onnx
import onnx.backend.test
import pytest
import qnn_models
from click.testing import CliRunner
from mobile_ep_qnn import compile as compile_qnn

from mobile_ep.cli.main import main

LIGHT = pathlib.Path(onnx.backend.test.__file__).parent / "data" / "light"


def _convert(path, out, *options):
    result = CliRunner().invoke(main, ["convert", str(path), "--ep", "qnn", "--compile", "-o", str(out), *options])
    assert result.exit_code == 0, result.output
    return json.loads((out / "report.json").read_text())["compiled"]


def test_light_model_compiles_to_a_context_binary_that_runs(tmp_path, qnn_backend, qnn_ep):
    compiled = _convert(LIGHT / "light_squeezenet.onnx", tmp_path)
    model_path = pathlib.Path(compiled["path"])
    assert model_path.name == "light_squeezenet.qnn.compiled.onnx"
    model = onnx.load(str(model_path))
    [node] = [n for n in model.graph.node if n.op_type == "EPContext"]
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attributes["source"] == b"QNNExecutionProvider" and attributes["embed_mode"] == 0
    binary = model_path.parent / attributes["ep_cache_context"].decode()
    assert binary.is_file() and binary.stat().st_size > 0
    [partition] = compiled["partitions"]
    metadata = partition["metadata"]
    assert metadata["ep_sdk_version"] == attributes["ep_sdk_version"].decode()
    assert metadata["soc_model"] == "60" and float(metadata["max_abs_error"]) <= 1e-2
    assert len(partition["nodes"]) == compiled["nodes"]  # the whole model in one partition
    # The artifact loads back with the QNN EP (from the binary, not rebuilt) and runs.
    session = qnn_ep.session(str(model_path))
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    (y,) = session.run(None, {session.get_inputs()[0].name: x})
    import onnxruntime as ort

    cpu = ort.InferenceSession(str(LIGHT / "light_squeezenet.onnx"), providers=["CPUExecutionProvider"])
    (expected,) = cpu.run(None, {cpu.get_inputs()[0].name: x})
    np.testing.assert_allclose(y, expected, atol=1e-2, rtol=1e-2)
    kotlin = (tmp_path / "adapter" / "kotlin" / "QnnEpContextRunner.kt").read_text()
    assert "addQnn" in kotlin and "ep_sdk_version" in kotlin


def test_light_shufflenet_compiles_and_verifies(tmp_path):
    """Grouped convolutions, Transpose, Sum, padded and unpadded AveragePool, Gemm: with SqueezeNet, what the
    simulator compiles of the light models' ops in the default run (Inception v1 crashes it, below; Inception
    v2 and DenseNet take ~2 min each there: ``tox -e qnn-oracle`` territory)."""
    compiled = _convert(LIGHT / "light_shufflenet.onnx", tmp_path)
    [partition] = compiled["partitions"]
    assert len(partition["nodes"]) == compiled["nodes"] == compiled["compiled_nodes"]
    assert partition["metadata"]["arithmetic"] == "fp16"


def test_a_crash_of_the_qnn_ep_compiling_is_one_line_and_exit_8(tmp_path):
    """onnxruntime-qnn 2.7 dies of SIGSEGV in a thread of its own when the compiled light_inception_v1 runs on
    the HTP simulator: one line naming the model and the step, exit code 8, no output written.  (When a new
    onnxruntime-qnn stops crashing, this fails: compile it as the other light models.)"""
    import os
    import subprocess
    import sys

    source = LIGHT / "light_inception_v1.onnx"
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "mobile_ep.cli", "convert", str(source), "--ep", "qnn", "--compile",
                           "-o", str(out)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 8, (proc.returncode, proc.stderr[-2000:])
    errors = [line for line in proc.stderr.splitlines() if line.startswith("mobile-ep: error")]
    assert errors == [f'mobile-ep: error: {source}: onnxruntime crashed (SIGSEGV) at step "compiling partitions": '
                      "a bug of that library on this model, not reported as an exception; nothing was written "
                      "(the output folder keeps its previous set)"], proc.stderr[-2000:]
    assert not out.exists() or not any(out.iterdir())


def test_fp16_precision_compiles_within_its_tolerance(tmp_path):
    path = tmp_path / "cnn.onnx"
    onnx.save(qnn_models.small_cnn(), path)
    compiled = _convert(path, tmp_path / "out", "-O", "qnn.precision=fp16")
    metadata = compiled["partitions"][0]["metadata"]
    assert metadata["precision"] == "fp16" and float(metadata["max_abs_error"]) <= 2e-2


def test_a_deep_float32_model_is_checked_with_the_tolerance_of_the_fp16_arithmetic_the_htp_uses(tmp_path):
    """float32 graphs run in fp16 on the HTP (the EP's enable_htp_fp16_precision defaults to 1): 24 residual
    layers are off by more than 1e-2 of an element near zero, as fp16 rounding makes them, and verify; the
    report says in what arithmetic and within what tolerance."""
    path = tmp_path / "deep.onnx"
    onnx.save(qnn_models.deep_residual_mlp(), path)
    compiled = _convert(path, tmp_path / "out")
    [partition] = compiled["partitions"]
    metadata = partition["metadata"]
    assert metadata["precision"] == "float32" and metadata["arithmetic"] == "fp16"
    assert metadata["tolerance"] == "atol 0.01 + 0.03 of each output's largest magnitude (fp16 arithmetic on the HTP)"
    assert 1e-2 < float(metadata["max_abs_error"]) < 0.1


def test_a_result_off_by_more_than_fp16_rounding_stays_a_mismatch():
    rng = np.random.default_rng(0)
    reference = {"y": (rng.standard_normal((4, 64)) * 5).astype(np.float32)}
    rounded = {"y": reference["y"].astype(np.float16).astype(np.float32)}
    assert compile_qnn.compare(reference, rounded, "float32")[1]
    wrong = {"y": reference["y"] * np.float32(1.1)}  # a wrong lowering: a tenth of the scale off
    worst, ok = compile_qnn.compare(reference, wrong, "float32")
    assert not ok and worst > 1.0
    shifted = {"y": reference["y"].copy()}
    shifted["y"][0, 0] += np.float32(0.04 * np.max(np.abs(reference["y"])))  # one element, 4% of the scale
    assert not compile_qnn.compare(reference, shifted, "fp16")[1]


def test_function_ops_taken_whole_compile_and_run_within_tolerance(tmp_path):
    """The GroupNormalization, HardSwish and CastLike the backend claims whole (kept whole in the written model)
    run on the HTP simulator within float32's tolerance of onnxruntime's CPU result on the original."""
    path = tmp_path / "fn.onnx"
    onnx.save(qnn_models.function_op_cnn(), path)
    compiled = _convert(path, tmp_path / "out")
    [partition] = compiled["partitions"]
    assert float(partition["metadata"]["max_abs_error"]) <= 1e-2
    written = onnx.load(str(tmp_path / "out" / "fn.qnn.onnx"))
    assert {"GroupNormalization", "HardSwish", "CastLike"} <= {n.op_type for n in written.graph.node}


def test_float64_inside_the_graph_runs_as_float32_within_tolerance(tmp_path):
    """float64 inside the graph is computed as float32 by the EP: within float32's tolerance of onnxruntime's
    float64 CPU result."""
    path = tmp_path / "f64.onnx"
    onnx.save(qnn_models.float64_softmax(), path)
    compiled = _convert(path, tmp_path / "out")
    [partition] = compiled["partitions"]
    assert len(partition["nodes"]) == 5 and float(partition["metadata"]["max_abs_error"]) <= 1e-2


def test_quantized_model_compiles(tmp_path):
    # (--no-cost-model: the toy CNN's partition saves less than its copies cost; the test is about compiling it)
    compiled = _convert(qnn_models.qdq_cnn(tmp_path), tmp_path / "out", "-O", "qnn.precision=quantized",
                        "--no-cost-model")
    [partition] = compiled["partitions"]
    assert partition["metadata"]["precision"] == "quantized"
    left = sorted(n.op_type for n in onnx.load(compiled["path"]).graph.node if n.op_type != "EPContext")
    assert left == ["DequantizeLinear", "QuantizeLinear"]  # the boundary Q/DQ run on the CPU


def test_model_the_ep_takes_nothing_of_is_a_warning(tmp_path):
    path = tmp_path / "dynamic.onnx"
    onnx.save(qnn_models.dynamic_cnn(), path)
    result = CliRunner().invoke(main, ["convert", str(path), "--ep", "qnn", "--compile", "-o", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "--compile compiled no partition" in result.output
    assert not list((tmp_path / "o").glob("*.compiled.onnx"))


@pytest.mark.parametrize("precision", ["float32"])
def test_without_compile_the_ep_aware_model(tmp_path, precision):
    out = tmp_path / "o"
    result = CliRunner().invoke(main, ["convert", str(LIGHT / "light_squeezenet.onnx"), "--ep", "qnn", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "light_squeezenet.qnn.onnx").is_file() and (out / "light_squeezenet.qnn.ort").is_file()
    assert not list(out.glob("*.compiled.onnx"))


def test_quantize_for_qnn_then_compile(tmp_path, qnn_backend, qnn_ep):
    """``mobile-ep quantize --ep qnn`` (onnxruntime.quantization's QNN configuration), then the oracle and
    ``convert --compile`` on the quantized model."""
    from mobile_ep.testing import run_oracle

    float_path, quantized = tmp_path / "cnn.onnx", tmp_path / "cnn_q.onnx"
    onnx.save(qnn_models.small_cnn(), float_path)
    result = CliRunner().invoke(main, ["quantize", str(float_path), "--ep", "qnn", "--random", "4", "-o", str(quantized)])
    assert result.exit_code == 0, result.output
    assert "quantized for qnn" in result.output
    placement = run_oracle(qnn_backend, quantized, qnn_ep, case="quantized for qnn")
    assert placement.matches, placement.diff()
    assert len(placement.real.partitions) == 1
    compiled = _convert(quantized, tmp_path / "out", "-O", "qnn.precision=quantized", "--no-cost-model")
    assert len(compiled["partitions"]) == 1


def test_an_ep_crash_while_compiling_is_an_error_not_a_crash(tmp_path):
    """onnxruntime-qnn 2.7 crashes (segmentation fault) creating a session whose graph writes an int64 graph output of
    rank 5 (a Cast the EP takes): ``--compile`` creates that session in a child process, so the crash is a one-line
    error of mobile-ep, with the backend's reason for the node saying the session fails."""
    from onnx import TensorProto, helper

    shape = [2, 3, 2, 2, 2]
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Cast", ["i"], ["y"], to=7, name="cast")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape),
              helper.make_tensor_value_info("i", TensorProto.INT32, shape)],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, shape),
         helper.make_tensor_value_info("y", TensorProto.INT64, shape)])
    path = tmp_path / "crash.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), path)
    check = CliRunner().invoke(main, ["check", str(path), "--ep", "qnn", "-v"])
    assert check.exit_code == 0 and "int64 graph output of rank 5" in check.output and "crashes" in check.output
    result = CliRunner().invoke(main, ["convert", str(path), "--ep", "qnn", "--compile", "-o", str(tmp_path / "o")])
    assert result.exit_code != 0
    assert "crashed creating the session" in result.output and "Traceback" not in result.output
