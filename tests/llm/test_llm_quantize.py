"""w8a16 / w4a16 quantization of a decoder's prefill and decode graphs (mobile_ep.llm.quantize): what is written
(one weights file, each shared tensor once; one KV-cache scale per layer across both graphs) and what it costs
(logits SQNR and top-1 agreement against the float graphs, run on onnxruntime's CPU EP)."""

from __future__ import annotations

import json
import math

import decoders  # (tests/llm)
import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from mobile_ep.errors import UsageError
from mobile_ep.llm import quantize
from mobile_ep.llm.decoder import interface
from mobile_ep.llm.graphs import build_graphs, write_shared

CONTEXT, PREFILL = 128, 32


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    """The float prefill and decode graphs of the tiny Llama (TorchScript export), over one weights file."""
    export = decoders.decoder("llama", dynamo=False)
    face = interface(onnx.load(str(export), load_external_data=False), export)
    folder = tmp_path_factory.mktemp("graphs")
    built = build_graphs(export, face, CONTEXT, PREFILL, tmp_path_factory.mktemp("work"))
    paths, _ = write_shared(built, folder)
    return paths["prefill"], paths["decode"], face


@pytest.fixture(scope="module")
def w8a16(graphs, tmp_path_factory):
    prefill, decode, face = graphs
    prompts = quantize.random_prompts(3, face.vocab, 20, seed=1)
    folder = tmp_path_factory.mktemp("w8a16")
    return quantize.quantize_graphs(prefill, decode, folder, prompts, "w8a16", random=True, steps=6), folder


def _q_params(model: onnx.ModelProto, folder) -> dict[str, tuple[float, int]]:
    """(scale, zero point) of each QuantizeLinear's input tensor and DequantizeLinear's output tensor."""
    values = {t.name: t for t in model.graph.initializer}
    found = {}
    for node in model.graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") and node.input[1] in values:
            scale = numpy_helper.to_array(values[node.input[1]], base_dir=str(folder))
            zero = numpy_helper.to_array(values[node.input[2]], base_dir=str(folder))
            found[node.input[0] if node.op_type == "QuantizeLinear" else node.output[0]] = (float(scale), int(zero))
    return found


def test_w8a16_costs_little_against_the_float_graphs(w8a16):
    report, _ = w8a16
    by_graph = {a.graph: a for a in report.accuracy}
    assert set(by_graph) == {"prefill", "decode"}
    assert by_graph["prefill"].positions == 3 * 20 and by_graph["decode"].positions == 3 * 6
    for accuracy in by_graph.values():  # (measured: 18-21 dB, 88% top-1 on this random-weights model)
        assert 12 < accuracy.sqnr_db < math.inf
        assert accuracy.top1 >= 0.75
    assert report.random and "smoke test" in report.text()
    assert json.loads(json.dumps(report.as_dict()))["accuracy"][0]["graph"] == "prefill"


def test_w8a16_graphs_are_16_bit_activations_and_8_bit_weights(w8a16):
    report, folder = w8a16
    model = onnx.load(report.graphs["decode"], load_external_data=False)
    values = {t.name: t for t in model.graph.initializer}
    matmul_weights = [values[n.input[0]] for n in model.graph.node if n.op_type == "DequantizeLinear"
                      and n.input[0] in values and n.input[0].endswith("_quantized") and len(values[n.input[0]].dims) == 2]
    assert matmul_weights and {t.data_type for t in matmul_weights} <= {onnx.TensorProto.INT8, onnx.TensorProto.UINT16}
    assert onnx.TensorProto.INT8 in {t.data_type for t in matmul_weights}
    activations = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    zero_types = {values[n.input[2]].data_type for n in activations}
    assert zero_types == {onnx.TensorProto.UINT16}


def test_shared_weights_are_stored_once_and_referenced_by_both_graphs(w8a16):
    report, folder = w8a16
    locations = {}
    for role, path in report.graphs.items():
        model = onnx.load(path, load_external_data=False)
        locations[role] = {t.name: {e.key: e.value for e in t.external_data} for t in model.graph.initializer
                           if t.data_location == onnx.TensorProto.EXTERNAL}
    shared = set(locations["prefill"]) & set(locations["decode"])
    assert len(shared) >= 2 * 7  # (every layer's seven projections at least)
    for name in shared:
        assert locations["prefill"][name] == locations["decode"][name]
    assert {loc["location"] for graph in locations.values() for loc in graph.values()} == {folder.joinpath(
        report.weights).name}
    assert report.weights_bytes < sum(report.graph_weights_bytes.values())
    # both graphs load from the one file and run
    import onnxruntime as ort

    for path in report.graphs.values():
        assert ort.InferenceSession(path, providers=["CPUExecutionProvider"]).get_outputs()[0].name == "logits"


def test_kv_cache_has_one_scale_per_layer_across_both_graphs(w8a16, graphs):
    report, folder = w8a16
    face = graphs[2]
    params = {role: _q_params(onnx.load(path), folder) for role, path in report.graphs.items()}
    for (past_k, past_v), (present_k, present_v) in zip(face.past, face.present, strict=True):
        for past, present in ((past_k, present_k), (past_v, present_v)):
            seen = {params["prefill"][present], params["decode"][past], params["decode"][present],
                    params["prefill"][past]}
            assert len(seen) == 1, (past, present, seen)
    assert len(report.kv_ranges) == 2 * face.layers


def test_w4a16_writes_int4_weights_in_blocks_and_reports_its_cost(graphs, w8a16, tmp_path):
    prefill, decode, face = graphs
    prompts = quantize.random_prompts(2, face.vocab, 12, seed=2)
    report = quantize.quantize_graphs(prefill, decode, tmp_path, prompts, "w4a16", random=True, steps=3)
    model = onnx.load(report.graphs["prefill"], load_external_data=False)
    values = {t.name: t for t in model.graph.initializer}
    int4 = [n for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in values
            and values[n.input[0]].data_type == onnx.TensorProto.INT4]
    assert len(int4) >= 2 * 7 + 1  # (every projection and the head)
    for node in int4:  # blocks of 32 along K, per output channel: scales [K / 32, N]
        weight, scale = values[node.input[0]].dims, values[node.input[1]].dims
        assert {a.name: a.i for a in node.attribute} == {"axis": 0, "block_size": 32}
        assert list(scale) == [-(-weight[0] // 32), weight[1]]
    assert {o.version for o in model.opset_import if o.domain == ""} == {21}
    assert report.weights_bytes < w8a16[0].weights_bytes
    for accuracy in report.accuracy:  # (int4 per channel on random weights: a few dB; the report says so)
        assert np.isfinite(accuracy.sqnr_db) and 0 <= accuracy.top1 <= 1


def test_prompts_from_a_folder(tmp_path):
    np.save(tmp_path / "a.npy", np.array([1, 2, 3]))
    (tmp_path / "b.json").write_text("[4, 5]")
    (tmp_path / "c.txt").write_text("6 7\n8")
    prompts = quantize.read_prompts(tmp_path)
    assert [p.tolist() for p in prompts] == [[1, 2, 3], [4, 5], [6, 7, 8]]
    (tmp_path / "d.txt").write_text("six")
    with pytest.raises(UsageError, match="d.txt: not a list of token ids"):
        quantize.read_prompts(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no .npy, .json or .txt"):
        quantize.read_prompts(tmp_path / "empty")


def test_prompts_beyond_the_vocabulary_are_refused(graphs, tmp_path):
    prefill, decode, face = graphs
    with pytest.raises(UsageError, match=f"outside the vocabulary of {face.vocab}"):
        quantize.quantize_graphs(prefill, decode, tmp_path, [np.array([1, face.vocab + 5])], "w8a16")
    with pytest.raises(UsageError, match="unknown quantization scheme 'w2a4'"):
        quantize.quantize_graphs(prefill, decode, tmp_path, [np.array([1])], "w2a4")
