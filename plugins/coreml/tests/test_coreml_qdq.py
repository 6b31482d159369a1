"""QDQ models on Core ML: ORT's CoreML EP has no Q/DQ support; ``-O coreml.fold_qdq=true`` makes convert turn the
model into the float graph it describes (mobile_ep_coreml.qdq), which the EP and --compile take whole, verified
within one quantization step."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import mobile_ep
from mobile_ep import runtime
from mobile_ep.cli.main import main

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "tests"))
import quant_models  # noqa: E402

FOLD = mobile_ep.Options.build("coreml", options=["coreml.fold_qdq=true"])


@pytest.fixture(scope="module")
def qdq_models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qdq")
    return {name: quant_models.write(name, folder) for name in quant_models.ARCHITECTURES}


def _within_one_step(result) -> None:
    assert result.verification and all(v.ok for v in result.verification)
    assert max(o.max_steps for v in result.verification for o in v.outputs) <= 1


def test_without_the_option_the_ep_takes_little_of_a_qdq_model(qdq_models, tmp_path):
    result = mobile_ep.convert(qdq_models["resnet18"], "coreml", tmp_path)
    assert "fold-qdq" not in {r["rewrite"] for r in result.check.rewrites}
    assert result.check.supported_nodes < 0.5 * result.check.nodes


@pytest.mark.parametrize("name", tuple(quant_models.ARCHITECTURES))
def test_fold_qdq_makes_one_partition_verified_within_one_step(qdq_models, name, tmp_path):
    result = mobile_ep.convert(qdq_models[name], "coreml", tmp_path, options=FOLD)
    report = result.check
    assert "fold-qdq" in {r["rewrite"] for r in report.rewrites}
    assert len(report.partitions) == 1 and report.supported_nodes == report.nodes
    _within_one_step(result)


def test_fold_qdq_compiles_one_partition(qdq_models, tmp_path):
    result = mobile_ep.convert(qdq_models["mobilenet_v2"], "coreml", tmp_path, compile=True, options=FOLD)
    assert len(result.compiled.compiled) == 1 and not result.compiled.failures
    _within_one_step(result)


def test_a_folded_weight_is_what_onnxruntime_dequantizes(tmp_path):
    # a per-axis int8 weight and an int32 bias, dequantized by onnxruntime and by the fold
    rng = np.random.default_rng(0)
    w = rng.integers(-128, 128, (4, 3, 1, 1)).astype(np.int8)
    scales = np.array([0.1, 0.02, 0.3, 0.004], np.float32)
    nodes = [helper.make_node("DequantizeLinear", ["w", "s", "z"], ["w_f"], axis=0),
             helper.make_node("Conv", ["x", "w_f"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(scales, "s"),
                               numpy_helper.from_array(np.zeros(4, np.int8), "z")])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10), str(path))
    result = mobile_ep.convert(path, "coreml", tmp_path / "out", options=FOLD)
    assert [r["rewrite"] for r in result.check.rewrites] == ["fold-qdq"] and result.check.supported_nodes == 1
    written = onnx.load(result.outputs["onnx"])
    folded = numpy_helper.to_array(next(t for t in written.graph.initializer
                                        if t.dims == [4, 3, 1, 1] and t.data_type == TensorProto.FLOAT))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = np.zeros((1, 3, 4, 4), np.float32)
    x[0, :, 0, 0] = 1.0  # the output at (0, 0) of each channel is the sum of its three weights
    expected = session.run(None, {"x": x})[0][0, :, 0, 0]
    np.testing.assert_array_equal(folded.sum(axis=(1, 2, 3), dtype=np.float32), expected)


def _payload_op_types(result, folder) -> list[str]:
    from mobile_ep import runtime
    from mobile_ep_coreml.compiler import open_payload

    steps = runtime.plan_compiled(onnx.load(result.compiled.path), folder)
    (step,) = [s for s in steps if s.kind == "partition"]
    return open_payload(step.payload).op_types


def test_compile_stores_folded_weights_compressed_from_ios16(qdq_models, tmp_path):
    ios16 = mobile_ep.Options.build("coreml", options=["coreml.fold_qdq=true", "coreml.deployment_target=iOS16"])
    result = mobile_ep.convert(qdq_models["resnet18"], "coreml", tmp_path / "16", compile=True, options=ios16)
    assert "constexpr_affine_dequantize" in _payload_op_types(result, tmp_path / "16")
    _within_one_step(result)
    # iOS 15 has no constexpr ops: the same weights as float32 constants
    ios15 = mobile_ep.convert(qdq_models["resnet18"], "coreml", tmp_path / "15", compile=True, options=FOLD)
    assert "constexpr_affine_dequantize" not in _payload_op_types(ios15, tmp_path / "15")


def test_quantize_for_coreml_is_weight_only_and_compiles_compressed(tmp_path):
    from mobile_ep.quantize import quantize

    float_model = quant_models.write("mobilenet_v2", tmp_path / "float", quantized=False)
    report = quantize(float_model, "coreml", tmp_path / "m.qdq.onnx", random=3, options=FOLD)
    assert report.config["activations"] == "float (weights only)" and report.accuracy[0].sqnr_db > 20
    ops = [n.op_type for n in onnx.load(str(tmp_path / "m.qdq.onnx")).graph.node]
    assert "QuantizeLinear" not in ops and ops.count("DequantizeLinear") > 0 and "Clip" in ops  # ReLU6 kept
    after = report.check.after_convert["coreml"]
    assert len(after.partitions) == 1 and after.supported_nodes == after.nodes
    ios16 = mobile_ep.Options.build("coreml", options=["coreml.fold_qdq=true", "coreml.deployment_target=iOS16"])
    result = mobile_ep.convert(tmp_path / "m.qdq.onnx", "coreml", tmp_path / "out", compile=True, options=ios16)
    assert "constexpr_affine_dequantize" in _payload_op_types(result, tmp_path / "out")
    assert all(v.ok for v in result.verification)


def test_a_shape_onnxruntime_leaves_unknown_is_not_a_dynamic_input(tmp_path):
    """Without fold_qdq, onnxruntime's NHWC kernels come with Transposes of unknown output shape in a model whose
    input is static: that is said as such, and no --shape is suggested (it cannot help)."""
    qdq = quant_models.write("resnet18", tmp_path / "models", per_channel=True)
    out = tmp_path / "out"
    mobile_ep.convert(qdq, "coreml", out)
    report = json.loads((out / "report.json").read_text())
    reasons = [u["reason"] for u in report["partitioning"]["unsupported"]]
    unknown = [r for r in reasons if "shape unknown after" in r]
    assert unknown and all("input sizes cannot give it" in r for r in unknown), reasons
    assert not any("--shape" in r or "dynamic" in r for r in reasons), reasons
    assert not any("--shape" in s for s in report["partitioning"]["suggestions"]), report["partitioning"]


def _ties(tmp_path) -> pathlib.Path:
    path = tmp_path / "ties.qdq.onnx"
    onnx.save(quant_models.requantization_ties(), str(path))
    return path


def test_fold_qdq_is_verified_against_the_qdq_graphs_float_arithmetic(tmp_path):
    """onnxruntime's default level runs this QDQ model as integer kernels, 4 output steps away from its float
    arithmetic (QuantizeLinear and DequantizeLinear as written), which is what fold_qdq computes: convert
    compares with the original run with optimizations disabled, says so, and the fold matches it exactly."""
    path = _ties(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["convert", str(path), "--ep", "coreml", "-O", "coreml.fold_qdq=true", "-o",
                                       str(out)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.stdout.split())
    assert said.count("(compared with the original run with onnxruntime's graph optimizations disabled "
                      "because fold-qdq writes the float arithmetic of the QDQ graph") == 2, result.stdout
    report = json.loads((out / "report.json").read_text())
    for v in report["verification"]:
        assert v["reference"].startswith("compared with the original run with onnxruntime's graph optimizations")
        assert [o["max_step_error"] for o in v["outputs"]] == [0.0]
    # the default level's integer kernels are 4 steps away from the same fold: that reference fails it
    default = runtime.verify(path, [out / "ties.qdq.coreml.onnx"], reference_level="all")
    assert [o.max_steps for o in default[0].outputs] == [4.0] and not default[0].ok


def test_fold_qdq_against_the_disabled_level_still_finds_a_real_mismatch(tmp_path):
    """A folded model whose last Conv has a bias of two output steps: a mismatch, with the same reference and
    tolerance the fold passes with."""
    path = _ties(tmp_path)
    out = tmp_path / "out"
    mobile_ep.convert(path, "coreml", out, options=FOLD)
    folded = onnx.load(str(out / "ties.qdq.coreml.onnx"))
    (conv,) = [n for n in folded.graph.node if n.op_type == "Conv" and n.name == "conv_2"]
    assert len(conv.input) == 2
    folded.graph.initializer.append(numpy_helper.from_array(np.full(4, 0.06, np.float32), "off_by_two_steps"))
    conv.input.append("off_by_two_steps")
    onnx.save(folded, str(tmp_path / "off.onnx"))
    (v,) = runtime.verify(path, [tmp_path / "off.onnx"], reference_level="disable")
    assert not v.ok and v.outputs[0].max_steps >= 2, v.outputs
    (same,) = runtime.verify(path, [out / "ties.qdq.coreml.onnx"], reference_level="disable")
    assert same.ok and same.outputs[0].max_steps == 0
