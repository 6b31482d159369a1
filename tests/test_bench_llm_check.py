"""bench/llm_check.py times ``mobile-ep check`` against onnxruntime's session, each a command in a fresh process,
and writes the table with each command's ratio to the session and the goal's line.

The 0.5B export needs torch (``tox -e llm-scale`` runs the script on it); here it is given a small model of
external weights with ``--model``.  Timings are never asserted: the rows, their ratios and the goal line are.
"""

from __future__ import annotations

import onnx
import pytest
from test_bench_ort_session import _load
from test_views_reference_weights import _folding_model

from mepkit import has_backend


@pytest.mark.skipif(not has_backend("qnn"), reason="needs the qnn backend")
def test_llm_check_bench_times_check_against_the_session(tmp_path):
    bench = _load("llm_check")
    model = tmp_path / "decoder.onnx"
    onnx.save(_folding_model(), model, save_as_external_data=True, location="weights.bin", size_threshold=1024)
    out = tmp_path / "llm_check.md"
    bench.main(["--model", str(model), "--repeats", "1", "--no-decode-shapes", "--out", str(out)])
    text = out.read_text()
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ") and "x |" in line}
    assert set(rows) == {"onnxruntime session (basic)", "onnxruntime floor (basic, writes the optimized model)",
                         "mobile-ep check --ep qnn"}
    assert rows["onnxruntime session (basic)"].rstrip().endswith("| 1.00x |")
    assert "Goal (check at most 2x the session): " in text and "Reproduce: `" in text
