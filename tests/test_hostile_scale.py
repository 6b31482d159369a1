"""Hostile input ends quickly with one line: nodes of 100,000 inputs, names holding terminal control sequences.

The time limits are generous bounds (seconds where a pass quadratic in a node's inputs takes many minutes),
not benchmarks; ``bench/hostile.py`` measures against onnxruntime's own session.
"""

from __future__ import annotations

import os
import subprocess
import sys

import onnx
import pytest
from click.testing import CliRunner
from onnx import helper

from mepkit import make_model, tensor
from mobile_ep.cli.main import main

WIDE = 100_000


def cli(*args, timeout):
    return subprocess.run([sys.executable, "-m", "mobile_ep.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONWARNINGS": "ignore"})


def test_a_sum_of_100k_inputs_is_checked_in_seconds(tmp_path):
    path = tmp_path / "sum.onnx"
    onnx.save(make_model([helper.make_node("Sum", ["x"] * WIDE, ["y"])], [tensor("x", [1, 4])], [tensor("y", [1, 4])]),
              path)
    assert path.stat().st_size < 400_000
    proc = cli("-q", "check", str(path), "--ep", "nnapi", timeout=120)  # (a quadratic splice: many minutes)
    assert proc.returncode == 0, proc.stderr


def test_a_concat_of_30k_distinct_inputs_is_converted_in_seconds(tmp_path):
    n = 30_000
    nodes = [helper.make_node("Relu" if i % 2 else "Sigmoid", ["x"], [f"r{i}"]) for i in range(n)]
    nodes.append(helper.make_node("Concat", [f"r{i}" for i in range(n)], ["y"], axis=1))
    path = tmp_path / "concat.onnx"
    onnx.save(make_model(nodes, [tensor("x", [1, 1])], [tensor("y", [1, n])]), path)
    proc = cli("-q", "convert", str(path), "--ep", "nnapi", "-o", str(tmp_path / "out"), timeout=180)
    assert proc.returncode == 0, proc.stderr


# -- terminal control sequences ---------------------------------------------------------------------
HOSTILE = "x\x1b]0;pwned\x07\r\u202eevil\x9b2J"
RAW = ("\x1b", "\x07", "\r", "\u202e", "\x9b")


def assert_escaped(text):
    for char in RAW:
        assert char not in text, repr(text)


@pytest.fixture
def hostile_model(tmp_path):
    path = tmp_path / "esc.onnx"
    node = helper.make_node("Erf", [HOSTILE], ["y"], name=HOSTILE + "node")
    onnx.save(make_model([node], [tensor(HOSTILE, [2])], [tensor("y", [2])]), path)
    return path


def test_check_explain_and_errors_escape_control_characters(hostile_model, plugins, tmp_path):
    runner = CliRunner()
    for args in (["-v", "check", str(hostile_model), "--ep", "toy"],
                 ["explain", str(hostile_model), HOSTILE + "node", "--ep", "toy"],
                 ["explain", str(hostile_model), HOSTILE + "nope", "--ep", "toy"],
                 ["check", str(tmp_path / f"{HOSTILE}.onnx"), "--ep", "toy"]):
        result = runner.invoke(main, args, obj=plugins, catch_exceptions=False)
        assert "\\x1b]0;pwned\\x07" in result.stdout + result.stderr, (args, result.output)  # (\\r: folded in errors)
        assert_escaped(result.stdout)
        assert_escaped(result.stderr)


def test_log_lines_are_escaped(tmp_path):
    # a warning naming the model: onnx's checker refuses a missing shape field, onnxruntime loads it
    path = tmp_path / f"{HOSTILE}.onnx"
    untyped = helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, None)
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"])], [helper.make_value_info("x", untyped)],
                         [helper.make_value_info("y", untyped)]), path)
    proc = cli("check", str(path), "--ep", "nnapi", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "checker refuses" in proc.stderr
    assert_escaped(proc.stderr)
    assert_escaped(proc.stdout)
