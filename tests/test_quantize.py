"""``mobile-ep quantize``: onnxruntime.quantization configured by the backend's hook, calibration data, report."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import quant_models

import mobile_ep
from mobile_ep import hookimpl
from mobile_ep.errors import UsageError
from mobile_ep.quantize import quantize


@pytest.fixture(scope="module")
def float_model(tmp_path_factory):
    return quant_models.write("mobilenet_v2", tmp_path_factory.mktemp("float"), quantized=False)


def _per_channel_dequantizers(path) -> int:
    graph = onnx.load(str(path)).graph
    inits = {t.name: t for t in graph.initializer}
    return sum(1 for n in graph.node if n.op_type == "DequantizeLinear" and n.input[1] in inits
               and len(inits[n.input[1]].dims) == 1 and inits[n.input[1]].dims[0] > 1)


def test_cli_random_calibration_is_labelled_and_reports_accuracy_and_partitions(float_model, tmp_path, mobile_ep_cli):
    out = tmp_path / "m.qdq.onnx"
    result = mobile_ep_cli("quantize", float_model, "--ep", "nnapi", "--random", "3", "-o", out, "--json",
                           plugins=None)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["calibration"] == {"source": report["calibration"]["source"], "samples": 3, "random": True}
    assert "smoke test" in report["calibration"]["source"]
    assert report["config"]["format"] == "QDQ" and report["config"]["activations"] == "QUInt8"
    (accuracy,) = report["accuracy"]
    assert accuracy["output"] == "output" and 0 < accuracy["max_abs_error"] < 1 and accuracy["sqnr_db"] > 15
    assert report["partitioning"]["as_is"]["supported_nodes"] > 0.9 * report["partitioning"]["as_is"]["nodes"]
    # onnxruntime loads the written model at every optimization level
    for level in (ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                  ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, ort.GraphOptimizationLevel.ORT_ENABLE_ALL):
        so = ort.SessionOptions()
        so.graph_optimization_level = level
        ort.InferenceSession(str(out), so, providers=["CPUExecutionProvider"])
    text = mobile_ep_cli("quantize", float_model, "--ep", "nnapi", "--random", "2", "-o", tmp_path / "t.onnx",
                         plugins=None)
    assert "a smoke test: not an accuracy measure" in text.stdout and "SQNR" in text.stdout


def test_nnapi_per_channel_only_for_conv_weights_from_api_29(float_model, tmp_path):
    at_28 = quantize(float_model, "nnapi", tmp_path / "28.onnx", random=2, check=False,
                     options=mobile_ep.Options.build("nnapi", options=["nnapi.api_level=28"]))
    assert "per_channel_tensors" not in at_28.config and _per_channel_dequantizers(tmp_path / "28.onnx") == 0
    at_29 = quantize(float_model, "nnapi", tmp_path / "29.onnx", random=2, check=False,
                     options=mobile_ep.Options.build("nnapi", options=["nnapi.api_level=29"]))
    graph = onnx.load(str(tmp_path / "29.onnx")).graph
    conv_count = sum(1 for n in graph.node if n.op_type == "Conv")
    assert at_29.config["per_channel_tensors"] == conv_count
    # per channel: the Conv weights and their biases, never the Gemm's
    gemm_inputs = {i for n in graph.node if n.op_type == "Gemm" for i in n.input}
    assert _per_channel_dequantizers(tmp_path / "29.onnx") == 2 * conv_count
    scales = {t.name: t for t in graph.initializer}
    assert not any(n.op_type == "DequantizeLinear" and n.output[0] in gemm_inputs
                   and list(scales[n.input[1]].dims) not in ([], [1]) for n in graph.node)


def test_calibration_folder_of_npy_and_npz(float_model, tmp_path):
    npy, npz = tmp_path / "npy", tmp_path / "npz"
    npy.mkdir()
    npz.mkdir()
    for i, image in enumerate(quant_models.images(3)):
        np.save(npy / f"{i}.npy", image)
        np.savez(npz / f"{i}.npz", input=image)
    for folder in (npy, npz):
        report = quantize(float_model, "nnapi", tmp_path / f"{folder.name}.onnx", calibration=folder, check=False)
        assert report.samples == 3 and not report.random and report.calibration == f"folder {folder}: 3 samples"
        assert report.accuracy[0].sqnr_db > 15


@pytest.mark.parametrize("content, message", [
    (lambda d: (d / "a.npy").write_bytes(b"not numpy"), "a.npy: not a numpy file"),
    (lambda d: np.save(d / "a.npy", np.zeros((1, 3, 8, 8), np.float32)),
     "a.npy: input 'input' has shape [1, 3, 8, 8]; the model takes [1, 3, 32, 32]"),
    (lambda d: np.savez(d / "a.npz", other=np.zeros(3)), "a.npz: no array for input 'input' (it has other)"),
    (lambda d: (d / "notes.txt").write_text("x"), "no .npy or .npz files in it"),
])
def test_bad_calibration_data_is_a_one_line_error(float_model, tmp_path, content, message, mobile_ep_cli):
    folder = tmp_path / "calib"
    folder.mkdir()
    content(folder)
    result = mobile_ep_cli("quantize", float_model, "--ep", "nnapi", "--calibration", folder, "-o",
                           tmp_path / "o.onnx", plugins=None)
    assert result.exit_code == 2
    assert result.stderr.startswith("mobile-ep: error: ") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_calibration_or_random_is_required(float_model, tmp_path, mobile_ep_cli):
    for args in ([], ["--random", "2", "--calibration", tmp_path]):
        result = mobile_ep_cli("quantize", float_model, "--ep", "nnapi", *args, plugins=None)
        assert result.exit_code == 2 and "--calibration DIR" in result.stderr


def test_a_backend_without_a_config_is_refused(float_model, tmp_path, plugins):
    with pytest.raises(UsageError, match="backend 'toy' declares no quantization"):
        quantize(float_model, "toy", tmp_path / "o.onnx", random=1, check=False, plugins=plugins)


def test_a_plugin_declares_its_own_quantization(float_model, tmp_path, plugins):
    class Int8Everything:
        @hookimpl
        def mobile_ep_quantization_config(self, backend, model_path, calibration_reader):
            if backend.name != "toy":
                return None
            from onnxruntime.quantization import QuantFormat, QuantType, StaticQuantConfig

            return StaticQuantConfig(calibration_reader, quant_format=QuantFormat.QDQ,
                                     activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)

    plugins.register(Int8Everything(), name="int8")
    report = quantize(float_model, "toy", tmp_path / "o.onnx", random=2, check=False, plugins=plugins)
    assert report.config["activations"] == "QInt8"
    graph = onnx.load(str(tmp_path / "o.onnx")).graph
    q = next(n for n in graph.node if n.op_type == "QuantizeLinear")
    zero_point = next(t for t in graph.initializer if t.name == q.input[2])
    assert zero_point.data_type == onnx.TensorProto.INT8
