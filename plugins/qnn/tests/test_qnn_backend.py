"""The QNN backend through mobile-ep's CLI and API: options, reasons, several backends, the plugin entry point."""

from __future__ import annotations

import json

import onnx
import pytest
import qnn_models
from click.testing import CliRunner
from mobile_ep_qnn.backend import QnnBackend

from mobile_ep.cli.main import main
from mobile_ep.testing import node_support, proposal


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    path = tmp_path_factory.mktemp("qnn") / "encoder.onnx"
    onnx.save(qnn_models.transformer_encoder(), path)
    return path


def test_listed_as_an_installed_plugin():
    result = _cli("--strict", "list", "-v")
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("qnn "))
    assert "NHWC" in line and "mobile-ep-qnn" in line
    assert "-O qnn.soc_model=60" in result.output


def test_options_from_the_command_line(encoder):
    result = _cli("check", encoder, "--ep", "qnn", "-O", "qnn.soc_model=69", "-O", "qnn.precision=fp16", "--json")
    assert result.exit_code == 0, result.output
    backend = QnnBackend().configure({"soc_model": "69", "precision": "fp16", "htp_arch": "75"})
    assert (backend.options.soc_model, backend.options.precision, backend.options.htp_arch) == (69, "fp16", 75)
    options = backend.execution_provider().options
    assert options["soc_model"] == "69" and options["htp_arch"] == "75" and options["enable_htp_fp16_precision"] == "1"


@pytest.mark.parametrize("option, message", [
    ("qnn.backend_type=cpu", "has no libQnnCpu.so"),
    ("qnn.htp_arch=70", "htp_arch must be one of"),
    ("qnn.precision=int4", "expected one of float32, fp16, quantized"),
    ("qnn.soc_model=sixty", "expected an integer"),
])
def test_bad_options_are_one_line_errors(encoder, option, message):
    result = _cli("check", encoder, "--ep", "qnn", "-O", option)
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.output


def test_dynamic_shapes_are_refused_with_a_reason_to_act_on():
    answer = node_support(qnn_models.dynamic_cnn(), QnnBackend(), "conv1")
    assert not answer and "dynamic shape" in answer.reason and "static shapes" in answer.reason


def test_reasons_name_what_to_change():
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Gemm", ["a", "b"], ["y"], alpha=2.0, name="gemm")], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]), helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    answer = node_support(model, QnnBackend(), "gemm")
    assert not answer and "alpha or beta is not 1" in answer.reason


def test_lone_quantize_partitions_are_dropped(tmp_path):
    qdq = qnn_models.qdq_cnn(tmp_path)
    found = proposal(qdq, QnnBackend())
    kept = found.per_backend["qnn"]
    assert len(kept.partitions) == 1
    rejected = {n.op_type: reason for n, reason in kept.rejected.items()}
    assert "offload_graph_io_quantization" in rejected["QuantizeLinear"]
    assert "offload_graph_io_quantization" in rejected["DequantizeLinear"]
    off = proposal(qdq, QnnBackend().configure({"offload_graph_io_quantization": "false"}))
    assert not off.per_backend["qnn"].rejected  # the EP then takes the boundary Q/DQ too


def test_several_backends_in_registration_order(encoder):
    first = _cli("check", encoder, "--ep", "qnn,nnapi", "--json")
    assert first.exit_code == 0, first.output
    combined = json.loads(first.output)["combined"]
    assert combined["order"] == ["qnn", "nnapi"]
    assert combined["placement"] == {"qnn": 30, "nnapi": 0, "cpu": 0}  # qnn first takes everything
    second = _cli("check", encoder, "--ep", "nnapi,qnn", "--json")
    placement = json.loads(second.output)["combined"]["placement"]
    # NNAPI first takes what it can; QNN takes the rest (LayerNormalization, the GELU's Erf, 3-D MatMuls)
    assert placement["nnapi"] > 0 and placement["qnn"] > 0 and placement["cpu"] == 0


def test_explain_says_what_moves_a_node_onto_the_npu(tmp_path):
    path = tmp_path / "dynamic.onnx"
    onnx.save(qnn_models.dynamic_cnn(), path)
    result = _cli("explain", path, "conv1", "--ep", "qnn")
    assert result.exit_code == 0, result.output
    assert "qnn: CPU" in result.output and "dynamic shape" in result.output
    assert "--shape x=1,3,16,16" in result.output and "runs on qnn" in result.output


def test_generated_op_table_is_current():
    import pathlib

    result = _cli("ops", "--ep", "qnn", "--format", "md")
    assert result.exit_code == 0, result.output
    committed = (pathlib.Path(__file__).resolve().parents[3] / "docs" / "ops-qnn.md").read_text()
    assert result.stdout == committed, "run `mobile-ep ops --ep qnn --format md > docs/ops-qnn.md`"
