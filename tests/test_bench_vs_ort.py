"""bench/vs_ort.py and bench/startup.py time commands in fresh processes and write tables of ratios.

Timings are never asserted: the rows, their columns and the ratios computed from the medians are.
"""

from __future__ import annotations

import pathlib
import sys

import onnx
import pytest
from onnx import helper
from test_bench_ort_session import _load

from mepkit import make_model, tensor


def _tiny_model(path: pathlib.Path) -> pathlib.Path:
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                          helper.make_node("Sigmoid", ["r"], ["y"], name="sigmoid")],
                         [tensor("x", [1, 3, 8, 8])], [tensor("y", [1, 3, 8, 8])]), path)
    return path


def _row(text: str, first_cell: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"| {first_cell} |"))
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_alternate_takes_turns_starting_one_further_each_round(tmp_path):
    harness = _load("harness")
    log = tmp_path / "order"
    commands = {name: [sys.executable, "-c", f"open({str(log)!r}, 'a').write({name!r})"] for name in "AB"}
    times = harness.alternate(commands, repeats=2, warmup=1)
    assert log.read_text() == "ABBAAB"  # (the warm-up round, then two timed rounds)
    assert [len(runs) for runs in times.values()] == [2, 2] and all(t > 0 for runs in times.values() for t in runs)


def test_alternate_stops_on_a_failing_command():
    harness = _load("harness")
    with pytest.raises(RuntimeError, match="boom"):
        harness.alternate({"bad": [sys.executable, "-c", "raise SystemExit('boom')"]}, repeats=1, warmup=0)


def test_vs_ort_times_check_and_convert_as_commands(tmp_path):
    bench = _load("vs_ort")
    model = _tiny_model(tmp_path / "tiny.onnx")
    out = tmp_path / "vs_ort.md"
    assert bench.main(["--models", str(model), "--repeats", "1", "--warmup", "0", "--out", str(out)]) == 0
    text = out.read_text()
    assert "Reproduce: `" in text and "bench/vs_ort.py --models" in text and "Machine: " in text
    check, convert = text.split("## convert")
    cells = _row(check, "tiny")
    assert len(cells) == 6 and cells[3].endswith("x") and cells[5].endswith("x")
    float(cells[3][:-1]), float(cells[5][:-1])
    assert "**Median speedup: --ep nnapi " in check
    cells = _row(convert, "tiny")
    assert len(cells) == 6
    float(cells[3]), float(cells[5])
    assert "Median ratio: --no-verify " in convert
    assert "## Against the baseline" not in text  # (only with --baseline-python)


def test_vs_ort_ratios_are_ratios_of_the_medians():
    bench = _load("vs_ort")
    row = {"model": "m", "check_ours_nnapi": 0.5, "check_ours_all": 0.8, "check_ort": 1.0, "check_base_nnapi": 0.4,
           "convert_ours": 1.1, "convert_ours_verify": 2.0, "convert_ort": 1.0, "convert_base": 1.0,
           "convert_base_verify": 2.5}
    text = bench.render([row], 5, 1, "test machine", "python bench/vs_ort.py", "nnapi, coreml",
                        baseline="/base/python", baseline_label="abc1234")
    assert _row(text.split("## convert")[0], "m") == ["m", "1.00 s", "500 ms", "2.00x", "800 ms", "1.25x"]
    assert "--ep nnapi 2.00x (met), every backend 1.25x (NOT met)" in text
    assert "Code: this tree; baseline: abc1234." in text
    assert _row(text.split("## Against the baseline")[1], "m") == ["m", "1.25", "1.10", "0.80"]
    assert "convert --no-verify 1.10 (met), verified 0.80 (met)" in text


def test_startup_compares_help_and_version_with_importing_onnxruntime(tmp_path):
    bench = _load("startup")
    out = tmp_path / "startup.md"
    assert bench.main(["--repeats", "1", "--warmup", "0", "--out", str(out)]) == 0
    text = out.read_text()
    assert _row(text, '`python -c "import onnxruntime"`')[2] == "1.00"
    for command in ("`mobile-ep --help`", "`mobile-ep --version`", "`python -c pass`"):
        float(_row(text, command)[2])
    assert "**--help " in text and "of `import onnxruntime`** (target: at most 0.6: " in text
