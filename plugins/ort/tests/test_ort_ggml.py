"""ort:ggml against onnxruntime-ggml (its own tox env: it needs onnxruntime < 1.31), which runs on the CPU here."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import onnx
import pytest

from mobile_ep import ep_libraries
from mobile_ep import pipeline as api

pytest.importorskip("onnxruntime_ggml")

GGML = "ort:ggml"
LIGHT = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "tests"))


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mobile_ep.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=1800, env={**os.environ, "PYTHONWARNINGS": "ignore"})


@pytest.fixture
def bert(tmp_path) -> pathlib.Path:
    import modern_models

    path = tmp_path / "bert.onnx"
    onnx.save(modern_models.bert(), path)
    return path


def test_list_shows_ggml_with_its_package_onnxruntime_and_device():
    import onnxruntime

    result = cli("list", "-v")
    assert result.returncode == 0, result.stderr
    text = result.stdout[result.stdout.index(GGML):]
    assert "onnxruntime-ggml 0." in text and f"onnxruntime {onnxruntime.__version__}" in text
    assert "devices: cpu" in text


def test_a_model_ggml_refuses_says_what_ggml_says():
    report = api.check(LIGHT / "light_squeezenet.onnx", [GGML], after_convert=False).backends[GGML]
    assert report.supported_nodes == 0 and report.partitions == []
    assert all("it says: onnxruntime-ggml:" in n.reason and "MaxPool x3" in n.reason for n in report.unsupported)


def test_placement_is_the_eps_own(bert, tmp_path):
    import onnxruntime as ort

    report = api.check(bert, [GGML], after_convert=False)
    ours = report.backends[GGML]
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = str(tmp_path / "basic.onnx")
    ort.InferenceSession(str(bert), so, providers=["CPUExecutionProvider"])
    (library,) = [lib for lib in ep_libraries.installed_libraries() if lib.ep_name == "ggml"]
    real = ep_libraries.assignment(tmp_path / "basic.onnx", library, {})
    claimed = {name for p in ours.partitions for name in p.nodes}
    assert claimed and claimed == ep_libraries.node_names(real.nodes, claimed | {n.node for n in ours.unsupported})
    assert len(ours.partitions) == len(real.partitions)


def test_convert_compile_says_ggml_writes_no_epcontext_model(bert, tmp_path):
    """onnxruntime-ggml 0.2 compiles partitions for running only: ModelCompiler gets no EPContext node from it."""
    out = tmp_path / "out"
    result = cli("convert", bert, "--ep", GGML, "--compile", "-o", out)
    assert result.returncode == 5, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "ggml does not write EPContext models" in lines[0], lines
    assert not out.exists() or not list(out.glob("*.onnx"))  # (nothing half-written)


def test_convert_without_compile_writes_what_ggml_takes_verified(bert, tmp_path):
    out = tmp_path / "out"
    result = cli("convert", bert, "--ep", GGML, "-o", out)
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert all(v["ok"] for v in report["verification"])
