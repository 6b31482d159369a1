"""What convert prints: the converted model's result, what was written, and the verification read right."""

from __future__ import annotations

from click.testing import CliRunner
from onnx import helper

from mepkit import make_model, tensor
from mobile_ep.cli.main import main


def test_convert_text_reports_relative_error_only_above_its_floor(tmp_path, plugins):
    path = tmp_path / "m.onnx"
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu"), helper.make_node("Sigmoid", ["y"], ["z"], name="sig")]
    path.write_bytes(make_model(nodes, [tensor("x", [1, 64])], [tensor("z", [1, 64])]).SerializeToString())
    result = CliRunner().invoke(main, ["convert", str(path), "--ep", "toy", "-o", str(tmp_path / "out")], obj=plugins,
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"{path} -> toy"
    assert lines[1].startswith("toy 1.0: 2/2 nodes claimed (100.0%) in 1 partition, verdict YES")
    verified = [line.strip() for line in lines if line.startswith("    z: ")]
    assert len(verified) == 2  # the .onnx and the .ort
    for line in verified:
        assert line.startswith("z: ok, max abs ")
        assert "where |reference| > 1e-04" in line or "relative error not measured" in line


def test_check_suggests_a_shape_for_every_dynamic_input(tmp_path, plugins):
    path = tmp_path / "two.onnx"
    nodes = [helper.make_node("Add", ["ids", "mask"], ["s"], name="add"), helper.make_node("Relu", ["s"], ["y"], name="relu"),
             helper.make_node("Relu", ["img"], ["z"], name="relu_img")]
    inputs = [tensor("ids", ["batch", "seq"]), tensor("mask", ["batch", "seq"]), tensor("img", ["batch", None, None, 3])]
    path.write_bytes(make_model(nodes, inputs, [tensor("y", ["batch", "seq"]),
                                                tensor("z", ["batch", None, None, 3])]).SerializeToString())
    result = CliRunner().invoke(main, ["check", str(path), "--ep", "toy"], obj=plugins, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert ("3 nodes on CPU: dynamic shapes (Relu x2, Add); fix them with --shape ids=1,seq --shape mask=1,seq "
            "--shape img=1,H,W,3 (seq, H, W: the sizes your app feeds)") in text
