"""A scalar input that selects a branch or feeds integer math the backend refuses: check and explain
suggest --const NAME=VALUE (naming the input and what it selects, never a value)."""

from __future__ import annotations

import json

import modern_models
import onnx
import pytest
from click.testing import CliRunner

from mobile_ep.cli.main import main


@pytest.fixture(scope="module")
def vad(tmp_path_factory):
    path = tmp_path_factory.mktemp("vad") / "vad.onnx"
    onnx.save(modern_models.vad(), path)
    return path


def test_check_suggests_const_for_the_sample_rate(vad):
    run = CliRunner().invoke(main, ["check", str(vad), "--ep", "nnapi"])
    assert run.exit_code == 0, run.output
    text = " ".join(run.output.split())
    assert ("input sr (int64 scalar) selects the branch of If_21 and feeds Equal_20, left on the CPU: if your app "
            "always feeds the same value, fix it with --const sr=VALUE") in text
    data = json.loads(CliRunner().invoke(main, ["check", str(vad), "--ep", "nnapi", "--json"]).stdout)
    assert any("--const sr=VALUE" in h for h in data["backends"]["nnapi"]["suggestions"])


def test_explain_offers_const_for_a_node_the_scalar_feeds(vad):
    run = CliRunner().invoke(main, ["explain", str(vad), "Equal_20", "--ep", "nnapi", "--json"])
    assert run.exit_code == 0, run.output
    (nnapi,) = json.loads(run.stdout)["backends"]
    const = [a for a in nnapi["alternatives"] if a["kind"] == "const"]
    assert [a["change"] for a in const] == ["--const sr=VALUE"]
    text = CliRunner().invoke(main, ["explain", str(vad), "If_21", "--ep", "nnapi"]).output
    assert "--const sr=VALUE: sr (int64 scalar) selects its branch" in text


def test_no_const_hint_once_the_input_is_fixed_or_for_claimed_nodes(vad, tmp_path):
    run = CliRunner().invoke(main, ["convert", str(vad), "--ep", "nnapi", "--const", "sr=16000", "--no-verify",
                                    "-o", str(tmp_path / "out")])
    assert run.exit_code == 0, run.output
    assert "--const sr=VALUE" not in run.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert not any("--const" in h for h in report["partitioning"].get("suggestions", []))
    explained = CliRunner().invoke(main, ["explain", str(vad), "Conv_6", "--ep", "nnapi"]).output
    assert "--const" not in explained
