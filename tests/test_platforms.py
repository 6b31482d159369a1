"""Backends declare their platform: fixes and the backends registered together stay within one platform."""

from __future__ import annotations

import json

import modern_models
import onnx
import pytest
from click.testing import CliRunner

from mepkit import has_backend
from mobile_ep import Backend
from mobile_ep.cli.main import main
from mobile_ep.contract.plugins import make_plugins

pytestmark = pytest.mark.skipif(not all(map(has_backend, ("nnapi", "qnn", "coreml"))),
                                reason="needs the nnapi, qnn and coreml backends")


@pytest.fixture(scope="module")
def vad(tmp_path_factory):
    path = tmp_path_factory.mktemp("vad") / "vad.onnx"
    onnx.save(modern_models.vad(), path)
    return path


def test_the_shipped_backends_declare_their_platform():
    backends = make_plugins().backends()
    assert {name: backends[name].platform for name in ("nnapi", "qnn", "coreml")} == {
        "nnapi": "android", "qnn": "android", "coreml": "ios"}
    assert Backend.platform == "any"  # a third-party backend that names none


def test_explain_offers_only_backends_of_the_same_platform(vad):
    run = CliRunner().invoke(main, ["explain", str(vad), "Conv_6", "--ep", "nnapi"])
    assert run.exit_code == 0, run.output
    assert "--ep qnn: runs on qnn" in run.output
    assert "--ep coreml" not in run.output


def test_check_combines_the_backends_of_each_platform(vad):
    run = CliRunner().invoke(main, ["check", str(vad), "--ep", "nnapi,qnn,coreml"])
    assert run.exit_code == 0, run.output
    text = " ".join(run.output.split())
    assert "together on android, in priority order nnapi > qnn:" in text
    assert "coreml:" not in text.split("together on android", 1)[1]
    data = json.loads(CliRunner().invoke(main, ["check", str(vad), "--ep", "nnapi,qnn,coreml", "--json"]).stdout)
    assert data["combined"]["order"] == ["nnapi", "qnn"] and data["combined"]["platform"] == "android"
    assert "combined_other_platforms" not in data  # Core ML alone on iOS
    assert data["backends"]["coreml"]["platform"] == "ios"


@pytest.mark.skipif(not has_backend("example"), reason="needs the example plugin")
def test_a_backend_without_a_platform_joins_every_platform(vad, tmp_path):
    html = tmp_path / "vad.html"
    data = json.loads(CliRunner().invoke(main, ["check", str(vad), "--ep", "nnapi,coreml,example", "--json",
                                                "--html", str(html)]).stdout)
    assert data["combined"]["order"] == ["nnapi", "example"]
    assert [c["order"] for c in data["combined_other_platforms"]] == [["coreml", "example"]]
    page = html.read_text()
    assert "All together on android, in priority order nnapi &gt; example" in page
    assert "All together on ios, in priority order coreml &gt; example" in page
