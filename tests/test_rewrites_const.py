"""``--const NAME=VALUE``: an input fixed to a constant lets onnxruntime fold the arithmetic (and an ``If``)
on it away; convert verifies against the original run with that value."""

from __future__ import annotations

import json

import modern_models
import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from test_rewrites_models import loads_at_every_level

import mobile_ep
from mepkit import has_backend
from mobile_ep.cli.main import main
from mobile_ep.errors import UsageError

pytestmark = pytest.mark.skipif(not has_backend("nnapi"), reason="the NNAPI plugin is not installed")


def test_a_constant_sample_rate_folds_the_if_away(tmp_path):
    source = tmp_path / "vad.onnx"
    onnx.save(modern_models.vad(), source)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["convert", str(source), "--ep", "nnapi", "-o", str(out), "--no-cost-model",
                                       "--const", "sr=16000"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    partitioning = report["partitioning"]
    assert len(partitioning["partitions"]) == 1 and partitioning["supported_nodes"] == partitioning["nodes"]
    assert all(v["ok"] for v in report["verification"])
    written = onnx.load(out / "vad.nnapi.onnx")
    assert [i.name for i in written.graph.input] == ["input", "state"]
    assert not {"If", "Equal"} & {n.op_type for n in written.graph.node}
    loads_at_every_level(out / "vad.nnapi.onnx")


def test_the_value_decides_the_branch_verified_against(tmp_path):
    """sr=8000 takes the other branch; the written model computes what the original does with 8000."""
    source = tmp_path / "vad.onnx"
    onnx.save(modern_models.vad(), source)
    for rate in (16000, 8000):
        out = tmp_path / str(rate)
        mobile_ep.convert(source, "nnapi", out, cost_model=False, const={"sr": rate})
        import onnxruntime as ort

        feeds = {"input": np.linspace(-1, 1, 256, dtype=np.float32)[None], "state": np.zeros((2, 1, 16), np.float32)}
        original = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(
            None, {**feeds, "sr": np.array(rate, np.int64)})
        written = ort.InferenceSession(str(out / "vad.nnapi.onnx"), providers=["CPUExecutionProvider"]).run(None, feeds)
        np.testing.assert_allclose(written[0], original[0], rtol=1e-5, atol=1e-6)


def test_a_constant_mask_with_its_shape_given(tmp_path):
    proto = modern_models.bert()
    proto.graph.input[1].type.tensor_type.shape.dim[1].dim_param = "sequence"  # a dynamic mask length
    source = tmp_path / "bert.onnx"
    onnx.save(proto, source)
    out = tmp_path / "out"
    mobile_ep.convert(source, "nnapi", out, cost_model=False, const="attention_mask=1",
                      shape={"attention_mask": (1, 16)})
    report = json.loads((out / "report.json").read_text())
    assert {u["op"] for u in report["partitioning"]["unsupported"]} <= {"Cast"}  # (of the int64 ids, at the input)
    assert all(v["ok"] for v in report["verification"])


@pytest.mark.parametrize("const, message", [
    ("nope=1", "--const nope: the model has no input 'nope'"),
    ("sr=1,2", "--const sr: 2 values for an input of 1 elements"),
    ("sr=x", "--const 'sr=x': expected NAME=VALUE"),
])
def test_bad_constants_are_one_line_errors(tmp_path, const, message):
    source = tmp_path / "vad.onnx"
    onnx.save(modern_models.vad(), source)
    result = CliRunner().invoke(main, ["check", str(source), "--ep", "nnapi", "--const", const])
    assert result.exit_code == UsageError.exit_code
    assert message in result.output and len(result.output.strip().splitlines()) == 1, result.output


def test_a_constant_mask_folds_the_dynamo_exporters_where_and_isnan(tmp_path):
    source = tmp_path / "bert.onnx"
    onnx.save(modern_models.bert(dynamo=True), source)
    out = tmp_path / "out"
    mobile_ep.convert(source, "nnapi", out, cost_model=False, const={"attention_mask": 1})
    report = json.loads((out / "report.json").read_text())
    partitioning = report["partitioning"]
    assert [u["op"] for u in partitioning["unsupported"]] == ["Cast"]  # (the int64 token ids, as int32 indices)
    assert len(partitioning["partitions"]) == 1 and partitioning["supported_nodes"] >= 0.97 * partitioning["nodes"]
    assert all(v["ok"] for v in report["verification"])
    written = onnx.load(out / "bert.nnapi.onnx").graph.node
    assert not {"Where", "IsNaN"} & {n.op_type for n in written}
    assert [list(n.input) for n in written if n.op_type == "Cast"] == [["input_ids"]]


def test_int64_shape_arithmetic_on_a_fixed_input_folds_away(tmp_path):
    """The exporters' dynamic reshapes (Shape, Gather, Mul, Unsqueeze, Concat into Reshape) fold once
    --shape fixes the input: only the float ops are left, in one partition."""
    from onnx import TensorProto, helper, numpy_helper

    ints = {name: numpy_helper.from_array(np.array(v, np.int64), name)
            for name, v in (("zero", 0), ("one", 1), ("two", 2), ("axes", [0]), ("minus", [-1]))}
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "zero"], ["n"], name="n"),
             helper.make_node("Gather", ["s", "one"], ["t"], name="t"),
             helper.make_node("Mul", ["t", "two"], ["t2"], name="t2"),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"], name="n1"),
             helper.make_node("Unsqueeze", ["t2", "axes"], ["t1"], name="t1"),
             helper.make_node("Concat", ["n1", "t1", "minus"], ["target"], name="target", axis=0),
             helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "target"], ["y0"], name="reshape"),
             helper.make_node("Sigmoid", ["y0"], ["y"], name="sigmoid")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "T", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], list(ints.values()))
    source = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), source)
    out = tmp_path / "out"
    mobile_ep.convert(source, "nnapi", out, shape={"x": (1, 6, 8)})
    report = json.loads((out / "report.json").read_text())
    assert report["partitioning"]["unsupported"] == [] and len(report["partitioning"]["partitions"]) == 1
    assert {n.op_type for n in onnx.load(out / "dyn.nnapi.onnx").graph.node} == {"Relu", "Reshape", "Sigmoid"}
