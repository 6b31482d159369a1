"""What check, convert, explain and conformance print: the answer first, one line per cause, nothing cut."""

from __future__ import annotations

import json
import re

import onnx
import pytest
from output_models import ocr_det_like

pytest.importorskip("mobile_ep_nnapi")
pytest.importorskip("mobile_ep_coreml")


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


def test_check_of_a_dynamic_detector_is_short_and_names_the_shape_fix(det, mobile_ep_cli):
    result = mobile_ep_cli("check", det, "--ep", "nnapi,coreml", plugins=None)
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


def test_check_with_shape_makes_the_fixed_model_the_subject(det, mobile_ep_cli):
    result = mobile_ep_cli("check", det, "--ep", "nnapi,coreml", "--shape", "x=1,3,640,640", plugins=None)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) <= 25, result.stdout
    text = " ".join(result.stdout.split())
    assert "with the shapes fixed: x [?,3,?,?] -> [1,3,640,640]" in text
    assert "nnapi 0.1.0 (shapes fixed, after mobile-ep convert): " in text
    assert "as is (no --shape/--dim, no rewrites): 0/339 nodes in 0 partitions, verdict NO" in text
    assert "dynamic shapes" not in text and "fix them with --shape" not in text
    assert "together" not in text and "not combined" in text


def test_check_json_groups_reasons_by_cause(det, mobile_ep_cli):
    data = json.loads(mobile_ep_cli("check", det, "--ep", "nnapi", "--json", plugins=None).stdout)
    nnapi = data["backends"]["nnapi"]
    causes = nnapi["causes"]
    assert sum(c["count"] for c in causes) == len(nnapi["unsupported"]) == 339
    assert [c["kind"] for c in causes] == ["dynamic", "no_rule"]
    assert causes[1]["ops"] == {"HardSigmoid": 73, "ConvTranspose": 2}


def test_check_v_lists_every_node(det, mobile_ep_cli):
    data = json.loads(mobile_ep_cli("check", det, "--ep", "nnapi", "--json", plugins=None).stdout)
    names = [u["node"] for u in data["backends"]["nnapi"]["unsupported"]]
    result = mobile_ep_cli("check", det, "-v", "--ep", "nnapi", plugins=None)
    assert result.exit_code == 0, result.output
    rows = {line.split()[0] for line in result.stdout.splitlines() if line.startswith("    ") and ": " in line}
    assert set(names) <= rows
    assert "every node left on CPU (339):" in result.stdout
    assert "options: api_level=" in result.stdout
    assert mobile_ep_cli("-v", "check", det, "--ep", "nnapi", plugins=None).stdout == result.stdout  # the group's -v too


def test_combined_only_when_several_backends_were_asked_for(det, mobile_ep_cli):
    assert "together" not in mobile_ep_cli("check", det, plugins=None).stdout  # every installed backend, none asked for
    assert "together" not in mobile_ep_cli("check", det, "--ep", "coreml", plugins=None).stdout


def test_a_long_reason_is_wrapped_not_cut(det, mobile_ep_cli):
    result = mobile_ep_cli("check", det, "--ep", "coreml", plugins=None)
    text = " ".join(result.stdout.split())
    assert "Resize x9: nearest_mode round_prefer_floor; Core ML takes floor only" in text
    # Dynamic shapes: the partitions' costs are unknown, shown so, and drop none of them.
    assert "not worth their copies" not in text and "4 of unknown cost (shapes not static)" in text


def test_convert_compile_of_nothing_warns_and_strict_fails(det, tmp_path, mobile_ep_cli):
    result = mobile_ep_cli("convert", det, "--ep", "nnapi", "--compile", "--no-verify", "-o", tmp_path / "a",
                           plugins=None)
    assert result.exit_code == 0, result.output
    assert result.stderr.strip().splitlines()[-1] == (
        "mobile-ep: warning: --compile compiled no partition: nnapi claims no node of this model "
        "(fix the input shapes with --shape x=1,3,H,W)")
    result = mobile_ep_cli("--strict", "convert", det, "--ep", "nnapi", "--compile", "--no-verify", "-o",
                           tmp_path / "b", plugins=None)
    assert result.exit_code == 5
    assert "--compile compiled no partition" in result.stderr


def test_conformance_takes_shape_and_says_0_nodes_claimed(tmp_path, mobile_ep_cli):
    path = tmp_path / "small.onnx"
    onnx.save(ocr_det_like(blocks=4), path)
    result = mobile_ep_cli("conformance", "--ep", "nnapi", "--model", path, plugins=None)
    assert result.exit_code == 0, result.output
    (line,) = [x for x in result.stdout.splitlines() if "small.onnx" in x]
    assert line.split()[:5] == ["nothing", "small.onnx:", "0", "nodes", "claimed"]
    assert "give the input sizes with --shape x=1,3,H,W" in line
    result = mobile_ep_cli("conformance", "--ep", "nnapi", "--model", path, "--shape", "x=1,3,32,32", "--json",
                           plugins=None)
    (model,) = json.loads(result.stdout)[0]["models"]
    assert model["status"] == "passed" and model["claimed"] > 0 and model["emulated"] == model["partitions"] > 0


def test_explain_with_shape_explains_the_fixed_model(det, mobile_ep_cli):
    result = mobile_ep_cli("explain", det, "conv_3_node", "--ep", "nnapi", "--shape", "x=1,3,64,64", plugins=None)
    assert result.exit_code == 0, result.output
    assert "note: the model with its input shapes fixed (--shape x=1,3,64,64)" in result.stdout
    assert "x float[1,3,64,64]" in result.stdout
    assert "nnapi: runs on nnapi" in result.stdout
    assert "fix it with --shape" not in result.stdout and "a guess" not in result.stdout


def test_help_names_backend_options_with_their_prefix(mobile_ep_cli):
    text = mobile_ep_cli("convert", "--help", plugins=None).stdout
    assert "-O coreml.model_format=NeuralNetwork" in text
    assert "-O model_format" not in text


def test_a_cause_convert_rewrites_says_so(mobile_ep_cli):
    from mepkit import LIGHT_DIR

    result = mobile_ep_cli("check", LIGHT_DIR / "light_resnet50.onnx", "--ep", "nnapi", plugins=None)
    assert result.exit_code == 0, result.output
    assert ("    16 nodes on CPU: nnapi has no rule for Sum x16; mobile-ep convert rewrites them (sum-to-add x16)\n"
            in result.stdout)
    assert len(result.stdout.splitlines()) <= 8
