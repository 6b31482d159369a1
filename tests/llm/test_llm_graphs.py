"""``mobile-ep llm``: one decoder export (transformers, torch.onnx's two exporters) to the prefill and decode
graphs over a fixed context, weights stored once, each graph checked, verified by greedy generation."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import pytest
from decoders import CONFIGS, decoder, torch_model

import mobile_ep
from mobile_ep import model_io
from mobile_ep.errors import ModelError, UsageError, VerificationError
from mobile_ep.llm import generate
from mobile_ep.llm.build import LlmReport
from mobile_ep.llm.decoder import interface

CONTEXT, PREFILL = 64, 16


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mobile_ep.cli", *args], capture_output=True, text=True)


def _torch_greedy(arch: str, prompt: list[int], steps: int) -> list[int]:
    import torch

    model = torch_model(arch)
    ids = torch.tensor([prompt])
    with torch.no_grad():  # (each step the whole sequence again, no cache: transformers' plain forward)
        for _ in range(steps):
            ids = torch.cat([ids, model(ids).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return ids[0, len(prompt):].tolist()


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[pathlib.Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("llm") / "out"
    return out, _cli("llm", str(decoder("llama")), "--ep", "qnn,coreml,nnapi", "--context", str(CONTEXT),
                     "--prefill", str(PREFILL), "-o", str(out))


def test_cli_writes_both_graphs_over_one_weights_file(written):
    out, run = written
    assert run.returncode == 0, run.stderr
    assert {p.name for p in out.iterdir()} >= {"prefill.onnx", "decode.onnx", "weights.data", "report.json"}
    report = json.loads((out / "report.json").read_text())
    shapes = {}
    offsets = {}
    for name, seq in (("prefill", PREFILL), ("decode", 1)):
        model = onnx.load(out / f"{name}.onnx", load_external_data=False)
        assert model.ir_version <= 11
        shapes[name] = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.input}
        assert shapes[name]["input_ids"] == [1, seq] and shapes[name]["attention_mask"] == [1, CONTEXT]
        assert shapes[name]["past_key_values.1.value"] == [1, 2, CONTEXT - seq, 16]
        locations = {}
        for tensor in model.graph.initializer:
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                entry = {e.key: e.value for e in tensor.external_data}
                assert entry["location"] == "weights.data" and int(entry["offset"]) % 4096 == 0
                locations[tensor.raw_data or tensor.name] = (int(entry["offset"]), int(entry["length"]))
        offsets[name] = set(locations.values())
        assert report["graphs"][name]["seq"] == seq and report["graphs"][name]["past"] == CONTEXT - seq
    # the weights are stored once: the decode graph's tensors are (all but the few shape-dependent) the prefill's
    assert len(offsets["decode"] & offsets["prefill"]) >= len(offsets["decode"]) - 2
    assert report["parts"] == 1 and report["max_part_mb"] == 1024
    (weights,) = report["weights"]
    assert (out / "weights.data").stat().st_size == weights["bytes"] < 0.6 * weights["bytes_without_sharing"]
    assert {f["path"] for f in report["files"]} >= {"prefill.onnx", "decode.onnx", "weights.data"}
    assert "prefill.onnx: seq 16, past 48" in run.stdout and "decode.onnx: seq 1, past 63" in run.stdout


def test_each_graph_is_checked_per_backend(written):
    out, _ = written
    graphs = json.loads((out / "report.json").read_text())["graphs"]
    for name in ("prefill", "decode"):
        qnn = graphs[name]["backends"]["qnn"]
        assert qnn["supported_nodes"] >= qnn["nodes"] - 1 and qnn["partitions"] <= 2
        # Core ML: the mask path's IsNaN and the bool ops go with convert's rewrites (at most 2 partitions)
        coreml = graphs[name]["after_convert"]["coreml"]
        assert coreml["partitions"] <= 2 and "IsNaN" not in coreml["cpu_ops"]
        assert graphs[name]["backends"]["coreml"]["partitions"] > coreml["partitions"]
        nnapi = graphs[name]["after_convert"]["nnapi"]
        assert nnapi["partitions"] >= 1 and nnapi["supported_nodes"] < nnapi["nodes"]  # (said as it is)
        # the rotary tables are folded: no Cos or Sin left (NNAPI takes neither), a [context, head_dim] table each
        model = onnx.load(out / f"{name}.onnx", load_external_data=False)
        assert not {"Cos", "Sin"} & {n.op_type for n in model.graph.node}
        tables = [t for t in model.graph.initializer if t.name.endswith(".table")]
        assert len(tables) == 2 and all(list(t.dims) == [CONTEXT, 16] for t in tables)
        assert "Cos" not in nnapi["cpu_ops"] and nnapi["partitions"] <= 3


def test_generation_through_the_graphs_equals_the_export(written):
    out, run = written
    verification = json.loads((out / "report.json").read_text())["verification"]
    assert verification["equal"] is True and verification["steps"] == 32
    for generation in verification["generations"]:
        assert generation["tokens"] == generation["reference"] and len(generation["tokens"]) == 32
        assert generation["max_logits_error"] < 1e-3
        # the export's own tokens are transformers' (the greedy path is decided: weights drawn wide)
        assert generation["reference"] == _torch_greedy("llama", generation["prompt"], 32)
    assert "verified: 2/2 prompts, 32 greedy tokens" in run.stdout


@pytest.mark.parametrize("arch", sorted(CONFIGS))
@pytest.mark.parametrize("dynamo", [True, False], ids=["dynamo", "torchscript"])
def test_both_architectures_and_both_exporters(arch, dynamo, tmp_path):
    path = decoder(arch, dynamo)
    report = mobile_ep.build_llm(path, "qnn", context=CONTEXT, prefill=PREFILL, output=tmp_path / "o", steps=24)
    assert isinstance(report, LlmReport) and report.verified
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    face = interface(model_io.validate(path), path)
    tokens = generate.greedy_graphs(face, CONTEXT, PREFILL, tmp_path / "o" / "prefill.onnx",
                                    tmp_path / "o" / "decode.onnx", prompt, 24)
    assert tokens == _torch_greedy(arch, prompt, 24)
    for graph in report.graphs.values():
        assert len(graph.backends["qnn"].partitions) <= 2


def test_a_changed_graph_fails_verification(tmp_path):
    """The check can fail: decode graphs whose cache slot is off by one generate other tokens."""
    path = decoder("llama")
    face = interface(model_io.validate(path), path)
    mobile_ep.build_llm(path, "qnn", context=CONTEXT, prefill=PREFILL, output=tmp_path / "o", verify=False)
    runner = generate._Graphs(face, CONTEXT, PREFILL, generate._open_all(generate._session, tmp_path / "o" / "prefill.onnx"),
                              generate._open_all(generate._session, tmp_path / "o" / "decode.onnx"))
    original = runner.step

    def shifted(token):
        runner.filled += 1  # (positions and slots off by one: what a wrong KV update does)
        return original(token)

    runner.step = shifted
    tokens = generate._greedy(runner, [5, 6, 7, 8], 16)[0]
    assert tokens != generate.greedy_reference(face, path, [5, 6, 7, 8], 16)


def test_output_folder_holds_one_complete_set(tmp_path):
    path, out = decoder("llama"), tmp_path / "o"
    mobile_ep.build_llm(path, "qnn", context=CONTEXT, prefill=PREFILL, output=out, verify=False)
    (out / "stale.txt").write_text("kept: not ours")
    first = json.loads((out / "report.json").read_text())
    mobile_ep.build_llm(path, "qnn", context=2 * CONTEXT, prefill=PREFILL, output=out, verify=False)
    second = json.loads((out / "report.json").read_text())
    assert second["context"] == 2 * CONTEXT != first["context"] and (out / "stale.txt").exists()
    assert not [p for p in out.iterdir() if p.name.startswith(".mobile-ep-staging")]
    model = onnx.load(out / "decode.onnx", load_external_data=False)
    assert [d.dim_value for d in model.graph.input[1].type.tensor_type.shape.dim] == [1, 2 * CONTEXT]


def test_json_output(tmp_path):
    run = _cli("llm", str(decoder("llama")), "--ep", "qnn", "--context", "32", "--prefill", "8", "-o",
               str(tmp_path / "o"), "--json", "--steps", "8")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["context"] == 32 and data["graphs"]["prefill"]["seq"] == 8 and data["verification"]["steps"] == 8
    assert data["interface"]["past"][0] == ["past_key_values.0.key", "past_key_values.0.value"]


def test_bad_input_is_one_line(tmp_path):
    not_a_decoder = tmp_path / "mlp.onnx"
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    onnx.save(onnx.helper.make_model(graph, ir_version=10, opset_imports=[onnx.helper.make_opsetid("", 17)]),
              not_a_decoder)
    run = _cli("llm", str(not_a_decoder), "--ep", "qnn", "-o", str(tmp_path / "o"))
    assert run.returncode == ModelError.exit_code and len(run.stderr.strip().splitlines()) == 1
    assert str(not_a_decoder) in run.stderr and "no input 'input_ids'" in run.stderr
    run = _cli("llm", str(decoder("llama")), "--context", "16", "--prefill", "16", "-o", str(tmp_path / "o"))
    assert run.returncode == UsageError.exit_code and "--prefill 16" in run.stderr
    assert not (tmp_path / "o").exists()
    with pytest.raises(UsageError, match="leave out"):
        mobile_ep.build_llm(decoder("llama"), "qnn", output=tmp_path / "o", dim={"seq": 1})


def test_verification_error_is_raised_when_tokens_differ(tmp_path, monkeypatch):
    """A run whose graphs generate other tokens exits with the verification error (files kept)."""
    path = decoder("llama")
    wrong = generate._Graphs.step

    def off_by_one(self, token):
        self.filled = min(self.filled + 1, self.context - 2)
        return wrong(self, token)

    monkeypatch.setattr(generate._Graphs, "step", off_by_one)
    with pytest.raises(VerificationError, match="prompts' tokens differ"):
        mobile_ep.build_llm(path, "qnn", context=CONTEXT, prefill=PREFILL, output=tmp_path / "o")
    assert json.loads((tmp_path / "o" / "report.json").read_text())["verification"]["equal"] is False


def test_help_teaches():
    run = _cli("llm", "--help")
    assert run.returncode == 0
    for words in ("--context", "--prefill", "prefill.onnx", "decode.onnx", "weights.data", "docs/llm.md",
                  "mobile-ep llm decoder.onnx --ep qnn"):
        assert words in run.stdout
    assert np.all([w in _cli("--help").stdout for w in ("mobile-ep llm",)])


def test_split_under_a_weight_budget(tmp_path):
    """--max-part-mb: parts of whole layers, each a prefill and a decode graph over its own weights file, chained
    by the hidden state; generation through the chain equals the export's."""
    out = tmp_path / "o"
    run = _cli("llm", str(decoder("llama")), "--ep", "qnn", "--context", str(CONTEXT), "--prefill", str(PREFILL),
               "--max-part-mb", "0.2", "-o", str(out))
    assert run.returncode == 0, run.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["parts"] == 2 and "split into 2 parts" in run.stdout
    assert {p.name for p in out.iterdir()} >= {f"part{k}.{name}" for k in (1, 2)
                                               for name in ("prefill.onnx", "decode.onnx", "weights.data")}
    assert all(w["bytes"] <= 0.2 * 2**20 for w in report["weights"])
    for graph in ("prefill", "decode"):
        first = onnx.load(out / f"part1.{graph}.onnx", load_external_data=False)
        second = onnx.load(out / f"part2.{graph}.onnx", load_external_data=False)
        seq = PREFILL if graph == "prefill" else 1
        assert [o.name for o in first.graph.output] == ["hidden_states.1", "present.0.key", "present.0.value"]
        assert {i.name for i in second.graph.input} == {"hidden_states.1", "attention_mask", "position_ids",
                                                        "past_key_values.1.key", "past_key_values.1.value"}
        hidden = next(o for o in first.graph.output if o.name == "hidden_states.1")
        assert [d.dim_value for d in hidden.type.tensor_type.shape.dim] == [1, seq, CONFIGS["llama"]["hidden_size"]]
        assert "logits" in {o.name for o in second.graph.output} and "input_ids" not in {i.name for i in second.graph.input}
        for part in (1, 2):
            assert report["graphs"][f"part{part}.{graph}"]["backends"]["qnn"]["partitions"] >= 1
    assert report["verification"]["equal"] is True
    # the app's loops run the parts in order (tests/llm/test_llm_app.py checks them against the graphs)
    assert report["app"] == {"kotlin": "Generate.kt", "swift": "Generate.swift"}
    assert all(f'"part{k}.{graph}.onnx"' in (out / "Generate.kt").read_text() for k in (1, 2) for graph in ("prefill", "decode"))


def test_a_budget_below_one_layer_is_refused(tmp_path):
    run = _cli("llm", str(decoder("llama")), "--ep", "qnn", "--context", str(CONTEXT), "--prefill", str(PREFILL),
               "--max-part-mb", "0.05", "-o", str(tmp_path / "o"))
    assert run.returncode == UsageError.exit_code and len(run.stderr.strip().splitlines()) == 1
    assert "--max-part-mb 0.05" in run.stderr and "smallest part" in run.stderr


def test_compile_for_coreml_is_emulated_and_verified(tmp_path):
    """--compile: each graph through convert --compile on Core ML (the mask path rewritten: at most 2
    partitions), its Core ML programs run by the emulator and compared with the graph on the CPU EP."""
    pytest.importorskip("mobile_ep_coreml")
    out = tmp_path / "o"
    run = _cli("llm", str(decoder("llama")), "--ep", "coreml", "--context", str(CONTEXT), "--prefill", str(PREFILL),
               "--compile", "--no-cost-model", "--steps", "8", "-o", str(out))
    assert run.returncode == 0, run.stderr
    report = json.loads((out / "report.json").read_text())
    for name in ("prefill", "decode"):
        compiled = report["graphs"][name]["compiled"]
        assert compiled["folder"] == f"coreml/{name}" and compiled["verified"] is True
        assert 1 <= compiled["compiled_partitions"] <= 2 and compiled["compiled_nodes"] >= compiled["nodes"] - 1
        assert compiled["max_abs_error"] < 1e-3
        assert (out / "coreml" / name / f"{name}.coreml.compiled.onnx").is_file()
        assert f"{name}.coreml.compiled.onnx" in compiled["files"]
    assert "compiled for coreml" in run.stdout
    run = _cli("llm", str(decoder("llama")), "--ep", "coreml,qnn", "--compile", "-o", str(tmp_path / "p"))
    assert run.returncode == UsageError.exit_code and "--compile takes one backend" in run.stderr


def test_rotary_tables_hold_what_the_export_computes(tmp_path):
    """Each table row is the export's cos/sin at that position (transformers' rotary embedding, torch)."""
    import torch

    path = decoder("qwen2", dynamo=False)
    mobile_ep.build_llm(path, "qnn", context=CONTEXT, prefill=PREFILL, output=tmp_path / "o", verify=False)
    model = onnx.load(tmp_path / "o" / "decode.onnx")
    tables = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer if t.name.endswith(".table")}
    rotary = torch_model("qwen2").model.rotary_emb
    with torch.no_grad():
        cos, sin = rotary(torch.zeros(1, CONTEXT, 1), torch.arange(CONTEXT)[None])
    (cos_table,) = [t for name, t in tables.items() if "Cos" in name]
    (sin_table,) = [t for name, t in tables.items() if "Sin" in name]
    np.testing.assert_allclose(cos_table, cos[0].numpy(), atol=1e-6)
    np.testing.assert_allclose(sin_table, sin[0].numpy(), atol=1e-6)
