"""bench/scale.py partitions a generated graph in a fresh process and writes its table.

Timings are never asserted: the row, its partition cells and the growth lines are.
"""

from __future__ import annotations

from test_bench_ort_session import _load


def test_scale_bench_partitions_each_size_in_a_child(tmp_path):
    bench = _load("scale")
    out = tmp_path / "scale.md"
    assert bench.main(["--sizes", "100", "200", "--kinds", "chain", "--repeats", "1", "--no-check",
                       "--out", str(out)]) == 0
    text = out.read_text()
    assert "## chain" in text and "Reproduce: `" in text
    rows = [line for line in text.splitlines() if line.startswith("| 100 |") or line.startswith("| 200 |")]
    assert len(rows) == 2
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[2].endswith("ms") and cells[-3] == "not run"  # partition core-only timed; check not asked for
    assert "- partition core-only: k = " in text
