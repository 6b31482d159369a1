"""A view of a model whose weights are in external data files references them instead of writing them again.

onnxruntime's model compiler writes the basic-level model a session writes, asking where each initializer goes:
those it read from a file and left as they were stay in that file, those it made (folded, fused, changed in
place) are written.  So a view costs neither reading nor writing the weights.  Here that model is held to the
one an ``InferenceSession`` writes (every node, every initializer's values) and to onnxruntime's outputs, on
a model where the basic level folds a weight, changes one in place (a Conv's bias takes an Add) and keeps the
rest, and on exported architectures' patterns; and ``check`` of a model of external data leaves the model's folder as it was.
"""

from __future__ import annotations

import json
import pathlib

import modern_models
import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from mepkit import has_backend, make_model, tensor
from mobile_ep.passes import fold_constants


def _external(model: onnx.ModelProto, folder: pathlib.Path, name: str = "model.onnx") -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin",
              size_threshold=1024)
    return path


def _folding_model() -> onnx.ModelProto:
    """A Conv whose bias takes the next Add (onnxruntime computes a new bias), a MatMul whose weight is a Transpose
    of an initializer (folded into a new one), one whose weight stays, and a Range."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name) for name, shape in
             (("conv_w", (512, 8, 3, 3)), ("conv_b", (512,)), ("add_b", (512, 1, 1)), ("w_t", (32, 512)),
              ("w_kept", (32, 48)), ("b_kept", (48,)))]
    nodes = [helper.make_node("Conv", ["x", "conv_w", "conv_b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "add_b"], ["a"], name="add"),
             helper.make_node("ReduceMean", ["a"], ["m"], name="mean", axes=[2, 3], keepdims=0),
             helper.make_node("Transpose", ["w_t"], ["w"], name="transpose"),
             helper.make_node("MatMul", ["m", "w"], ["h"], name="matmul"),
             helper.make_node("MatMul", ["h", "w_kept"], ["hk"], name="matmul_kept"),
             helper.make_node("Add", ["hk", "b_kept"], ["y"], name="bias_kept"),  # (a weight under 1 KB)
             # (an ONNX function the CPU EP has a kernel for, as decoders' exports hold: not inlined by a session)
             helper.make_node("Range", ["start", "limit", "delta"], ["positions"], name="range")]
    inits += [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("start", 0), ("limit", 8), ("delta", 1))]
    return make_model(nodes, [tensor("x", [1, 8, 16, 16])], [tensor("y", [1, 48]), tensor("positions", [8],
                                                                                            TensorProto.INT64)], inits)


def _session_view(path: pathlib.Path, folder: pathlib.Path) -> pathlib.Path:
    """The basic-level model an ``InferenceSession`` writes (the reference)."""
    folder.mkdir(parents=True, exist_ok=True)
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = str(folder / "session.onnx")
    so.add_session_config_entry("session.optimized_model_external_initializers_file_name", "session.onnx.data")
    so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    onnxruntime.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return folder / "session.onnx"


def _contents(path: pathlib.Path):
    model = onnx.load(str(path))
    nodes = [(n.op_type, n.domain, n.name, list(n.input), list(n.output)) for n in model.graph.node]
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return nodes, weights


def _run(path: pathlib.Path, feeds: dict) -> list:
    return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def _same_as_a_session(view: pathlib.Path, reference: pathlib.Path) -> None:
    nodes, weights = _contents(view)
    expected_nodes, expected_weights = _contents(reference)
    assert nodes == expected_nodes
    assert weights.keys() == expected_weights.keys()
    for name, value in expected_weights.items():
        np.testing.assert_array_equal(weights[name], value, err_msg=name)


def test_a_view_beside_the_model_references_the_weights_onnxruntime_left_and_writes_those_it_changed(tmp_path):
    path = _external(_folding_model(), tmp_path / "model")
    (tmp_path / "work").mkdir()
    view = fold_constants.ort_optimized(path, tmp_path / "work", at=path.with_name("model.seen.onnx"))
    _same_as_a_session(view, _session_view(path, tmp_path / "reference"))

    where = {t.name: {e.key: e.value for e in t.external_data} for t in onnx.load(str(view), load_external_data=False)
             .graph.initializer if t.data_location == TensorProto.EXTERNAL}
    original = {t.name: {e.key: e.value for e in t.external_data} for t in onnx.load(str(path), load_external_data=False)
                .graph.initializer}
    # kept as it was: the same bytes of the same file
    assert where["w_kept"]["location"] == "weights.bin"
    assert where["w_kept"]["offset"] == original["w_kept"]["offset"]
    assert where["conv_w"]["location"] == "weights.bin"
    # the bias that took the Add and the folded Transpose are onnxruntime's own values, not the file's
    changed = [name for name, entry in where.items() if entry["location"] != "weights.bin"]
    assert original["conv_b"]["location"] == "weights.bin"
    assert where.get("conv_b", {}).get("location") != "weights.bin" and len(changed) == 2, where
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 8, 16, 16)).astype(np.float32)}
    np.testing.assert_allclose(_run(view, feeds)[0], _run(path, feeds)[0], rtol=1e-5, atol=1e-5)


def _function_op_model() -> onnx.ModelProto:
    """A MatMul of an external weight, then Swish, an ONNX function (opset 24) the CPU EP has no kernel for: a
    session inlines it, and so must the view."""
    weight = numpy_helper.from_array(np.random.default_rng(2).standard_normal((64, 64)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="matmul"),
             helper.make_node("Swish", ["h"], ["y"], name="swish", alpha=1.0)]
    return make_model(nodes, [tensor("x", [1, 64])], [tensor("y", [1, 64])], [weight], opset=24)


@pytest.mark.parametrize("build", [modern_models.bert, modern_models.vit, modern_models.swin, modern_models.lstm_speech,
                                   modern_models.squeezenet, modern_models.dbnet_head, modern_models.svtr_rec,
                                   _function_op_model],
                         ids=lambda build: build.__name__.strip("_"))
def test_an_architectures_view_from_its_external_data_is_the_one_a_session_writes(tmp_path, build):
    path = _external(build(), tmp_path / "model")
    (tmp_path / "work").mkdir()
    view = fold_constants.ort_optimized(path, tmp_path / "work")  # (the weights copied into the work folder)
    _same_as_a_session(view, _session_view(path, tmp_path / "reference"))
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.onnx", "weights.bin"]


@pytest.mark.skipif(not has_backend("nnapi"), reason="needs the nnapi backend")
def test_check_of_a_model_of_external_data_leaves_its_folder_as_it_was_and_answers_as_for_inline_weights(
        tmp_path, mobile_ep_cli):
    inline = tmp_path / "inline.onnx"
    onnx.save(_folding_model(), inline)
    path = _external(_folding_model(), tmp_path / "model")
    before = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in path.parent.iterdir())
    answers = []
    for model in (inline, path):
        result = mobile_ep_cli("check", model, "--ep", "nnapi", "--json", plugins=None)
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        answers.append([(report["nodes"], name, b["nodes"], b["supported_nodes"], [p["nodes"] for p in b["partitions"]],
                         [(a["nodes"], a["supported_nodes"], [p["nodes"] for p in a["partitions"]])
                          for a in [report["after_convert"][name]]])
                        for name, b in report["backends"].items()])
    assert answers[0] == answers[1]
    assert sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in path.parent.iterdir()) == before


def test_a_views_small_initializers_are_inline_as_in_a_sessions_file(tmp_path):
    # (an exporter may write every weight to a file, a bias of 48 floats too; the view, as a session's file, holds
    # those under 1 KB inline, where the steps that read them look)
    path = tmp_path / "model" / "model.onnx"
    path.parent.mkdir()
    onnx.save(_folding_model(), path, save_as_external_data=True, location="weights.bin", size_threshold=100)
    (tmp_path / "work").mkdir()
    view = fold_constants.ort_optimized(path, tmp_path / "work", at=path.with_name("model.seen.onnx"))
    _same_as_a_session(view, _session_view(path, tmp_path / "reference"))
    external = {t.name: int(np.prod(t.dims)) * helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
                for t in onnx.load(str(view), load_external_data=False).graph.initializer
                if t.data_location == TensorProto.EXTERNAL}
    assert external and min(external.values()) >= 1024, external
