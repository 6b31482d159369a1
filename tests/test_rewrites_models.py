"""Transformers, speech and OCR models (tests/modern_models.py) after ``convert``: on NNAPI each lands in at most
two partitions holding at least 97% of its nodes and verifies; on Core ML ``convert --compile`` verifies; every
model written loads in onnxruntime at every optimization level.

Partitions are those ORT's EP forms (``partitioning.partitions``), whether or not the cost model judges these
small models' partitions worth their copies.
"""

from __future__ import annotations

import json
import pathlib

import modern_models
import onnx
import onnxruntime as ort
import pytest

import mobile_ep
from mepkit import has_backend
from mobile_ep.passes.fuse_cpu import fuse_cpu_nodes

LEVELS = [ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
          ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, ort.GraphOptimizationLevel.ORT_ENABLE_ALL]


def loads_at_every_level(path: pathlib.Path) -> None:
    for level in LEVELS:
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        options.log_severity_level = 3
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _convert(tmp_path: pathlib.Path, name: str, ep: str, **kwargs) -> tuple[dict, pathlib.Path]:
    source = tmp_path / f"{name}.onnx"
    onnx.save(modern_models.MODELS[name](), source)
    out = tmp_path / ep
    mobile_ep.convert(source, ep, out, **kwargs)
    return json.loads((out / "report.json").read_text()), out


@pytest.mark.skipif(not has_backend("nnapi"), reason="the NNAPI plugin is not installed")
@pytest.mark.parametrize("name", sorted(modern_models.MODELS))
def test_nnapi_takes_each_model_in_at_most_two_partitions(tmp_path, name):
    report, out = _convert(tmp_path, name, "nnapi")
    partitioning = report["partitioning"]
    assert len(partitioning["partitions"]) <= 2, partitioning["unsupported"]
    assert partitioning["supported_nodes"] >= 0.97 * partitioning["nodes"], partitioning["unsupported"]
    assert report["verification"] and all(v["ok"] for v in report["verification"])
    for written in out.glob("*.onnx"):
        loads_at_every_level(written)


@pytest.mark.skipif(not has_backend("nnapi"), reason="the NNAPI plugin is not installed")
@pytest.mark.parametrize("name", sorted(modern_models.MODELS))
def test_nnapi_compiles_each_model(tmp_path, name):
    report, _ = _convert(tmp_path, name, "nnapi", compile=True, cost_model=False)
    compiled = report["compiled"]
    assert compiled["failures"] == [] and compiled["compiled_nodes"] == report["partitioning"]["supported_nodes"]
    assert [v["ok"] for v in report["verification"]] == [True, True, True]


@pytest.mark.skipif(not has_backend("coreml"), reason="the Core ML plugin is not installed")
@pytest.mark.parametrize("model_format", ["MLProgram", "NeuralNetwork"])
@pytest.mark.parametrize("name", sorted(modern_models.MODELS))
def test_coreml_converts_and_compiles_each_model(tmp_path, name, model_format):
    # (--compile compiles the partitions the cost model keeps: without it, every one of these small models')
    report, out = _convert(tmp_path, name, "coreml", compile=True, cost_model=False,
                           options={"coreml.model_format": model_format})
    verified = {pathlib.Path(v["model"]).name: v["ok"] for v in report["verification"]}
    assert verified == {f"{name}.coreml.onnx": True, f"{name}.coreml.ort": True,
                        f"{name}.coreml.compiled.onnx": True}, report["verification"]
    compiled, claimed = report["compiled"], report["partitioning"]["supported_nodes"]
    assert compiled["failures"] == [] and compiled["compiled_nodes"] == claimed, compiled  # (all it claims)
    if model_format == "MLProgram":  # (the NeuralNetwork format lacks some ops of these models: Erf, ...)
        assert claimed >= 0.97 * compiled["nodes"], report["partitioning"]["unsupported"]
    for written in out.glob("*.onnx"):
        if "compiled" not in written.name:  # (EPContext nodes need the Core ML EP)
            loads_at_every_level(written)


def test_cpu_fusion_leaves_no_name_a_new_session_makes_again(tmp_path):
    """onnxruntime's MatMul+Add fusion names its reshape shapes ``gemm_input_shape``; a session on the written
    model runs the same fusion on the kept nodes and must not find those names taken."""
    source = tmp_path / "bert.onnx"
    onnx.save(modern_models.bert(), source)
    names = [n.name for n in onnx.load(source).graph.node]
    fused = tmp_path / "fused.onnx"
    assert fuse_cpu_nodes(source, set(names[len(names) // 2:]), fused, tmp_path) is not None
    initializers = {t.name for t in onnx.load(fused).graph.initializer}
    assert "cpu_fused/gemm_input_shape" in initializers and "gemm_input_shape" not in initializers
    loads_at_every_level(fused)
    again = tmp_path / "again.onnx"  # fusing a fused model again: the names stay unique
    kept = {n.name for n in onnx.load(fused).graph.node if n.name in names[len(names) // 2:][10:]}
    if fuse_cpu_nodes(fused, kept, again, tmp_path) is not None:
        loads_at_every_level(again)


def test_external_data_model_compiles_on_coreml(tmp_path):
    """Weights in a .data file beside the model (memory-mapped while compiling) are saved with the compiled model."""
    if not has_backend("coreml"):
        pytest.skip("the Core ML plugin is not installed")
    source = tmp_path / "vit.onnx"
    onnx.save(modern_models.vit(), source, save_as_external_data=True, location="vit.onnx.data")
    out = tmp_path / "out"
    mobile_ep.convert(source, "coreml", out, cost_model=False, compile=True)
    report = json.loads((out / "report.json").read_text())
    assert all(v["ok"] for v in report["verification"]) and len(report["verification"]) == 3


def test_compiled_model_saves_while_views_of_its_external_weights_are_held(tmp_path):
    """A compiler may keep numpy views of memory-mapped weights; saving the compiled model still works."""
    from mobile_ep import model_io as mir
    from mobile_ep.passes.to_epcontext import save_compiled

    source = tmp_path / "vit.onnx"
    onnx.save(modern_models.vit(), source, save_as_external_data=True, location="vit.onnx.data")
    model = mir.load(source, check=False)
    views = [v.const_value.numpy() for v in model.graph.initializers.values() if v.const_value.nbytes > 1024]
    assert views
    path = save_compiled(model, tmp_path / "out.onnx")
    loads_at_every_level(path)
    assert float(views[0].reshape(-1)[0]) == float(views[0].reshape(-1)[0])  # (the views stay readable)


@pytest.mark.skipif(not has_backend("nnapi"), reason="the NNAPI plugin is not installed")
def test_bert_with_sdpa_attention_lands_in_one_nnapi_partition(tmp_path):
    """transformers' default attention through the TorchScript exporter: the IsNaN guards after each Softmax no
    longer split the model, the bool mask is computed in float32 in the partition and so is the embedding
    lookup; what stays on the CPU is a Cast of each int64 input (attention_mask, input_ids)."""
    source = tmp_path / "bert_sdpa.onnx"
    onnx.save(modern_models.bert(sdpa=True), source)
    out = tmp_path / "nnapi"
    mobile_ep.convert(source, "nnapi", out, compile=True, cost_model=False)
    report = json.loads((out / "report.json").read_text())
    partitioning = report["partitioning"]
    assert len(partitioning["partitions"]) == 1, partitioning["unsupported"]
    assert partitioning["supported_nodes"] >= 0.97 * partitioning["nodes"], partitioning["unsupported"]
    assert partitioning["nodes"] - partitioning["supported_nodes"] == 2, partitioning["unsupported"]
    assert {u["op"] for u in partitioning["unsupported"]} == {"Cast"}  # (of the two int64 inputs)
    assert report["compiled"]["compiled_nodes"] == partitioning["supported_nodes"]  # (run by the emulator)
    assert [v["ok"] for v in report["verification"]] == [True, True, True], report["verification"]
    written = onnx.load(out / "bert_sdpa.nnapi.onnx")
    assert "IsNaN" not in {n.op_type for n in written.graph.node}
    loads_at_every_level(out / "bert_sdpa.nnapi.onnx")


@pytest.mark.skipif(not has_backend("coreml"), reason="the Core ML plugin is not installed")
def test_bert_with_sdpa_attention_on_coreml(tmp_path):
    """Core ML takes the mask's Where but not the guard's IsNaN: that IsNaN is computed from the mask."""
    source = tmp_path / "bert_sdpa.onnx"
    onnx.save(modern_models.bert(sdpa=True), source)
    out = tmp_path / "coreml"
    mobile_ep.convert(source, "coreml", out, compile=True, cost_model=False)
    report = json.loads((out / "report.json").read_text())
    partitioning = report["partitioning"]
    assert len(partitioning["partitions"]) <= 2, partitioning["unsupported"]
    assert partitioning["supported_nodes"] >= 0.97 * partitioning["nodes"], partitioning["unsupported"]
    assert "IsNaN" not in {u["op"] for u in partitioning["unsupported"]}
    assert report["compiled"]["compiled_nodes"] == partitioning["supported_nodes"], report["compiled"]
    assert [v["ok"] for v in report["verification"]] == [True, True, True], report["verification"]
