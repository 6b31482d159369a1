"""--node-data: Model Explorer node data, one entry per node of the original model."""

from __future__ import annotations

import json
import os

import onnx
import pytest

from mepkit import LIGHT_DIR

pytest.importorskip("mobile_ep_nnapi")

RESNET = LIGHT_DIR / "light_resnet50.onnx"


def _node_ids(path):
    graph = onnx.load(path, load_external_data=False).graph
    return [n.name or n.output[0] for n in graph.node], graph


def test_check_node_data_names_every_node_and_the_sums(tmp_path, mobile_ep_cli):
    target = tmp_path / "resnet.json"
    result = mobile_ep_cli("check", RESNET, "--ep", "nnapi", "--node-data", target, plugins=None)
    assert result.exit_code == 0, result.output
    assert f"wrote {target}" in result.stderr
    data = json.loads(target.read_text())
    ids, graph = _node_ids(RESNET)
    assert set(data["results"]) == set(ids)
    sums = [n.name for n in graph.node if n.op_type == "Sum"]
    assert len(sums) == 16
    for name in sums:
        assert data["results"][name] == {"value": "CPU: nnapi has no rule for Sum", "bgColor": "#fb8072"}
    claimed = [v["value"] for k, v in data["results"].items() if k not in sums]
    assert all(v.startswith("nnapi: partition ") or v.startswith("removed by onnxruntime") for v in claimed)
    assert data["name"] == "mobile-ep nnapi"


def test_node_data_validates_with_model_explorers_builder(tmp_path, mobile_ep_cli):
    if os.environ.get("MOBILE_EP_REQUIRE_MODEL_EXPLORER"):  # (tox -e browser installs it)
        import model_explorer.node_data_builder as ndb
    else:
        ndb = pytest.importorskip("model_explorer.node_data_builder")
    target = tmp_path / "resnet.json"
    assert mobile_ep_cli("check", RESNET, "--ep", "nnapi", "--node-data", target, plugins=None).exit_code == 0
    data = json.loads(target.read_text())
    rebuilt = ndb.GraphNodeData(**{**data, "results": {k: ndb.NodeDataResult(**v) for k, v in data["results"].items()}})
    assert json.loads(rebuilt.to_json_string()) == data
    assert any("Sum" in r.value for r in rebuilt.results.values())


def test_convert_node_data_shows_the_rewritten_sums_claimed(tmp_path, mobile_ep_cli):
    target = tmp_path / "nd.json"
    result = mobile_ep_cli("convert", RESNET, "--ep", "nnapi", "--no-verify", "-o", tmp_path / "out",
                           "--node-data", target, plugins=None)
    assert result.exit_code == 0, result.output
    data = json.loads(target.read_text())
    sums = [n.name for n in onnx.load(RESNET, load_external_data=False).graph.node if n.op_type == "Sum"]
    for name in sums:  # convert rewrites each Sum into Adds, which NNAPI takes: one partition of everything
        assert data["results"][name]["value"] == "rewritten by mobile-ep convert; nnapi: partition 1 of 1 (123 nodes)"


def test_several_backends_write_one_file_each(tmp_path, mobile_ep_cli):
    pytest.importorskip("mobile_ep_coreml")
    target = tmp_path / "nd.json"
    assert mobile_ep_cli("check", RESNET, "--ep", "nnapi,coreml", "--node-data", target,
                         plugins=None).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nd.coreml.json", "nd.nnapi.json"]
