"""Small command-line contracts: ``--ep ""`` is an error, ``convert`` takes one backend, ``check MODEL -v``."""

from __future__ import annotations

import onnx
import pytest
from onnx import helper

from mepkit import make_model, tensor
from mobile_ep import errors


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(make_model([helper.make_node("Erf", ["x"], ["y"])], [tensor("x", [1, 4])], [tensor("y", [1, 4])]), path)
    return path


@pytest.mark.parametrize("command", ["check", "convert", "explain"])
@pytest.mark.parametrize("ep", ["", " ", ","])
def test_an_empty_ep_is_a_usage_error(model, plugins, tmp_path, command, ep, mobile_ep_cli):
    args = {"check": ["check", str(model)], "convert": ["convert", str(model), "-o", str(tmp_path / "out")],
            "explain": ["explain", str(model), "node"]}[command]
    result = mobile_ep_cli(*args, "--ep", ep, plugins=plugins)
    assert result.exit_code == errors.EXIT_USAGE, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "names no backend" in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_convert_takes_one_backend(model, plugins, tmp_path, mobile_ep_cli):
    result = mobile_ep_cli("convert", str(model), "--ep", "toy,other", "-o", str(tmp_path / "out"),
                           plugins=plugins)
    assert result.exit_code == errors.EXIT_USAGE
    assert result.stderr.strip() == ("mobile-ep: error: convert takes one backend, got 2 ('toy,other'); run convert "
                                     "once per backend (check compares several)")


def test_check_model_dash_v_works_after_the_command(model, plugins, mobile_ep_cli):
    plain = mobile_ep_cli("check", str(model), "--ep", "toy", plugins=plugins)
    verbose = mobile_ep_cli("check", str(model), "-v", "--ep", "toy", plugins=plugins)
    assert plain.exit_code == verbose.exit_code == 0, verbose.output
    assert verbose.stdout == mobile_ep_cli("-v", "check", str(model), "--ep", "toy", plugins=plugins).stdout
    assert len(verbose.stdout) > len(plain.stdout)
