"""Installed like any third-party plugin (`pip install ./examples`): the real `mobile-ep` command finds it."""

from __future__ import annotations

import importlib.metadata
import json
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1]


def _installed():
    try:
        dist = importlib.metadata.distribution("mobile-ep-example-npu")
    except importlib.metadata.PackageNotFoundError:
        return None
    # Build metadata left in the checkout (examples/*.egg-info) is not an installation.
    return None if pathlib.Path(str(dist.locate_file(""))).resolve() == EXAMPLES else dist


DIST = _installed()
pytestmark = pytest.mark.skipif(DIST is None, reason="mobile-ep-example-npu is not installed (pip install ./examples)")
#: The console script of this interpreter's environment (not whatever `mobile-ep` is first on PATH).
SCRIPT = pathlib.Path(sys.executable).with_name("mobile-ep")


def mobile_ep(*args):
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "mobile_ep.cli.main"]
    return subprocess.run([*command, "--strict", *args], capture_output=True, text=True, timeout=300)


def test_entry_point_is_declared():
    (ep,) = [e for e in DIST.entry_points if e.group == "mobile_ep"]
    assert (ep.name, ep.value) == ("example", "mobile_ep_example.plugin")


def test_list_shows_the_example_backend_and_its_package():
    result = mobile_ep("list", "-v")
    assert result.returncode == 0, result.stderr
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("example "))
    assert line.split() == ["example", "0.1.0", "NCHW", "5", "ops", "mobile-ep-example-npu", "0.1.0"]
    assert "-O example.allow_broadcast=true" in result.stdout


def test_ops_table_is_generated_from_the_rules():
    result = mobile_ep("ops", "--ep", "example", "--format", "md")
    assert result.returncode == 0, result.stderr
    for op in ("Add", "Conv", "MaxPool", "Mul", "Relu"):
        assert f"| {op} |" in result.stdout, result.stdout


def test_check_partitions_the_sample_model():
    result = mobile_ep("check", "--ep", "example", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)["backends"]["example"]
    assert report["partitions"] and report["supported_nodes"] > 0
    assert all(u["reason"] for u in report["unsupported"])
