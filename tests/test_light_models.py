"""Every light_* architecture shipped in the onnx wheel through `check` and `convert` with real backends."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
from click.testing import CliRunner

from mepkit import LIGHT_MODELS
from mobile_ep import pipeline as api
from mobile_ep.cli.main import main
from mobile_ep.contract.plugins import make_plugins
from mobile_ep.export import ort_format as export

INSTALLED = sorted(make_plugins().backends())
BUILTIN = [name for name in ("nnapi", "coreml") if name in INSTALLED]

pytestmark = pytest.mark.skipif(not BUILTIN, reason="no built-in backend installed in this environment")


def light(name):
    return next(p for p in LIGHT_MODELS if p.name == f"{name}.onnx")


@pytest.mark.skipif("nnapi" not in INSTALLED, reason="NNAPI backend not installed")
def test_resnet50_on_nnapi_splits_at_every_sum_like_ort():
    result = CliRunner().invoke(main, ["check", str(light("light_resnet50")), "--ep", "nnapi", "--json"])
    assert result.exit_code == 0, result.output
    nnapi = json.loads(result.stdout)["backends"]["nnapi"]
    assert len(nnapi["partitions"]) == 17
    assert [len(p["nodes"]) for p in nnapi["partitions"]] == [9, 6, 6, 7, 6, 6, 6, 7, 6, 6, 6, 6, 6, 7, 6, 6, 5]
    assert nnapi["nodes"] == 123 and nnapi["supported_nodes"] == 107
    assert {u["op"] for u in nnapi["unsupported"]} == {"Sum"}
    assert len(nnapi["unsupported"]) == 16
    assert all(u["reason"].startswith("Sum: ") and "Sum" in u["reason"][5:] for u in nnapi["unsupported"])
    assert nnapi["verdict"] == "NO"


@pytest.mark.parametrize("model", LIGHT_MODELS, ids=lambda p: p.stem)
def test_check_every_light_model(model):
    report = api.check(model, BUILTIN)
    for name, backend in report.backends.items():
        assert backend.nodes == report.nodes > 0
        claimed = [n for p in backend.partitions for n in p.nodes]
        assert len(claimed) == len(set(claimed)) == backend.supported_nodes
        assert backend.supported_nodes + len(backend.unsupported) == backend.nodes, name
        assert all(u.reason for u in backend.unsupported)
        assert backend.verdict in ("YES", "MAYBE", "NO")


# The three big-weight VGG-style models (0.25-0.55 GB once ORT folds their weights) convert with one
# backend per environment to keep the matrix fast; the others with every installed backend.
HEAVY = {"light_vgg19", "light_zfnet512", "light_bvlc_alexnet"}
CONVERSIONS = [(m, b) for m in LIGHT_MODELS for b in (BUILTIN[:1] if m.stem in HEAVY else BUILTIN)]


@pytest.mark.parametrize("model, backend", CONVERSIONS, ids=lambda v: getattr(v, "stem", v))
def test_convert_every_light_model_to_an_ort_file_that_matches(model, backend, tmp_path):
    out = tmp_path / backend
    report = api.convert(model, backend, out)
    ort_path = out / f"{model.stem}.{backend}.ort"
    assert ort_path.exists() and (out / "report.json").exists()
    assert [v.ok for v in report.verification] == [True, True]
    assert all(o.max_abs <= 1e-3 for v in report.verification for o in v.outputs)
    # Runtime-style ORT format: no CPU fusion replaced an op an EP could claim.
    ops = export.ort_format_ops(ort_path)
    assert not any(op.startswith("com.microsoft") for op in ops), ops
    # Partitions predicted by report.json are over the plain ops the .ort holds.
    data = json.loads((out / "report.json").read_text())
    assert data["partitioning"]["backend"] == backend
    for partition in data["partitioning"]["partitions"]:
        assert set(partition["ops"]) <= ops
    # The outputs replace each other cleanly: no temporary files left behind.
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{model.stem}.{backend}.onnx", f"{model.stem}.{backend}.ort", "report.json"])


def test_converted_ort_file_matches_the_original_on_fresh_inputs(tmp_path):
    """An independent check of convert's own verification, on other inputs."""
    model = light("light_resnet50")
    api.convert(model, BUILTIN[0], tmp_path, verify=False)
    original = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    converted = ort.InferenceSession(str(tmp_path / f"light_resnet50.{BUILTIN[0]}.ort"),
                                     providers=["CPUExecutionProvider"])
    feeds = {i.name: np.random.default_rng(1).uniform(-1, 1, i.shape).astype(np.float32)
             for i in original.get_inputs()}
    for a, b in zip(original.run(None, feeds), converted.run(None, feeds), strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-4)
