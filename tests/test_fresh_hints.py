"""Hints computed from the result they sit beside: nothing asks for what the user already gave."""

from __future__ import annotations

import json

import modern_models
import numpy as np
import onnx
from click.testing import CliRunner
from onnx import helper

from mepkit import const, make_model, tensor
from mobile_ep.cli.main import main
from mobile_ep.contract.plugins import make_plugins


def _nnapi_only():
    """The NNAPI plugin alone (--strict judges only the plugins a test needs, not whatever else is installed)."""
    import mobile_ep_nnapi.plugin

    return make_plugins(entry_points=False, plugins=[mobile_ep_nnapi.plugin])


def _detector(path):
    """A small CNN with a dynamic image input [N,3,H,W] (as a YOLO export without --shape)."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["images", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["out"], name="relu")]
    model = make_model(nodes, [tensor("images", ["N", 3, "H", "W"])], [tensor("out", None)],
                       [const("w", rng.normal(size=(4, 3, 3, 3)).astype(np.float32)),
                        const("b", np.zeros(4, np.float32))])
    onnx.save(model, path)
    return path


def test_no_shape_hint_after_the_user_gave_the_shape(tmp_path):
    source = _detector(tmp_path / "det.onnx")
    html = tmp_path / "det.html"
    run = CliRunner().invoke(main, ["convert", str(source), "--ep", "nnapi", "--shape", "images=1,3,32,32",
                                    "--html", str(html), "-o", str(tmp_path / "out")])
    assert run.exit_code == 0, run.output
    partitioning = json.loads((tmp_path / "out" / "report.json").read_text())["partitioning"]
    assert partitioning["verdict"] == "YES"
    assert not any("--shape" in hint for hint in partitioning.get("suggestions", []))
    assert "fix them with --shape" not in html.read_text()
    assert "--shape" not in run.output


def test_check_with_the_shape_given_does_not_ask_for_it(tmp_path):
    source = _detector(tmp_path / "det.onnx")
    run = CliRunner().invoke(main, ["check", str(source), "--ep", "nnapi", "--shape", "images=1,3,32,32", "--json"])
    assert run.exit_code == 0, run.output
    report = json.loads(run.stdout)
    assert not any("--shape" in h for b in report["backends"].values() for h in b.get("suggestions", []))


def test_without_shapes_the_hint_stays(tmp_path):
    source = _detector(tmp_path / "det.onnx")
    run = CliRunner().invoke(main, ["check", str(source), "--ep", "nnapi", "--json"])
    report = json.loads(run.stdout)
    assert any("--shape images=1,3,H,W" in h for h in report["backends"]["nnapi"]["suggestions"])


def test_a_dim_parameter_gets_one_value_across_inputs(tmp_path):
    model = modern_models.vad()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "sequence"
    model.graph.input[1].type.tensor_type.shape.dim[1].dim_param = "batch"
    source = tmp_path / "vad.onnx"
    onnx.save(model, source)
    run = CliRunner().invoke(main, ["check", str(source), "--ep", "nnapi", "--json"])
    assert run.exit_code == 0, run.output
    hints = json.loads(run.stdout)["backends"]["nnapi"]["suggestions"]
    assert any("--shape input=1,sequence --shape state=2,1,16" in h for h in hints), hints


def test_convert_that_leaves_everything_on_the_cpu_says_so(tmp_path):
    source = _detector(tmp_path / "det.onnx")
    run = CliRunner().invoke(main, ["convert", str(source), "--ep", "nnapi", "-o", str(tmp_path / "out")])
    assert run.exit_code == 0, run.output
    last = run.output.strip().splitlines()[-1]
    assert last.startswith("mobile-ep: warning: nnapi takes 0/1 nodes of the written model: the app gains nothing "
                           "on nnapi"), last
    assert "--shape images=1,3,H,W" in last
    strict = CliRunner().invoke(main, ["--strict", "convert", str(source), "--ep", "nnapi",
                                       "-o", str(tmp_path / "out2")], obj=_nnapi_only())
    assert strict.exit_code == 5
    assert "the app gains nothing on nnapi" in strict.output


def test_convert_with_a_claim_has_no_such_warning(tmp_path):
    source = _detector(tmp_path / "det.onnx")
    run = CliRunner().invoke(main, ["--strict", "convert", str(source), "--ep", "nnapi", "--shape",
                                    "images=1,3,32,32", "-o", str(tmp_path / "out")], obj=_nnapi_only())
    assert run.exit_code == 0 and "gains nothing" not in run.output
