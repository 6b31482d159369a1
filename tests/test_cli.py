"""The command line: one-line errors with documented exit codes, check/convert/list/ops output."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from onnx import helper

from mepkit import LIGHT_DIR, make_model, tensor
from mobile_ep import errors


@pytest.fixture
def relu_model(tmp_path):
    path = tmp_path / "relu.onnx"
    path.write_bytes(make_model([helper.make_node("Relu", ["x"], ["y"], name="relu"),
                                 helper.make_node("Erf", ["y"], ["z"], name="erf")],
                                [tensor("x", [1, 4])], [tensor("z", [1, 4])]).SerializeToString())
    return path


def bad_inputs(tmp_path):
    good = make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [1])], [tensor("y", [1])])
    data = good.SerializeToString()
    cases = {}
    (tmp_path / "truncated.onnx").write_bytes(data[: len(data) // 2])
    cases["truncated"] = (tmp_path / "truncated.onnx", "not a valid ONNX model")
    (tmp_path / "text.onnx").write_text("this is not a model\n")
    cases["not onnx"] = (tmp_path / "text.onnx", "not")
    (tmp_path / "empty.onnx").write_bytes(b"")
    cases["empty"] = (tmp_path / "empty.onnx", "empty file")
    cases["missing"] = (tmp_path / "missing.onnx", "no such file")
    (tmp_path / "folder").mkdir()  # a folder of models is a batch (test_cli_batch.py); an empty one is no model
    cases["directory"] = (tmp_path / "folder", "is a directory")
    future = make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [1])], [tensor("y", [1])], opset=99)
    (tmp_path / "future.onnx").write_bytes(future.SerializeToString())
    cases["unsupported opset"] = (tmp_path / "future.onnx", "unsupported opset: the model imports ai.onnx opset 99")
    undefined = make_model([helper.make_node("Relu", ["nowhere"], ["y"])], [tensor("x", [1])], [tensor("y", [1])])
    (tmp_path / "undefined.onnx").write_bytes(undefined.SerializeToString())
    cases["undefined input"] = (tmp_path / "undefined.onnx", "invalid ONNX model")
    return cases


@pytest.mark.parametrize("command", ["check", "convert"])
def test_bad_models_end_in_one_line_error_without_traceback(tmp_path, plugins, command, mobile_ep_cli):
    for label, (path, message) in bad_inputs(tmp_path).items():
        args = [command, str(path), "--ep", "toy"] + (["-o", str(tmp_path / "out")] if command == "convert" else [])
        result = mobile_ep_cli(*args, plugins=plugins)
        assert result.exit_code == errors.EXIT_BAD_MODEL, (label, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, (label, result.stderr)
        assert lines[0].startswith("mobile-ep: error: ") and message in lines[0], (label, lines[0])
        assert "Traceback" not in result.output


def test_error_in_a_real_process_has_no_traceback(tmp_path):
    missing = tmp_path / "missing.onnx"
    proc = subprocess.run([sys.executable, "-m", "mobile_ep.cli", "check", str(missing)],
                          capture_output=True, text=True, env={**os.environ, "MOBILE_EP_DISABLE_PLUGINS": "1"})
    assert proc.returncode == errors.EXIT_BAD_MODEL
    assert proc.stderr.strip() == f"mobile-ep: error: {missing}: no such file"
    assert proc.stdout == ""


def test_input_is_never_modified(tmp_path, plugins, relu_model, mobile_ep_cli):
    before = relu_model.read_bytes()
    result = mobile_ep_cli("convert", str(relu_model), "--ep", "toy", "-o", str(tmp_path / "out"), plugins=plugins)
    assert result.exit_code == 0, result.output
    assert relu_model.read_bytes() == before


def test_refuses_to_overwrite_the_input(tmp_path, plugins, mobile_ep_cli):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [1])], [tensor("y", [1])])
    victim = tmp_path / "report.json"  # a model file named like one of convert's outputs
    victim.write_bytes(model.SerializeToString())
    before = victim.read_bytes()
    result = mobile_ep_cli("convert", str(victim), "--ep", "toy", "-o", str(tmp_path), plugins=plugins)
    assert result.exit_code == errors.EXIT_USAGE
    assert "would overwrite the input model" in result.stderr
    assert victim.read_bytes() == before


def test_unknown_backend_and_bad_option_are_usage_errors(relu_model, plugins, mobile_ep_cli):
    result = mobile_ep_cli("check", str(relu_model), "--ep", "nope", plugins=plugins)
    assert result.exit_code == errors.EXIT_USAGE
    assert result.stderr.strip() == "mobile-ep: error: unknown backend 'nope'; available: other, toy"
    result = mobile_ep_cli("check", str(relu_model), "--ep", "toy", "-O", "level=3", plugins=plugins)
    assert result.exit_code == errors.EXIT_USAGE
    assert "toy: unknown option 'level'" in result.stderr
    result = mobile_ep_cli("check", str(relu_model), "--ep", "toy,other", "-O", "level=3", plugins=plugins)
    assert "name the backend" in result.stderr


def test_check_json_has_the_documented_fields(relu_model, plugins, mobile_ep_cli):
    result = mobile_ep_cli("check", str(relu_model), "--ep", "toy", "--json", plugins=plugins)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    toy = data["backends"]["toy"]
    assert data["model"] == str(relu_model)
    assert toy["nodes"] == 2 and toy["supported_nodes"] == 1
    (partition,) = toy["partitions"]
    assert {k: partition[k] for k in ("nodes", "ops", "inputs", "outputs")} == {
        "nodes": ["relu"], "ops": {"Relu": 1}, "inputs": ["x"], "outputs": ["y"]}
    # A single Relu on 4 floats is not worth two copies: the cost model says so.
    assert partition["estimate"]["kept"] is False
    assert partition["estimate"]["reason"].startswith("not worth its copies")
    assert partition["estimate"]["flops"] == 4 and partition["estimate"]["boundary_bytes"] == 32
    assert type(partition["estimate"]["boundary_bytes"]) is int  # bytes, not 32.0
    assert partition["estimate"]["reason"].endswith("moving 32 bytes")
    assert toy["unsupported"] == [{"node": "erf", "op": "Erf", "reason": "Erf: toy has no rule for Erf"}]
    assert toy["verdict"] == "NO"  # 1 partition with 50% of the nodes


def test_check_text_is_a_summary(relu_model, plugins, mobile_ep_cli):
    result = mobile_ep_cli("check", str(relu_model), "--ep", "toy,other", plugins=plugins)
    assert result.exit_code == 0
    out = result.stdout
    assert "toy 1.0: 1/2 nodes claimed (50.0%) in 1 partition, verdict NO" in out
    assert "    1 node on CPU: toy has no rule for Erf (erf)\n" in out
    assert "together, in priority order toy > other: toy: 1, other: 0, cpu: 1 nodes" in out


def test_convert_writes_models_and_report(tmp_path, plugins, relu_model, mobile_ep_cli):
    out = tmp_path / "out"
    result = mobile_ep_cli("convert", str(relu_model), "--ep", "toy", "-o", str(out), plugins=plugins)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["relu.toy.onnx", "relu.toy.ort", "report.json"]
    report = json.loads((out / "report.json").read_text())
    assert report["backend"] == "toy"
    assert [v["ok"] for v in report["verification"]] == [True, True]
    assert "matches the original" in result.stdout


def test_convert_without_model_uses_the_builtin_sample(tmp_path, plugins, mobile_ep_cli):
    result = mobile_ep_cli("convert", "--ep", "toy", "-o", str(tmp_path), plugins=plugins)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "mobilenet_sample.toy.ort").exists()
    assert "built-in sample" in result.stderr


def test_list_and_ops(plugins, mobile_ep_cli):
    result = mobile_ep_cli("list", "-v", plugins=plugins)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0].split()[:5] == ["toy", "1.0", "NCHW", "13", "ops"]
    result = mobile_ep_cli("ops", "--ep", "toy", "--format", "md", plugins=plugins)
    assert "| Relu | `mepkit` | input 0 float32 with a static shape |" in result.stdout


def test_list_with_plugins_blocked_shows_none(monkeypatch, mobile_ep_cli):
    monkeypatch.setenv("MOBILE_EP_DISABLE_PLUGINS", "1")
    result = mobile_ep_cli("list", plugins=None)
    assert result.stdout.strip() == "no backends installed (MOBILE_EP_DISABLE_PLUGINS is set)"


def test_a_backend_that_raises_costs_only_its_own_claims(relu_model, mobile_ep_cli):
    from mepkit import ToyBackend, ToyPlugin
    from mobile_ep.contract.plugins import make_plugins

    class Exploding(ToyBackend):
        name = "boom"

        def supports(self, unit, ctx):
            if unit.op_type == "Relu":
                raise ZeroDivisionError("rule bug")
            return super().supports(unit, ctx)

    pm = make_plugins(entry_points=False, plugins=[ToyPlugin(Exploding(), ToyBackend())])
    result = mobile_ep_cli("check", str(relu_model), "--ep", "boom,toy", "--json", plugins=pm)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["backends"]["boom"]["unsupported"][0] == {
        "node": "relu", "op": "Relu",
        "reason": "Relu: boom failed on this node (ZeroDivisionError: rule bug); left on CPU"}
    assert data["backends"]["toy"]["supported_nodes"] == 1  # the other backend is unaffected
    assert data["combined"]["placement"] == {"boom": 0, "toy": 1, "cpu": 1}
    # --strict: the backend's failure is an error naming it.
    result = mobile_ep_cli("--strict", "check", str(relu_model), "--ep", "boom", plugins=pm)
    assert result.exit_code == errors.EXIT_BACKEND
    assert result.stderr.strip() == ("mobile-ep: error: backend 'boom' raised ZeroDivisionError on Relu node "
                                     "'relu': rule bug")


def test_internal_errors_are_one_line_unless_debug(relu_model, plugins, monkeypatch, mobile_ep_cli):
    from mobile_ep.reports import text as report

    def broken(*args, **kwargs):
        raise ZeroDivisionError("renderer bug")

    monkeypatch.setattr(report, "check_text", broken)
    result = mobile_ep_cli("check", str(relu_model), "--ep", "toy", plugins=plugins)
    assert result.exit_code == errors.EXIT_FAILURE
    assert result.stderr.strip() == ("mobile-ep: internal error: ZeroDivisionError: renderer bug "
                                     "(rerun with --debug for the traceback)")
    with pytest.raises(ZeroDivisionError):
        mobile_ep_cli("--debug", "check", str(relu_model), "--ep", "toy", plugins=plugins)


def test_light_models_exist():
    assert len(list(LIGHT_DIR.glob("light_*.onnx"))) == 9
