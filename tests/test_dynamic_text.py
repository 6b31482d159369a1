"""Dynamic shapes in the text: computed dims named by the input dims they derive from, -v wrapped, and every
backend's section gives the concrete --shape line."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import helper

from mepkit import const, has_backend, make_model, tensor
from mobile_ep.cli.main import main

pytestmark = pytest.mark.skipif(not (has_backend("nnapi") and has_backend("coreml")), reason="needs nnapi and coreml")


@pytest.fixture(scope="module")
def strided(tmp_path_factory):
    """Three stride-2 Convs and a Reshape on [batch,3,height,width], with the exporter's dim formulas
    (``floor((floor(height/2 - 1/2) + 1)/2 - 1/2) + 1``) in value_info, as torch's dynamic export writes them."""
    rng = np.random.default_rng(0)
    nodes, x, h, w = [], "images", "height", "width"
    for i in range(3):
        nodes.append(helper.make_node("Conv", [x, f"w{i}", "b"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1],
                                      strides=[2, 2]))
        x = f"c{i}"
    nodes.append(helper.make_node("Reshape", [x, "s"], ["flat"], name="flat"))
    inits = [const(f"w{i}", rng.normal(size=(4, 3 if i == 0 else 4, 3, 3)).astype(np.float32)) for i in range(3)]
    inits += [const("b", np.zeros(4, np.float32)), const("s", np.array([0, 4, -1], np.int64))]
    model = make_model(nodes, [tensor("images", ["batch", 3, "height", "width"])], [tensor("flat", ["batch", 4, "n"])],
                       inits)
    for i in range(3):
        h, w = f"floor(({h})/2 - 1/2) + 1", f"floor(({w})/2 - 1/2) + 1"
        model.graph.value_info.append(helper.make_tensor_value_info(f"c{i}", onnx.TensorProto.FLOAT,
                                                                    ["batch", 4, h, w]))
    path = tmp_path_factory.mktemp("strided") / "strided.onnx"
    onnx.save(model, path)
    return path


def test_formulas_are_named_by_their_input_dims_and_v_is_wrapped(strided, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    run = CliRunner().invoke(main, ["check", str(strided), "--ep", "nnapi,coreml", "-v"])
    assert run.exit_code == 0, run.output
    assert "floor" not in run.stdout
    assert "[batch,4,f(height),f(width)]" in run.stdout
    assert max(len(line) for line in run.stdout.splitlines()) <= 100


def test_every_backend_section_gives_the_concrete_shape_line(strided):
    run = CliRunner().invoke(main, ["check", str(strided), "--ep", "nnapi,coreml"])
    assert run.exit_code == 0, run.output
    sections = run.stdout.split("\n\n")
    for name in ("nnapi", "coreml"):
        (section,) = [s for s in sections if s.startswith(f"{name} ")]
        assert "--shape images=1,3,H,W" in section, section


@pytest.mark.parametrize("refused", [False, True])
def test_a_backend_taking_the_dynamic_nodes_gets_the_shape_line_unless_it_takes_all(tmp_path, refused):
    """Core ML takes nodes with dynamic shapes: its section names the --shape when it leaves a node on the CPU
    (for another reason), and says nothing of shapes when it takes every node."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["images", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["out"], name="relu")]
    outputs = [tensor("out", ["N", 4, "H", "W"])]
    if refused:  # an op Core ML has no rule for
        nodes.append(helper.make_node("Equal", ["out", "out"], ["same"], name="same"))
        outputs.append(tensor("same", ["N", 4, "H", "W"], onnx.TensorProto.BOOL))
    model = make_model(nodes, [tensor("images", ["N", 3, "H", "W"])], outputs,
                       [const("w", rng.normal(size=(4, 3, 3, 3)).astype(np.float32)),
                        const("b", np.zeros(4, np.float32))])
    path = tmp_path / "cnn.onnx"
    onnx.save(model, path)
    run = CliRunner().invoke(main, ["check", str(path), "--ep", "coreml"])
    assert run.exit_code == 0, run.output
    text = " ".join(run.stdout.split())
    assert "2/3 nodes claimed" in text if refused else "2/2 nodes claimed" in text
    line = "input shapes are dynamic: --shape images=1,3,H,W (the sizes your app feeds)"
    assert (line in text) is refused
    assert ("--shape" in text) is refused
