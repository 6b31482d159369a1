"""What a user meets in the first minutes: backend names, -o, list -v."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from mepkit import has_backend
from mobile_ep.cli.main import main
from mobile_ep.samples import write_sample


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return write_sample(tmp_path_factory.mktemp("sample"))


def test_backend_names_are_case_insensitive(sample):
    run = CliRunner().invoke(main, ["check", str(sample), "--ep", "coreML,NNAPI", "-O", "NNAPI.api_level=29"])
    assert run.exit_code == 0, run.output
    assert re.search(r"^coreml 0.1.0: .*^nnapi 0.1.0: ", run.output, re.M | re.S)


def test_an_unknown_backend_gets_did_you_mean(sample):
    run = CliRunner().invoke(main, ["check", str(sample), "--ep", "corml"])
    assert run.exit_code == 2
    assert run.output.strip().splitlines()[-1].endswith("did you mean 'coreml'?")


def test_output_named_like_a_model_is_refused(sample, tmp_path):
    target = tmp_path / "vad.onnx"
    run = CliRunner().invoke(main, ["convert", str(sample), "--ep", "nnapi", "-o", str(target)])
    assert run.exit_code == 2
    assert len(run.output.strip().splitlines()) == 1
    assert f"-o {target}: -o names the output folder" in run.output
    assert not target.exists()


def test_list_verbose_aligned_wrapped_cli_values_and_rule_versions(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    run = CliRunner().invoke(main, ["list", "-v"])
    assert run.exit_code == 0, run.output
    lines = run.stdout.splitlines()
    assert max(map(len, lines)) <= 100
    assert "-O nnapi.use_fp16=false" in run.output and "=False" not in run.output and "=True" not in run.output
    options = [line for line in lines if line.startswith("    -O nnapi.")]
    starts = {re.match(r"    -O \S+\s+", line).end() for line in options if re.match(r"    -O \S+\s+\S", line)}
    assert len(starts) == 1  # the help column starts at one place
    text = " ".join(run.output.split())
    assert "rules taken from the EP of onnxruntime 1.30: an app's ORT Mobile of that release or newer" in text
    if has_backend("qnn"):
        assert "rules taken from the EP of onnxruntime-qnn 2.7 (QNN SDK 2.51)" in text
    assert "so the app needs ORT Mobile 1." in text
    assert "platform: android" in text and "platform: ios" in text
