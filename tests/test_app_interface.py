"""What the app must change: the written model's interface said in every report, and nothing dead written."""

from __future__ import annotations

import json

import modern_models
import onnx
import pytest
from click.testing import CliRunner

from mobile_ep.cli.main import main


@pytest.fixture(scope="module")
def vad_convert(tmp_path_factory):
    """The VAD converted for NNAPI with its sample rate fixed by --const (the If on it folds to one branch)."""
    folder = tmp_path_factory.mktemp("vad")
    source = folder / "vad.onnx"
    onnx.save(modern_models.vad(), source)
    html = folder / "vad.html"
    run = CliRunner().invoke(main, ["convert", str(source), "--ep", "nnapi", "--const", "sr=16000",
                                    "--html", str(html), "-o", str(folder / "out")])
    assert run.exit_code == 0, run.output
    return folder, run.output, html.read_text()


def test_removed_input_is_listed_in_terminal_report_and_html(vad_convert):
    folder, output, html = vad_convert
    written = onnx.load(folder / "out" / "vad.nnapi.onnx")
    assert [i.name for i in written.graph.input] == ["input", "state"]
    assert "input sr removed (int64 []): fixed by --const sr=16000: the app no longer feeds it" in output
    assert "the written model's inputs: input float32 [1,256], state float32 [2,1,16]" in " ".join(output.split())
    report = json.loads((folder / "out" / "report.json").read_text())
    assert report["interface_changes"] == [{"kind": "input", "name": "sr", "change": "removed", "before": "int64 []",
                                            "after": "", "note": "fixed by --const sr=16000: the app no longer "
                                                                 "feeds it"}]
    assert report["app_inputs"] == "input float32 [1,256], state float32 [2,1,16]"
    assert "input sr removed" in html and "state float32 [2,1,16]" in html


def test_written_model_carries_nothing_dead(vad_convert):
    folder, _, _ = vad_convert
    model = onnx.load(folder / "out" / "vad.nnapi.onnx")
    graph = model.graph
    read = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
    assert not [t.name for t in graph.initializer if t.name not in read]  # the folded-away branch's weights
    produced = {o for node in graph.node for o in node.output} | {t.name for t in graph.initializer}
    assert not [v.name for v in graph.value_info if v.name not in produced]
    assert {o.domain for o in model.opset_import} == {n.domain for n in graph.node} | {""}
    assert model.ir_version == 10


def test_shape_fix_is_an_interface_change(tmp_path):
    model = modern_models.vad()
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "samples"
    source = tmp_path / "vad.onnx"
    onnx.save(model, source)
    run = CliRunner().invoke(main, ["convert", str(source), "--ep", "nnapi", "--shape", "input=1,256",
                                    "-o", str(tmp_path / "out"), "--no-verify"])
    assert run.exit_code == 0, run.output
    assert "input input: [1,samples] -> [1,256]: the app feeds exactly this shape" in run.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [c["change"] for c in report["interface_changes"]] == ["shape"]


def test_adapter_examples_name_every_input_of_the_written_model(tmp_path):
    source = tmp_path / "vad.onnx"
    onnx.save(modern_models.vad(), source)
    run = CliRunner().invoke(main, ["-q", "convert", str(source), "--ep", "nnapi", "--const", "sr=16000",
                                    "--compile", "-o", str(tmp_path / "out"), "--no-verify"])
    assert run.exit_code == 0, run.output
    adapter = tmp_path / "out" / "adapter"
    for text in ((adapter / "README.md").read_text(),
                 (adapter / "kotlin" / "ai" / "mobileep" / "CompiledModelRunner.kt").read_text()):
        assert "input float32 [1,256], state float32 [2,1,16]" in text
        assert "sr " not in text and "{{mobile_ep:" not in text


def test_dtype_and_output_changes_are_interface_changes():
    from onnx import TensorProto, helper

    from mobile_ep.reports.interface import interface_changes

    def model(inputs, outputs):
        nodes = [helper.make_node("Identity", [inputs[0].name], [o.name]) for o in outputs]
        return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs), ir_version=10)

    original = model([helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
                     [helper.make_tensor_value_info("y", TensorProto.INT64, ["n"])])
    written = model([helper.make_tensor_value_info("ids", TensorProto.INT32, [4])],
                    [helper.make_tensor_value_info("z", TensorProto.INT32, [4])])
    changes = [(c.kind, c.name, c.change, c.before, c.after) for c in interface_changes(original, written)]
    assert changes == [("input", "ids", "dtype", "int64", "int32"), ("input", "ids", "shape", "[n]", "[4]"),
                       ("output", "y", "removed", "int64 [n]", ""), ("output", "z", "added", "", "int32 [4]")]
