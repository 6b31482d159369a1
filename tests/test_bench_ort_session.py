"""bench/ort_session.py (onnxruntime's own session as graphs grow) runs and writes its table.

Timings are never asserted: the table's shape, its sizes and the growth column are.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench"


def _load(name: str):
    sys.path.insert(0, str(BENCH))  # (its own imports: graphs, harness, scale)
    try:
        spec = importlib.util.spec_from_file_location(f"mobile_ep_bench_{name}", BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_ort_session_bench_writes_one_row_per_size_with_growth(tmp_path, capsys):
    bench = _load("ort_session")
    out = tmp_path / "ort_session.md"
    assert bench.main(["--kinds", "chain", "--sizes", "200", "400", "--out", str(out)]) == 0
    text = out.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| 2") or line.startswith("| 4")]
    assert [row.split(" | ")[0] for row in rows] == ["| 200", "| 400"]
    assert rows[0].split(" | ")[2] == "-"  # no growth for the first size
    float(rows[1].split(" | ")[2])  # k from 200 to 400 nodes
    assert "## chain" in text and "Least-squares k" in text
