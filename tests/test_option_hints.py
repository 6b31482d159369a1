"""check suggests the option changes that improve a backend's verdict, each computed (issue: QDQ models on Core ML
said nothing of -O coreml.fold_qdq=true, which takes every node in one partition)."""

from __future__ import annotations

import json

import pytest
import quant_models
from click.testing import CliRunner

from mepkit import LIGHT_DIR, has_backend
from mobile_ep.cli.main import main


@pytest.mark.skipif(not has_backend("coreml"), reason="needs the Core ML backend")
def test_a_qdq_model_on_coreml_is_told_to_fold_its_qdq(tmp_path):
    model = quant_models.write("resnet18", tmp_path, per_channel=True)
    result = CliRunner().invoke(main, ["check", str(model), "--ep", "coreml", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)["backends"]["coreml"]
    assert report["verdict"].startswith("NO")
    (hint,) = [s for s in report["suggestions"] if s.startswith("-O ")]
    assert hint.startswith("-O coreml.fold_qdq=true: ") and "in 1 partition, verdict YES after convert" in hint
    # and the numbers are convert's own
    out = tmp_path / "out"
    done = CliRunner().invoke(main, ["convert", str(model), "--ep", "coreml", "-O", "coreml.fold_qdq=true", "-o",
                                     str(out), "--no-verify", "--json"])
    assert done.exit_code == 0, done.output
    written = json.loads(done.stdout)["partitioning"]
    assert hint.split(": ")[1].startswith(f"{written['supported_nodes']}/{written['nodes']} nodes")
    text = CliRunner().invoke(main, ["check", str(model), "--ep", "coreml"]).stdout
    assert "try -O coreml.fold_qdq=true: " in text


@pytest.mark.skipif(not has_backend("nnapi"), reason="needs the NNAPI backend")
def test_a_backend_whose_verdict_is_yes_gets_no_option_hint():
    result = CliRunner().invoke(main, ["check", str(LIGHT_DIR / "light_squeezenet.onnx"), "--ep", "nnapi", "--json"],
                                )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)["backends"]["nnapi"]
    assert report["verdict"].startswith("YES")
    assert not [s for s in report.get("suggestions", []) if s.startswith("-O ")]
