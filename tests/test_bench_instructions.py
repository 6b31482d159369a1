"""bench/instructions.py (instructions per node of partitioning, counted by callgrind) runs and writes its table.

The counts are never compared with a number: the table's shape is checked, and that a count was made.
"""

from __future__ import annotations

import shutil

import pytest
from test_bench_ort_session import _load


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_instructions_bench_counts_one_partition_step(tmp_path, capsys):
    bench = _load("instructions")
    out = tmp_path / "instructions.md"
    assert bench.main(["--nodes", "200", "--kinds", "chain", "--backends", "nnapi", "--steps", "partition",
                       "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert "| family | backend | partition |" in lines
    row = next(line for line in lines if line.startswith("| chain | nnapi |"))
    per_node = int(row.split("|")[3].strip().replace(",", ""))
    assert per_node > 1_000  # (a proposal costs tens of thousands of instructions per node: a count was made)


def test_instructions_table_marks_steps_not_counted():
    bench = _load("instructions")
    text = bench.render([{"kind": "chain", "backend": "core-only", "nodes": 100, "partition": 5_000_000,
                          "signatures": None}], 100, ["partition", "signatures"])
    assert "| chain | core-only | 50,000 | - |" in text.splitlines()
