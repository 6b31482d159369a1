"""``mobile-ep llm --quantize`` and ``--compile --ep qnn``: the quantized graphs written beside the float ones,
checked and held to a floor against them; both graphs compiled by the real QNN EP into one shared context."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import onnx
import pytest
from decoders import decoder

CONTEXT, PREFILL = 64, 16


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mobile_ep.cli", *args], capture_output=True, text=True)


def _llm(out: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    # (the TorchScript export: the QNN EP compiles it; see docs/llm.md on the dynamo export's mask path)
    return _cli("llm", str(decoder("llama", dynamo=False)), "--ep", "qnn", "--context", str(CONTEXT), "--prefill",
                str(PREFILL), "-o", str(out), "--no-verify", *args)


def test_quantize_writes_quantized_graphs_the_qnn_rules_take_in_one_partition(tmp_path):
    out = tmp_path / "out"
    run = _llm(out, "--quantize", "w8a16", "--random", "2")
    assert run.returncode == 0, run.stderr
    assert "random token ids (a smoke test" in run.stdout
    report = json.loads((out / "report.json").read_text())
    quantized = report["quantized"]
    assert quantized["scheme"] == "w8a16" and quantized["calibration"]["random"]
    assert all(a["sqnr_db"] >= quantized["floor_db"] for a in quantized["accuracy"])
    for name in ("prefill.w8a16", "decode.w8a16"):
        model = onnx.load(out / f"{name}.onnx", load_external_data=False)
        assert {o.domain for o in model.graph.node if o.op_type.endswith("Linear")} == {""}  # (standard Q/DQ)
        qnn = report["graphs"][name]["after_convert"]["qnn"]
        assert qnn["partitions"] == 1
        assert set(qnn["cpu_ops"]) <= {"QuantizeLinear", "DequantizeLinear"}  # (only at the graph's boundary)


def test_quantize_needs_calibration(tmp_path):
    run = _llm(tmp_path / "out", "--quantize", "w8a16")
    assert run.returncode != 0 and "--calibration FOLDER" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_compile_for_qnn_shares_one_context_between_the_graphs(tmp_path):
    pytest.importorskip("onnxruntime_qnn", reason="the real QNN EP compiles the context")
    out = tmp_path / "out"
    run = _llm(out, "--compile")
    assert run.returncode == 0, run.stderr
    report = json.loads((out / "report.json").read_text())
    (shared,) = report["shared_context"]
    assert shared["shared"] and list(shared["files"]) == ["prefill_ctx_qnn.bin"]
    for name in ("prefill_ctx.onnx", "decode_ctx.onnx"):
        model = onnx.load(out / "qnn" / name)
        (node,) = [n for n in model.graph.node if n.op_type == "EPContext"]
        assert {a.name: a for a in node.attribute}["ep_cache_context"].s == b"prefill_ctx_qnn.bin"
    # each graph, compiled alone, ran on the HTP simulator within the backend's tolerance
    assert all(report["graphs"][g]["compiled"]["verified"] for g in ("prefill", "decode"))
