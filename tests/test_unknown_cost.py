"""An unknown cost (dynamic shapes) is unknown: shown as such, and it decides nothing."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import helper

from mepkit import const, has_backend, make_model, tensor
from mobile_ep.cli.main import main

pytestmark = pytest.mark.skipif(not has_backend("coreml"), reason="needs the coreml backend")


@pytest.fixture()
def dynamic_cnn(tmp_path):
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["images", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "w2", "b"], ["out"], name="conv2", pads=[1, 1, 1, 1])]
    model = make_model(nodes, [tensor("images", ["N", 3, "H", "W"])], [tensor("out", ["N", 4, "H", "W"])],
                       [const("w", rng.normal(size=(4, 3, 3, 3)).astype(np.float32)),
                        const("w2", rng.normal(size=(4, 4, 3, 3)).astype(np.float32)),
                        const("b", np.zeros(4, np.float32))])
    path = tmp_path / "cnn.onnx"
    onnx.save(model, path)
    return path


def test_a_partition_with_dynamic_shapes_has_an_unknown_cost_that_decides_nothing(dynamic_cnn):
    run = CliRunner().invoke(main, ["check", str(dynamic_cnn), "--ep", "coreml", "--json"])
    assert run.exit_code == 0, run.output
    (partition,) = json.loads(run.stdout)["backends"]["coreml"]["partitions"]
    estimate = partition["estimate"]
    assert estimate["known"] is False and estimate["kept"] is True
    assert estimate["flops"] is None and estimate["estimated_saving_us"] is None
    assert estimate["reason"].startswith("cost unknown: dynamic shapes")
    text = CliRunner().invoke(main, ["check", str(dynamic_cnn), "--ep", "coreml"]).stdout
    assert "not worth" not in text and "0 bytes" not in text
    assert "1 of unknown cost (shapes not static)" in " ".join(text.split())


def test_with_the_shape_given_the_cost_is_estimated(dynamic_cnn):
    run = CliRunner().invoke(main, ["check", str(dynamic_cnn), "--ep", "coreml", "--shape", "images=1,3,64,64",
                                    "--json"])
    (partition,) = json.loads(run.stdout)["after_convert"]["coreml"]["partitions"]
    assert partition["estimate"]["flops"] > 0 and "known" not in partition["estimate"]
