"""A decoder's prefill and decode graphs compiled by the real QNN EP (onnxruntime-qnn, HTP simulator, soc_model 60)
into EPContext models sharing one context binary (mobile_ep.llm.shared): one file, at most 1.15x one graph's
context, and each graph run on the HTP simulator against onnxruntime's CPU result within the tolerance
``convert --compile`` uses (fp16 for float graphs, a share of each output's range for w8a16 and w4a16 ones)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

pytest.importorskip("onnxruntime_qnn", reason="the QNN compile needs onnxruntime-qnn (its HTP simulator)")

from mobile_ep_qnn.compile import compare, tolerance_text

from mobile_ep import ep_libraries
from mobile_ep.errors import UsageError
from mobile_ep.llm import quantize, shared
from mobile_ep.llm.decoder import interface
from mobile_ep.llm.graphs import build_graphs, write_shared
from mobile_ep.llm.torch_export import export_decoder

CONTEXT, PREFILL = 128, 32
#: Weights large enough that they, not each graph's own constants, make the context binary (hidden 256): the
#: sharing is what the size ratio then measures.  Weights drawn with std 0.1 (about 1.6 / sqrt(hidden)): the
#: greedy path is decided and fp16 does not overflow.
CONFIG = dict(vocab_size=1024, hidden_size=256, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=8,
              num_key_value_heads=2, max_position_embeddings=512, initializer_range=0.1, tie_word_embeddings=False)


@pytest.fixture(scope="module")
def real():
    """The qnn backend's real EP: onnxruntime-qnn's library and the provider options of the backend's defaults."""
    from mobile_ep.contract.plugins import make_plugins

    try:
        return shared.real_ep(make_plugins().backend("qnn"))
    except UsageError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    import torch
    import transformers

    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**CONFIG)).eval()
    work = tmp_path_factory.mktemp("export")
    export = export_decoder(model, work / "decoder.onnx", dynamo=False)
    face = interface(onnx.load(str(export), load_external_data=False), export)
    paths, _ = write_shared(build_graphs(export, face, CONTEXT, PREFILL, work), tmp_path_factory.mktemp("graphs"))
    # a prompt filling the window, then one decode step
    runs = quantize.float_runs(paths["prefill"], paths["decode"], quantize.random_prompts(1, 1024, PREFILL, seed=3),
                               steps=1)
    return paths, face, {role: runs[role].feeds[0] for role in runs}


def _compile(paths, folder, real, feeds, precision):
    library, options = real
    return shared.compile_shared_graphs({"prefill": paths["prefill"], "decode": paths["decode"]}, folder, library,
                                        options, feeds=feeds, compare=lambda a, b: compare(a, b, precision),
                                        tolerance=tolerance_text(precision))


def _assert_shared(report, folder):
    assert report.shared
    (binary,) = report.files
    assert (folder / binary).is_file() and report.files[binary] == (folder / binary).stat().st_size
    for graph in report.graphs:
        assert graph.contexts == [binary] and graph.epcontext_nodes == 1
        model = onnx.load(graph.model, load_external_data=False)
        attributes = {a.name: a for n in model.graph.node if n.op_type == "EPContext" for a in n.attribute}
        assert attributes["embed_mode"].i == 0 and attributes["ep_cache_context"].s.decode() == binary
    assert report.ratio <= shared.GOAL_RATIO, report.text()


def test_float_graphs_share_one_context_binary(graphs, real, tmp_path):
    paths, _, feeds = graphs
    report = _compile(paths, tmp_path, real, feeds, "float32")
    _assert_shared(report, tmp_path)  # (measured: 5.11 MB for both, 5.05 MB the prefill alone: 1.01x)
    for graph in report.graphs:
        assert graph.within_tolerance, report.text()
        assert graph.top1 == 1.0 and graph.logits_sqnr_db > 30
    assert "one shared context" in report.text()


@pytest.mark.parametrize("scheme", ["w8a16", "w4a16"])
def test_quantized_graphs_share_one_context_binary(graphs, real, tmp_path, scheme):
    paths, face, feeds = graphs
    quantized = quantize.quantize_graphs(paths["prefill"], paths["decode"], tmp_path / "q",
                                         quantize.random_prompts(4, face.vocab, 24, seed=1), scheme, random=True)
    # one partition; the graph's own input Q and output DQ run on the CPU (the backend's
    # offload_graph_io_quantization=1 hands them to it)
    for path in quantized.graphs.values():
        taken = ep_libraries.assignment(path, *real)
        assert len(taken.partitions) == 1
        left = {n.op_type for n in onnx.load(path, load_external_data=False).graph.node if n.name not in taken.nodes}
        assert left <= {"QuantizeLinear", "DequantizeLinear", "Constant"}
    report = _compile(quantized.graphs, tmp_path / "ctx", real, feeds, "quantized")
    # (measured: w8a16 3.35 MB for both, 3.02 MB the prefill alone: 1.11x; w4a16 2.09 / 1.99 MB: 1.05x)
    _assert_shared(report, tmp_path / "ctx")
    for graph in report.graphs:
        assert graph.within_tolerance, report.text()
        assert graph.logits_sqnr_db > 20


def test_the_simulator_cannot_reload_a_shared_context(graphs, real, tmp_path):
    """The HTP simulator on x86-64 crashes loading a context that holds several graphs (onnxruntime-qnn skips
    that case on x86 in its own tests): the crash is an EpFailure of the child, not the end of the run.  When a
    release loads it, this fails and the shared binaries themselves can be run here."""
    paths, _, feeds = graphs
    report = shared.compile_shared_graphs({"prefill": paths["prefill"], "decode": paths["decode"]}, tmp_path, *real)
    assert report.shared and all(g.max_abs_error is None for g in report.graphs)
    with pytest.raises(ep_libraries.EpFailure, match="crashed"):
        ep_libraries.run_outputs(report.graphs[1].model, *real, feeds["decode"])
    assert np.isfinite(report.ratio)
