"""Models onnxruntime loads and runs are accepted: each is first run in onnxruntime here, then converted.

Built in code: dims of -1, shapes fixed inside control flow, what onnx's checker refuses but onnxruntime
runs, sparse initializers, strings, optional types, 4-bit weights, inputs a model only runs on when its
unknown dims are not 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mepkit import const, make_model, tensor


def cli(*args):
    return subprocess.run([sys.executable, "-m", "mobile_ep.cli", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})


def save(tmp_path, model, name, feeds=None):
    """Write *model*; onnxruntime must load it (and run it on *feeds*, if given)."""
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    if feeds is not None:
        session.run(None, feeds)
    return path


def value_info(name, type_proto):
    return helper.make_value_info(name, type_proto)


# -- dims of -1 ------------------------------------------------------------------------------------
def minus_one_model():
    m = make_model([helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Sigmoid", ["t"], ["y"])],
                   [tensor("x", [-1, 3, "h", "w"])], [tensor("y", [-1, 3, "h", "w"])])
    m.graph.value_info.append(tensor("t", [-1, 3, -1, -1]))
    return m


def test_a_dim_of_minus_one_is_an_unknown_dim_that_shape_fixes(tmp_path, plugins, mobile_ep_cli):
    path = save(tmp_path, minus_one_model(), "cls", {"x": np.ones((1, 3, 4, 4), np.float32)})
    result = mobile_ep_cli("check", str(path), "--ep", "toy", plugins=plugins)
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    result = mobile_ep_cli("convert", str(path), "--ep", "toy", "-o", str(out), "--shape", "x=1,3,48,192",
                           plugins=plugins)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["verification"] and all(v["ok"] for v in report["verification"])
    written = onnx.load(out / "cls.toy.onnx")
    assert [d.dim_value for d in written.graph.input[0].type.tensor_type.shape.dim] == [1, 3, 48, 192]


def test_other_negative_dims_stay_a_one_line_error(tmp_path, plugins, mobile_ep_cli):
    m = minus_one_model()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -2
    path = tmp_path / "neg2.onnx"
    onnx.save(m, path)
    result = mobile_ep_cli("check", str(path), "--ep", "toy", plugins=plugins)
    assert result.exit_code == 3
    assert result.stderr.strip().endswith("absurd shape: graph input 'x' has a negative dimension (-2)")


# -- shapes fixed inside control flow ------------------------------------------------------------
def lstm_branch(name, direct, hidden=4):
    rng = np.random.default_rng(0)
    inits = [const("W", rng.standard_normal((1, 4 * hidden, 3)).astype(np.float32)),
             const("R", rng.standard_normal((1, 4 * hidden, hidden)).astype(np.float32)),
             const("ax", np.array([0], np.int64)), const("s1", np.array([-1], np.int64)),
             const("s3", np.array([1, -1, 3], np.int64))]
    if direct:  # "xl" is [1, n, 3] and feeds the LSTM
        nodes = [helper.make_node("Unsqueeze", ["x", "ax"], ["xl"]),
                 helper.make_node("LSTM", ["xl", "W", "R"], ["Y", "Yh"], hidden_size=hidden)]
    else:  # "xl" is [n * 3] here: the same name, another shape
        nodes = [helper.make_node("Reshape", ["x", "s1"], ["xl"]), helper.make_node("Reshape", ["xl", "s3"], ["x3"]),
                 helper.make_node("LSTM", ["x3", "W", "R"], ["Y", "Yh"], hidden_size=hidden)]
    nodes.append(helper.make_node("Squeeze", ["Yh", "ax"], ["out"]))
    return helper.make_graph(nodes, name, [], [tensor("out", ["p", "q"])], initializer=inits)


@pytest.mark.parametrize("direct_first", [True, False])
def test_if_branches_with_lstms_after_shape_fixing(tmp_path, plugins, direct_first, mobile_ep_cli):
    m = make_model([helper.make_node("If", ["c"], ["y"], then_branch=lstm_branch("then", direct_first),
                                     else_branch=lstm_branch("else", not direct_first))],
                   [tensor("c", [], TensorProto.BOOL), tensor("x", ["n", 3])], [tensor("y", ["p", "q"])])
    path = save(tmp_path, m, "vad", {"c": np.array(True), "x": np.ones((5, 3), np.float32)})
    out = tmp_path / "out"
    result = mobile_ep_cli("convert", str(path), "--ep", "toy", "-o", str(out), "--shape", "x=5,3",
                           plugins=plugins)
    assert result.exit_code == 0, result.output
    written = out / "vad.toy.onnx"
    for c in (True, False):  # both branches of the written model load and run
        ort.InferenceSession(str(written)).run(None, {"c": np.array(c), "x": np.ones((5, 3), np.float32)})
    for level in (ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_ALL):
        so = ort.SessionOptions()
        so.graph_optimization_level = level
        ort.InferenceSession(str(written), so)


def test_a_shape_fix_onnxruntime_refuses_names_the_users_file_and_the_step(tmp_path, plugins, mobile_ep_cli):
    # com.microsoft:FusedMatMul: onnx's shape inference does not know it, onnxruntime's does
    m = make_model([helper.make_node("FusedMatMul", ["x", "w"], ["y"], domain="com.microsoft")],
                   [tensor("x", ["n", "k"])], [tensor("y", ["n", 2])], [const("w", np.ones((4, 2), np.float32))],
                   extra_opsets=[("com.microsoft", 1)])
    path = save(tmp_path, m, "fmm", {"x": np.ones((5, 4), np.float32)})
    for command in (["check", str(path)], ["convert", str(path), "-o", str(tmp_path / "out")]):
        result = mobile_ep_cli(*command, "--ep", "toy", "--shape", "x=5,3", plugins=plugins)
        assert result.exit_code == 3, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1
        assert lines[0].startswith(f"mobile-ep: error: {path}: fixing input shapes (--shape x=5,3): "), lines[0]
        assert "Incompatible dimensions" in lines[0] and "/tmp/mobile-ep-" not in lines[0]
    assert not (tmp_path / "out").exists()


# -- what onnx's checker refuses and onnxruntime runs ---------------------------------------------
def checker_refused_models():
    untyped = helper.make_tensor_type_proto(TensorProto.FLOAT, None)
    sequence = helper.make_sequence_type_proto(untyped)
    return {
        "no_shape_field": (make_model([helper.make_node("Relu", ["x"], ["y"])], [value_info("x", untyped)],
                                      [value_info("y", untyped)]), {"x": np.ones(3, np.float32)}),
        "sequence_io_without_shape": (
            make_model([helper.make_node("SequenceAt", ["s", "i"], ["y"])],
                       [value_info("s", sequence), tensor("i", [], TensorProto.INT64)], [value_info("y", untyped)]),
            {"s": [np.ones(2, np.float32)], "i": np.array(0, np.int64)}),
        "ir3_initializer_not_an_input": (
            make_model([helper.make_node("Add", ["x", "w"], ["y"])], [tensor("x", [2])], [tensor("y", [2])],
                       [const("w", np.ones(2, np.float32))], opset=9, ir_version=3), {"x": np.ones(2, np.float32)}),
    }


@pytest.mark.parametrize("name", sorted(checker_refused_models()))
def test_what_onnx_checker_refuses_but_onnxruntime_runs_is_accepted_with_one_note(tmp_path, name):
    model, feeds = checker_refused_models()[name]
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model)
    path = save(tmp_path, model, name, feeds)
    out = tmp_path / "out"
    proc = cli("convert", str(path), "--ep", "nnapi", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if "onnx's checker refuses" in line]
    assert len(notes) == 1 and "onnxruntime loads it" in notes[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert (out / "report.json").exists() and (out / f"{name}.nnapi.onnx").exists()


def default_domain_spelled_out(opset_domain):
    """Conv + Relu + Softmax with every node in domain ``ai.onnx`` and ONNX's opset imported as
    *opset_domain* (``ai.onnx``: no ``""`` entry, which onnx's checker refuses on the file)."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", domain="ai.onnx", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu", domain="ai.onnx"),
             helper.make_node("Softmax", ["r"], ["y"], name="softmax", domain="ai.onnx", axis=1)]
    weights = const("w", np.random.default_rng(0).uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32))
    graph = helper.make_graph(nodes, "g", [tensor("x", [1, 3, 8, 8])], [tensor("y", [1, 4, 8, 8])], [weights])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(opset_domain, 13)], ir_version=8)


@pytest.mark.parametrize("opset_domain", ["ai.onnx", ""])
@pytest.mark.parametrize("ep", ["nnapi", "coreml"])
def test_the_default_domain_spelled_ai_onnx_is_the_default_domain_everywhere(tmp_path, ep, opset_domain):
    """check and convert --compile take the model with no note; what is written uses ``""``."""
    path = save(tmp_path, default_domain_spelled_out(opset_domain), "spelled",
                {"x": np.ones((1, 3, 8, 8), np.float32)})
    proc = cli("check", str(path), "--ep", ep)
    assert proc.returncode == 0 and "3/3 nodes" in proc.stdout, proc.stdout + proc.stderr
    out = tmp_path / "out"
    proc = cli("convert", str(path), "--ep", ep, "--compile", "-o", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "checker refuses" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.count("matches the original") == 3, proc.stdout  # .onnx, .ort and the compiled model
    for name in (f"spelled.{ep}.onnx", f"spelled.{ep}.compiled.onnx"):
        written = onnx.load(out / name)
        assert "ai.onnx" not in {o.domain for o in written.opset_import}, name
        assert {o.version for o in written.opset_import if o.domain == ""} == {13}, name
        assert all(n.domain != "ai.onnx" for n in written.graph.node), name
        onnx.checker.check_model(written)


def test_what_both_refuse_keeps_the_checker_error(tmp_path, plugins, mobile_ep_cli):
    m = make_model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["x"], ["y"])],
                   [tensor("x", [2])], [tensor("y", [2])])
    path = tmp_path / "ssa.onnx"
    onnx.save(m, path)
    result = mobile_ep_cli("check", str(path), "--ep", "toy", plugins=plugins)
    assert result.exit_code == 3 and "invalid ONNX model" in result.stderr and "checker refuses" not in result.stderr


# -- sparse initializers, strings, optional types, 4-bit weights --------------------------------------
def test_sparse_initializers(tmp_path, plugins, mobile_ep_cli):
    values = numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "w")
    indices = numpy_helper.from_array(np.array([0, 3], np.int64), "w_idx")
    sparse = helper.make_sparse_tensor(values, indices, [4])
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [tensor("x", [4])], [tensor("y", [4])],
                              sparse_initializer=[sparse])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    path = save(tmp_path, m, "sparse", {"x": np.zeros(4, np.float32)})
    out = tmp_path / "out"
    result = mobile_ep_cli("convert", str(path), "--ep", "toy", "-o", str(out), plugins=plugins)
    assert result.exit_code == 0, result.output
    y = ort.InferenceSession(str(out / "sparse.toy.onnx")).run(None, {"x": np.zeros(4, np.float32)})[0]
    np.testing.assert_array_equal(y, [1, 0, 0, 2])


@pytest.mark.parametrize("words", [1, 300_000])
def test_string_inputs_outputs_and_initializers(tmp_path, plugins, words, mobile_ep_cli):
    vocabulary = numpy_helper.from_array(np.array([f"w{i}" for i in range(words)], dtype=object), "v")
    m = make_model([helper.make_node("Constant", [], ["c"], value=vocabulary),
                    helper.make_node("Concat", ["s", "c"], ["y"], axis=0)],
                   [tensor("s", ["n"], TensorProto.STRING)], [tensor("y", ["m"], TensorProto.STRING)])
    path = save(tmp_path, m, "words", {"s": np.array(["a", "b"], dtype=object)})
    out = tmp_path / "out"
    result = mobile_ep_cli("convert", str(path), "--ep", "toy", "-o", str(out), plugins=plugins)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["verification"] and all(v["ok"] for v in report["verification"])


def optional_model():
    optional = helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2]))
    return make_model([helper.make_node("OptionalHasElement", ["o"], ["h"]), helper.make_node("Relu", ["x"], ["y"])],
                      [value_info("o", optional), tensor("x", [2])], [tensor("h", [], TensorProto.BOOL),
                                                                      tensor("y", [2])], opset=18), \
        {"o": np.ones(2, np.float32), "x": np.ones(2, np.float32)}


def int4_model():
    w = helper.make_tensor("w", TensorProto.INT4, [4], [1, -2, 3, -4])
    return make_model([helper.make_node("DequantizeLinear", ["w", "s"], ["wf"]), helper.make_node("Add", ["x", "wf"], ["y"])],
                      [tensor("x", [4])], [tensor("y", [4])], [w, const("s", np.array(0.5, np.float32))], opset=21), \
        {"x": np.ones(4, np.float32)}


@pytest.mark.parametrize("build, why", [(optional_model, "optional types ('o')"), (int4_model, "int4 tensors ('w')")])
def test_what_ort_format_cannot_hold_gets_the_onnx_only_with_a_note(tmp_path, build, why):
    model, feeds = build()
    path = save(tmp_path, model, "m", feeds)
    out = tmp_path / "out"
    proc = cli("convert", str(path), "--ep", "nnapi", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if "no .ort written" in line]
    assert len(notes) == 1 and f"the ORT format cannot hold {why}" in notes[0], proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["m.nnapi.onnx", "report.json"]
    report = json.loads((out / "report.json").read_text())
    assert [v["ok"] for v in report["verification"]] == [True]


# -- verification inputs ----------------------------------------------------------------------------
def test_verification_finds_input_shapes_the_model_runs_on(tmp_path, plugins, mobile_ep_cli):
    # reflect Pad of 3 needs an axis of at least 4: unknown dims of 1 cannot run
    m = make_model([helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")], [tensor("x", [1, "n"])],
                   [tensor("y", [1, "m"])], [const("p", np.array([0, 3, 0, 3], np.int64))])
    path = save(tmp_path, m, "pad", {"x": np.ones((1, 8), np.float32)})
    with pytest.raises(Exception, match="reflect"):
        ort.InferenceSession(str(path)).run(None, {"x": np.ones((1, 1), np.float32)})
    out = tmp_path / "out"
    result = mobile_ep_cli("convert", str(path), "--ep", "toy", "-o", str(out), plugins=plugins)
    assert result.exit_code == 0, result.output
    assert all(v["ok"] for v in json.loads((out / "report.json").read_text())["verification"])


def test_inputs_that_cannot_be_built_blame_the_inputs_and_keep_the_report(tmp_path, plugins, mobile_ep_cli):
    # x must hold exactly 6 values: no fill of its unknown dim gives that
    m = make_model([helper.make_node("Reshape", ["x", "s"], ["y"])], [tensor("x", ["n"])], [tensor("y", [2, 3])],
                   [const("s", np.array([2, 3], np.int64))])
    path = save(tmp_path, m, "six", {"x": np.ones(6, np.float32)})
    out = tmp_path / "out"
    result = mobile_ep_cli("convert", str(path), "--ep", "toy", "-o", str(out), plugins=plugins)
    assert result.exit_code == 4, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "the test inputs failed, not the model" in lines[0] and "--shape" in lines[0]
    report = json.loads((out / "report.json").read_text())
    assert "the test inputs failed" in report["verification_error"]
    assert (out / "six.toy.onnx").exists()
    result = mobile_ep_cli("convert", str(path), "--ep", "toy", "-o", str(out), "--shape", "x=6", plugins=plugins)
    assert result.exit_code == 0, result.output


def test_a_sparse_constant_and_map_outputs(tmp_path):
    values = numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "v")
    sparse = helper.make_sparse_tensor(values, numpy_helper.from_array(np.array([0, 3], np.int64), "i"), [4])
    seq_map = helper.make_sequence_type_proto(
        helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, [])))
    m = make_model([helper.make_node("Constant", [], ["c"], sparse_value=sparse), helper.make_node("Add", ["x", "c"], ["s"]),
                    helper.make_node("Reshape", ["s", "shape"], ["r"]),
                    helper.make_node("ZipMap", ["r"], ["y"], domain="ai.onnx.ml", classlabels_int64s=[0, 1, 2, 3])],
                   [tensor("x", [4])], [value_info("y", seq_map)], [const("shape", np.array([1, 4], np.int64))],
                   extra_opsets=[("ai.onnx.ml", 1)])
    path = save(tmp_path, m, "zipmap", {"x": np.zeros(4, np.float32)})
    out = tmp_path / "out"
    proc = cli("convert", str(path), "--ep", "nnapi", "-o", str(out))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert [v["ok"] for v in report["verification"]] == [True, True]
    got = ort.InferenceSession(str(out / "zipmap.nnapi.onnx")).run(None, {"x": np.zeros(4, np.float32)})[0]
    assert got == [{0: 1.0, 1: 0.0, 2: 0.0, 3: 2.0}]


def test_verification_tries_larger_unknown_dims_when_a_converted_model_cannot_run_on_1(tmp_path):
    from mobile_ep import runtime

    original = save(tmp_path, make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [1, "n"])],
                                         [tensor("y", [1, "n"])]), "relu", {"x": np.ones((1, 1), np.float32)})
    # the same function through a reflect Pad and back: it cannot run while n < 3
    nodes = [helper.make_node("Pad", ["x", "p"], ["padded"], mode="reflect"),
             helper.make_node("Slice", ["padded", "starts", "ends", "axes"], ["back"]),
             helper.make_node("Relu", ["back"], ["y"])]
    inits = [const("p", np.array([0, 2, 0, 2], np.int64)), const("starts", np.array([2], np.int64)),
             const("ends", np.array([-2], np.int64)), const("axes", np.array([1], np.int64))]
    candidate = save(tmp_path, make_model(nodes, [tensor("x", [1, "n"])], [tensor("y", [1, "n"])], inits), "padded",
                     {"x": np.ones((1, 8), np.float32)})
    with pytest.raises(Exception, match="reflect"):
        ort.InferenceSession(str(candidate)).run(None, {"x": np.ones((1, 1), np.float32)})
    (result,) = runtime.verify(original, [candidate])
    assert result.ok and result.outputs[0].max_abs == 0.0
    # outputs that differ are not retried: a candidate computing something else fails
    other = save(tmp_path, make_model([helper.make_node("Sigmoid", ["x"], ["y"])], [tensor("x", [1, "n"])],
                                      [tensor("y", [1, "n"])]), "other", {"x": np.ones((1, 1), np.float32)})
    (result,) = runtime.verify(original, [other])
    assert not result.ok


def test_a_node_name_that_is_not_utf8_text(tmp_path, plugins, mobile_ep_cli):
    """Protobuf hands a node name of invalid UTF-8 over as bytes; onnxruntime runs the model: check and convert
    do too, showing the name with escapes."""
    m = make_model([helper.make_node("Relu", ["x"], ["t"], name="rXlu"), helper.make_node("Neg", ["t"], ["y"])],
                   [tensor("x", [1, 4])], [tensor("y", [1, 4])])
    path = tmp_path / "bytes.onnx"
    path.write_bytes(m.SerializeToString().replace(b"rXlu", b"r\x80lu"))
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": np.ones((1, 4), np.float32)})
    result = mobile_ep_cli("check", str(path), "--ep", "toy", "-v", plugins=plugins)
    assert result.exit_code == 0, result.output
    result = mobile_ep_cli("convert", str(path), "--ep", "toy", "-o", str(tmp_path / "out"), plugins=plugins)
    assert result.exit_code == 0, result.output
