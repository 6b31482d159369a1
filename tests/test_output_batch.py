"""Several models: the HTML index shows each backend as is and after convert; --node-data names a folder."""

from __future__ import annotations

import json
import re

from onnx import helper

from mepkit import make_model, tensor


def _models(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    for name, ops in (("a", ("Relu", "Sigmoid")), ("b", ("Relu", "Erf"))):
        nodes = [helper.make_node(op, [f"v{i}"], [f"v{i + 1}"], name=f"{op.lower()}{i}") for i, op in enumerate(ops)]
        (folder / f"{name}.onnx").write_bytes(make_model(nodes, [tensor("v0", [1, 4])],
                                                          [tensor(f"v{len(ops)}", [1, 4])]).SerializeToString())
    return folder


def test_index_has_as_is_and_after_convert_per_backend(tmp_path, plugins, mobile_ep_cli):
    out = tmp_path / "reports"
    result = mobile_ep_cli("check", _models(tmp_path), "--ep", "toy,other", "--html", out, plugins=plugins)
    assert result.exit_code == 0, result.output
    index = (out / "index.html").read_text()
    header = re.findall(r"<th>([^<]*)</th>", index)
    assert header == ["model", "nodes", "toy as is", "toy after convert", "other as is", "other after convert"]
    row = re.search(r"<tr><td><a href='b.html'>.*?</tr>", index).group(0)
    assert re.findall(r"<td>([^<]*)</td>", row)[1:] == [
        "1/2 claimed, 1 partition, NO", "1/2 claimed, 1 partition, NO", "1/2 claimed, 1 partition, NO",
        "1/2 claimed, 1 partition, NO"]


def test_convert_index_has_before_and_converted(tmp_path, plugins, mobile_ep_cli):
    out = tmp_path / "reports"
    result = mobile_ep_cli("convert", _models(tmp_path), "--ep", "toy", "-o", tmp_path / "out", "--html", out,
                  "--no-verify", plugins=plugins)
    assert result.exit_code == 0, result.output
    header = re.findall(r"<th>([^<]*)</th>", (out / "index.html").read_text())
    assert header == ["model", "nodes", "toy before mobile-ep", "toy converted"]


def test_node_data_with_several_models_is_a_folder(tmp_path, plugins, mobile_ep_cli):
    models = _models(tmp_path)
    result = mobile_ep_cli("check", models, "--ep", "toy", "--node-data", tmp_path / "nd", plugins=plugins)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "nd").iterdir()) == ["a.json", "b.json"]
    data = json.loads((tmp_path / "nd" / "b.json").read_text())
    assert data["results"]["erf1"]["value"] == "CPU: toy has no rule for Erf"
    assert data["results"]["relu0"]["value"] == "toy: partition 1 of 1 (1 nodes)"
    result = mobile_ep_cli("check", models, "--ep", "toy", "--node-data", tmp_path / "nd.json", plugins=plugins)
    assert result.exit_code == 2 and "names a folder" in result.stderr


def test_piped_summary_cuts_nothing(tmp_path, plugins, mobile_ep_cli):
    models = _models(tmp_path)
    broken = models / ("a_model_with_a_long_name_" * 6 + "broken.onnx")
    broken.write_bytes(b"not a model at all")
    result = mobile_ep_cli("check", models, "--ep", "toy", plugins=plugins)
    assert result.exit_code == 6
    assert "…" not in result.stdout
    (line,) = [x for x in result.stdout.splitlines() if "FAILED" in x]
    assert line.startswith(broken.name) and len(line) > 200
