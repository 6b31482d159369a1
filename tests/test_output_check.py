"""What check, convert, explain and conformance print: the answer first, one line per cause, nothing cut."""

from __future__ import annotations

import json
import re

import onnx
import pytest
from click.testing import CliRunner
from output_models import ocr_det_like

from mobile_ep.cli.main import main

pytest.importorskip("mobile_ep_nnapi")
pytest.importorskip("mobile_ep_coreml")


def run(*args):
    return CliRunner().invoke(main, list(map(str, args)), catch_exceptions=False)


@pytest.fixture(autouse=True)
def _piped(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)  # stdout is not a terminal under CliRunner: nothing is cut


@pytest.fixture(scope="module")
def det(tmp_path_factory):
    """A PP-OCRv4-det-like model: input x [?,3,?,?], a few hundred nodes."""
    path = tmp_path_factory.mktemp("det") / "det.onnx"
    model = ocr_det_like()
    assert len(model.graph.node) >= 250
    onnx.save(model, path)
    return path


def test_check_of_a_dynamic_detector_is_short_and_names_the_shape_fix(det):
    result = run("check", det, "--ep", "nnapi,coreml")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) <= 40, result.stdout
    # piped: wrapped, never cut (a long list of partition sizes is summed up as "…  (N in all)" by design)
    assert "…" not in re.sub(r"…\s+\(\d+ in all\)", "", result.stdout)
    assert all(len(line) <= 100 for line in lines)
    text = " ".join(result.stdout.split())
    assert any("--shape x=1,3,H,W " in line for line in lines)  # whole, on one line
    (nnapi,) = [line for line in lines if line.startswith("nnapi ")]
    assert "0/339 nodes claimed (0.0%) in 0 partitions, verdict NO" in nnapi
    # One line per cause: the hundred symbolic shapes are one cause, the missing rules another.
    causes = [line for line in lines if " on CPU: " in line]
    assert [c.split(" on CPU: ")[1].split(" ")[0] for c in causes[:2]] == ["dynamic", "nnapi"]
    assert "nnapi has no rule for HardSigmoid x73, ConvTranspose x2" in text
    assert "together" not in text  # an Android and an iOS backend: no app registers both
    assert "not combined: nnapi (android), coreml (ios) are for apps on different platforms" in text


def test_check_with_shape_makes_the_fixed_model_the_subject(det):
    result = run("check", det, "--ep", "nnapi,coreml", "--shape", "x=1,3,640,640")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) <= 25, result.stdout
    text = " ".join(result.stdout.split())
    assert "with the shapes fixed: x [?,3,?,?] -> [1,3,640,640]" in text
    assert "nnapi 0.1.0 (shapes fixed, after mobile-ep convert): " in text
    assert "as is (no --shape/--dim, no rewrites): 0/339 nodes in 0 partitions, verdict NO" in text
    assert "dynamic shapes" not in text and "fix them with --shape" not in text
    assert "together" not in text and "not combined" in text


def test_check_json_groups_reasons_by_cause(det):
    data = json.loads(run("check", det, "--ep", "nnapi", "--json").stdout)
    nnapi = data["backends"]["nnapi"]
    causes = nnapi["causes"]
    assert sum(c["count"] for c in causes) == len(nnapi["unsupported"]) == 339
    assert [c["kind"] for c in causes] == ["dynamic", "no_rule"]
    assert causes[1]["ops"] == {"HardSigmoid": 73, "ConvTranspose": 2}


def test_check_v_lists_every_node(det):
    data = json.loads(run("check", det, "--ep", "nnapi", "--json").stdout)
    names = [u["node"] for u in data["backends"]["nnapi"]["unsupported"]]
    result = run("check", det, "-v", "--ep", "nnapi")
    assert result.exit_code == 0, result.output
    rows = {line.split()[0] for line in result.stdout.splitlines() if line.startswith("    ") and ": " in line}
    assert set(names) <= rows
    assert "every node left on CPU (339):" in result.stdout
    assert "options: api_level=" in result.stdout
    assert run("-v", "check", det, "--ep", "nnapi").stdout == result.stdout  # the group's -v too


def test_combined_only_when_several_backends_were_asked_for(det):
    assert "together" not in run("check", det).stdout  # every installed backend, none asked for
    assert "together" not in run("check", det, "--ep", "coreml").stdout


def test_a_long_reason_is_wrapped_not_cut(det):
    result = run("check", det, "--ep", "coreml")
    text = " ".join(result.stdout.split())
    assert "Resize x9: nearest_mode round_prefer_floor; Core ML takes floor only" in text
    # Dynamic shapes: the partitions' costs are unknown, shown so, and drop none of them.
    assert "not worth their copies" not in text and "4 of unknown cost (shapes not static)" in text


def test_convert_compile_of_nothing_warns_and_strict_fails(det, tmp_path):
    result = run("convert", det, "--ep", "nnapi", "--compile", "--no-verify", "-o", tmp_path / "a")
    assert result.exit_code == 0, result.output
    assert result.stderr.strip().splitlines()[-1] == (
        "mobile-ep: warning: --compile compiled no partition: nnapi claims no node of this model "
        "(fix the input shapes with --shape x=1,3,H,W)")
    result = run("--strict", "convert", det, "--ep", "nnapi", "--compile", "--no-verify", "-o", tmp_path / "b")
    assert result.exit_code == 5
    assert "--compile compiled no partition" in result.stderr


def test_conformance_takes_shape_and_says_0_nodes_claimed(tmp_path):
    path = tmp_path / "small.onnx"
    onnx.save(ocr_det_like(blocks=4), path)
    result = run("conformance", "--ep", "nnapi", "--model", path)
    assert result.exit_code == 0, result.output
    (line,) = [x for x in result.stdout.splitlines() if "small.onnx" in x]
    assert line.split()[:5] == ["nothing", "small.onnx:", "0", "nodes", "claimed"]
    assert "give the input sizes with --shape x=1,3,H,W" in line
    result = run("conformance", "--ep", "nnapi", "--model", path, "--shape", "x=1,3,32,32", "--json")
    (model,) = json.loads(result.stdout)[0]["models"]
    assert model["status"] == "passed" and model["claimed"] > 0 and model["emulated"] == model["partitions"] > 0


def test_explain_with_shape_explains_the_fixed_model(det):
    result = run("explain", det, "conv_3_node", "--ep", "nnapi", "--shape", "x=1,3,64,64")
    assert result.exit_code == 0, result.output
    assert "note: the model with its input shapes fixed (--shape x=1,3,64,64)" in result.stdout
    assert "x float[1,3,64,64]" in result.stdout
    assert "nnapi: runs on nnapi" in result.stdout
    assert "fix it with --shape" not in result.stdout and "a guess" not in result.stdout


def test_help_names_backend_options_with_their_prefix():
    text = run("convert", "--help").stdout
    assert "-O coreml.model_format=NeuralNetwork" in text
    assert "-O model_format" not in text


def test_a_cause_convert_rewrites_says_so():
    from mepkit import LIGHT_DIR

    result = run("check", LIGHT_DIR / "light_resnet50.onnx", "--ep", "nnapi")
    assert result.exit_code == 0, result.output
    assert ("    16 nodes on CPU: nnapi has no rule for Sum x16; mobile-ep convert rewrites them (sum-to-add x16)\n"
            in result.stdout)
    assert len(result.stdout.splitlines()) <= 8
