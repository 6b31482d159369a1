"""bench/vs_ort.py runs both checkers on a model and writes its table, the Python pace column included.

Timings are never asserted: the rows, their columns and the ratios computed from them are.
"""

from __future__ import annotations

import pathlib

import onnx
from onnx import helper
from test_bench_ort_session import _load

from mepkit import make_model, tensor


def _tiny_model(path: pathlib.Path) -> pathlib.Path:
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                          helper.make_node("Sigmoid", ["r"], ["y"], name="sigmoid")],
                         [tensor("x", [1, 3, 8, 8])], [tensor("y", [1, 3, 8, 8])]), path)
    return path


def test_python_pace_does_the_same_work_every_time():
    # Paces of two runs compare only if the work is the same: a change to it must change this number too.
    harness = _load("harness")
    assert harness.python_pace() == harness.python_pace() == 12787224


def test_check_rows_carry_the_pace_they_were_measured_at(tmp_path):
    bench = _load("vs_ort")
    model = _tiny_model(tmp_path / "tiny.onnx")
    row = bench.bench_model(model, 2, False, tmp_path, bench.make_plugins())
    assert row["model"] == "tiny"
    assert row["pace"] > 0 and row["check_ours"] > 0 and row["check_ort"] > 0 and row["session"] > 0
    assert row["check_speedup"] == row["check_ort"] / row["check_ours"]
    text = bench.render([row], 2, "test machine")
    header = next(line for line in text.splitlines() if line.startswith("| model | mobile-ep | ORT checker"))
    assert header.rstrip(" |").endswith("Python pace")
    line = next(line for line in text.splitlines() if line.startswith("| tiny | ") and "x |" in line)
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert len(cells) == 7 and cells[-1] == f"{row['pace'] * 1e3:.1f} ms"
    assert "convert:" not in text  # (not asked for)
