"""ONNX function ops a backend takes whole: onnxruntime offers the function node to the EPs before it inlines its
body, so the basic-level graph the backends judge keeps the nodes one of them takes (and only those)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import mobile_ep
from mepkit import ToyBackend, ToyPlugin, ToyRule, const, has_backend, tensor
from mobile_ep import pipeline
from mobile_ep.contract.plugins import make_plugins
from mobile_ep.passes import load
from mobile_ep.reports.text import check_text

LEVELS = [ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
          ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, ort.GraphOptimizationLevel.ORT_ENABLE_ALL]


class WholeRule(mobile_ep.OpRule):
    """Takes ONNX function ops whole (their rules as a backend with kernels for them would write them)."""

    op_types = ("GroupNormalization", "HardSwish", "CastLike", "Range")


class WholeBackend(ToyBackend):
    name = "whole"

    def build_rules(self):
        return mobile_ep.RuleRegistry([ToyRule(), WholeRule()])


def _group_norm_model(channels=8, groups=2, declared=True):
    """Conv, GroupNormalization, HardSwish, Relu; *declared*: the file gives GroupNormalization's output shape
    (value_info, as exporters write it: ONNX has no shape inference for the op)."""
    rng = np.random.default_rng(0)
    n = helper.make_node
    nodes = [n("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             n("GroupNormalization", ["c", "scale", "bias"], ["g"], num_groups=groups, epsilon=1e-5, name="gn"),
             n("HardSwish", ["g"], ["h"], name="hswish"),
             n("Relu", ["h"], ["y"], name="relu")]
    inits = [const("w", (rng.standard_normal((channels, 3, 3, 3)) * 0.3).astype(np.float32)),
             const("scale", rng.uniform(0.5, 1.5, channels).astype(np.float32)),
             const("bias", rng.standard_normal(channels).astype(np.float32))]
    graph = helper.make_graph(nodes, "g", [tensor("x", [1, 3, 8, 8])], [tensor("y", [1, channels, 8, 8])], inits)
    if declared:
        graph.value_info.append(tensor("g", [1, channels, 8, 8]))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _ops(model):
    return [node.op_type for node in model.graph]


def _save(model, tmp_path, name="model.onnx"):
    path = tmp_path / name
    onnx.save(model, path)
    return path


def _run(path, x, level=ort.GraphOptimizationLevel.ORT_ENABLE_BASIC):
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_function_nodes_a_backend_takes_stay_whole(tmp_path):
    path = _save(_group_norm_model(), tmp_path)
    whole = load.view(path, tmp_path / "whole", backends=[WholeBackend()])
    assert _ops(whole.model) == ["Conv", "GroupNormalization", "HardSwish", "Relu"]
    assert sorted(whole.whole.kept) == ["g", "h"]
    # no backend, or one that takes neither: onnxruntime inlines both, as it does with such EPs
    for backends in ([], [ToyBackend()]):
        inlined = load.view(path, tmp_path / f"inlined{len(backends)}", backends=backends)
        assert "GroupNormalization" not in _ops(inlined.model) and "HardSwish" not in _ops(inlined.model)
        assert {"ReduceMean", "HardSigmoid"} <= set(_ops(inlined.model)) and not inlined.whole.kept


def test_a_kept_nodes_outputs_have_the_shapes_onnxruntime_knows(tmp_path):
    """HardSwish's shape inference gives its output's shape; GroupNormalization has none, so onnxruntime knows its
    output's shape only when the file declares it: an EP that needs static shapes sees what it would see."""
    for declared in (True, False):
        path = _save(_group_norm_model(declared=declared), tmp_path, f"model{declared}.onnx")
        model, _ = load.as_ort_sees_it(path, tmp_path / f"w{declared}", backends=[WholeBackend()])
        values = {v.name: v for node in model.graph for v in node.outputs}
        assert values["g"].dtype == ir.DataType.FLOAT
        assert (values["g"].shape is not None and values["g"].shape.is_static()) is declared
        assert (values["h"].shape is not None and values["h"].shape.is_static()) is declared  # (inferred from g)


def test_only_the_nodes_some_backend_takes_stay_whole(tmp_path):
    class GroupNormOnly(mobile_ep.OpRule):
        op_types = ("GroupNormalization",)

    class Picky(ToyBackend):
        name = "picky"

        def build_rules(self):
            return mobile_ep.RuleRegistry([ToyRule(), GroupNormOnly()])

    path = _save(_group_norm_model(), tmp_path)
    seen = load.view(path, tmp_path / "w", backends=[Picky()])
    ops = _ops(seen.model)
    assert "GroupNormalization" in ops and "HardSwish" not in ops and "HardSigmoid" in ops
    assert seen.whole.kept == ["g"]


def test_a_function_op_folded_into_a_constant_is_not_brought_back(tmp_path):
    """Range has a function body and a CPU kernel: with constant inputs the basic level folds it away."""
    n = helper.make_node
    nodes = [n("Range", ["start", "limit", "delta"], ["r"], name="range"), n("Add", ["x", "r"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "g", [tensor("x", [4])], [tensor("y", [4])],
                              [const("start", np.float32(0)), const("limit", np.float32(4)),
                               const("delta", np.float32(1))])
    path = _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), tmp_path)
    seen = load.view(path, tmp_path / "w", backends=[WholeBackend()])
    assert _ops(seen.model) == ["Add"] and not seen.whole.kept


def test_values_after_a_kept_node_keep_the_shapes_folding_gives_them(tmp_path):
    """CastLike of a ConstantOfShape: ONNX's own shape inference leaves the padding's length open, onnxruntime
    folds it; the Shape read after the kept node is folded as in a real session."""
    n = helper.make_node
    nodes = [n("Shape", ["x"], ["s"], start=0, end=2, name="shape"),
             n("Concat", ["s", "two"], ["pad_shape"], axis=0, name="concat_shape"),
             n("ConstantOfShape", ["pad_shape"], ["zeros"], name="zeros"),
             n("CastLike", ["zeros", "x"], ["pad"], name="castlike"),
             n("Concat", ["pad", "x"], ["padded"], axis=2, name="concat"),
             n("Shape", ["padded"], ["length"], start=2, name="padded_length"),
             n("Cast", ["length"], ["length_f"], to=TensorProto.FLOAT, name="to_float"),
             n("Mul", ["padded", "length_f"], ["y"], name="mul")]
    graph = helper.make_graph(nodes, "g", [tensor("x", [1, 4, 6])], [tensor("y", [1, 4, 8])],
                              [const("two", np.array([2], np.int64))])
    path = _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10), tmp_path)
    seen = load.view(path, tmp_path / "w", backends=[WholeBackend()])
    assert _ops(seen.model) == ["CastLike", "Concat", "Mul"]
    assert seen.whole.kept == ["pad"]


def test_external_weights_and_a_newer_ir_version(tmp_path):
    """The file is optimized again with the nodes cut out: its weights are read from its folder, and an IR version
    onnxruntime refuses is lowered for it, as for the first session."""
    model = _group_norm_model(channels=32)
    model.ir_version = 14
    onnx.save(model, tmp_path / "model.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="model.onnx.data", size_threshold=0)
    whole, _ = load.as_ort_sees_it(tmp_path / "model.onnx", tmp_path / "w", backends=[WholeBackend()])
    assert "GroupNormalization" in _ops(whole)
    assert whole.graph.initializers["w"].const_value.numpy().shape == (32, 3, 3, 3)


def _plugins():
    """A fresh plugin manager with the two test backends."""
    return make_plugins(entry_points=False, plugins=[ToyPlugin(WholeBackend(), ToyBackend())])


def test_check_shows_each_backend_alone_the_graph_its_session_has(tmp_path):
    path = _save(_group_norm_model(), tmp_path)
    report = pipeline.check(path, "whole,toy", plugins=_plugins(), after_convert=False)
    whole, toy = report.backends["whole"], report.backends["toy"]
    assert whole.nodes == 4 and whole.supported_nodes == 4 and report.nodes == 4
    # alone, the toy backend is offered the bodies: their nodes, not the two function nodes
    assert toy.nodes > 4 and not any(r.op in ("GroupNormalization", "HardSwish") for r in toy.unsupported)
    assert report.combined is not None and report.combined.placement == {"whole": 4, "toy": 0, "cpu": 0}


def test_convert_writes_the_function_nodes_it_takes(tmp_path):
    path = _save(_group_norm_model(), tmp_path)
    out = tmp_path / "out"
    report = pipeline.convert(path, "whole", out, plugins=_plugins())
    written = onnx.load(out / "model.whole.onnx")
    assert [n.op_type for n in written.graph.node] == ["Conv", "GroupNormalization", "HardSwish", "Relu"]
    assert written.ir_version <= 13 and all(v.ok for v in report.verification)
    x = np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)
    expected = _run(path, x)
    for level in LEVELS:
        np.testing.assert_allclose(_run(out / "model.whole.onnx", x, level), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not (has_backend("qnn") and has_backend("nnapi")), reason="needs the qnn and nnapi backends")
def test_after_convert_with_several_backends_is_each_backends_own_convert(tmp_path):
    """QNN takes HardSwish whole, NNAPI does not (ORT's NNAPI EP is offered its body): NNAPI's after-convert
    in ``check --ep qnn,nnapi`` rewrites what ``convert --ep nnapi`` rewrites, the body's HardSigmoid."""
    rng = np.random.default_rng(0)
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1], name="conv1"), n("HardSwish", ["c"], ["h"], name="hswish"),
             n("Conv", ["h", "w2"], ["y"], name="conv2")]
    inits = [const("w1", (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)),
             const("w2", (rng.standard_normal((8, 8, 1, 1)) * 0.3).astype(np.float32))]
    graph = helper.make_graph(nodes, "g", [tensor("x", [1, 3, 16, 16])], [tensor("y", [1, 8, 16, 16])], inits)
    path = _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10), tmp_path)
    both = pipeline.check(path, "qnn,nnapi")
    alone = pipeline.check(path, "nnapi")
    assert both.backends["qnn"].nodes == 3 and both.backends["nnapi"].nodes == 4  # (HardSwish whole / its body)
    assert both.after_convert["nnapi"].as_dict() == alone.after_convert["nnapi"].as_dict()
    assert [r["rewrite"] for r in alone.after_convert["nnapi"].rewrites] == ["hardsigmoid-to-relu6"]


def test_a_function_node_a_rule_refuses_whole_is_reported_with_its_reason(tmp_path):
    class RefuseGroupNorm(mobile_ep.OpRule):
        op_types = ("GroupNormalization",)

        def check(self, unit, ctx):
            return mobile_ep.Support.no("groups of 4 channels only")

    class Refusing(ToyBackend):
        name = "refusing"

        def build_rules(self):
            return mobile_ep.RuleRegistry([ToyRule(), RefuseGroupNorm()])

    path = _save(_group_norm_model(), tmp_path)
    plugins = make_plugins(entry_points=False, plugins=[ToyPlugin(Refusing(), ToyBackend())])
    report = pipeline.check(path, "refusing,toy", plugins=plugins, after_convert=False)
    refusing, toy = report.backends["refusing"], report.backends["toy"]
    assert [(u.node, u.op, u.reason) for u in refusing.inlined] == [("gn", "GroupNormalization", "groups of 4 channels only")]
    assert not toy.inlined  # (no rule for the op: nothing to say)
    assert any("GroupNormalization is offered whole and refused (groups of 4 channels only)" in h
               for h in refusing.suggestions)
    assert refusing.as_dict()["inlined"] == [{"node": "gn", "op": "GroupNormalization",
                                              "reason": "groups of 4 channels only"}]
    text = " ".join(check_text(report).split())  # (as wrapped for the terminal)
    assert "GroupNormalization offered whole, refused (groups of 4 channels only); judged as its body's nodes" in text
