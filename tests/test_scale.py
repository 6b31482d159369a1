"""Linear time, checked structurally: the number of Python function calls grows with the graph, no faster.

Speed itself is measured in ``bench/scale.py`` (1k to 1M nodes), never asserted here.  What is asserted is
deterministic: ``cProfile`` counts every Python-level call (generator steps included), so a step that
touches every node for every node (or every partition for every partition) shows as a ratio near 16 when
the graph grows 4x, where a linear pipeline stays near 4.  The graphs come from ``bench/graphs.py``.
"""

from __future__ import annotations

import cProfile
import importlib.util
import pathlib
import pstats
import sys

import pytest

import mobile_ep
from mobile_ep import model_io as mir
from mobile_ep import pipeline as api
from mobile_ep.contract import RuleContext
from mobile_ep.contract.plugins import make_plugins
from mobile_ep.partitioning.cost import select_partitions
from mobile_ep.partitioning.propose import propose
from mobile_ep.passes.partition import analyze

#: Margin over the ideal ratio 4 for 4x the nodes (measured: 3.99-4.01; a per-group walk over the whole graph
#: gives 12.7 on the chain, a per-node one ~16).
MAX_RATIO = 4.6


def _load_graphs():
    name = "mobile_ep_bench_graphs"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, pathlib.Path(__file__).parents[1] / "bench" / "graphs.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


graphs = _load_graphs()


class _TakesAllButSign(mobile_ep.Backend):
    name = "all-but-sign"
    version = "1"

    def build_rules(self):
        class Any(mobile_ep.OpRule):
            op_types = ("Conv", "Relu", "Add", "Mul", "Sigmoid", "MaxPool", "Concat", "MatMul", "Transpose",
                        "Softmax", "ReduceMean", "Sub", "Pow", "Sqrt", "Div", "Erf")

        return mobile_ep.RuleRegistry([Any()])


def calls(fn) -> int:
    """Python-level function calls made by ``fn()``."""
    profile = cProfile.Profile()
    profile.enable()
    try:
        fn()
    finally:
        profile.disable()
    return sum(entry[1] for entry in pstats.Stats(profile).stats.values())


def _backends() -> list[mobile_ep.Backend]:
    plugins = make_plugins()
    return [_TakesAllButSign()] + [plugins.backend(name) for name in sorted(plugins.backends())]


def _partition(model, backend) -> None:
    proposal = propose(model, [backend])
    bp = proposal.per_backend[backend.name]
    select_partitions(bp.partitions, RuleContext(model, backend), backend.cost_params())


@pytest.mark.parametrize("kind", sorted(graphs.KINDS))
def test_partitioning_makes_a_linear_number_of_calls(kind):
    small, large = graphs.make(kind, 1000), graphs.make(kind, 4000)
    growth = len(large.graph) / len(small.graph)
    for backend in _backends():
        ratio = calls(lambda b=backend: _partition(large, b)) / calls(lambda b=backend: _partition(small, b))
        assert ratio < MAX_RATIO * growth / 4, f"{kind}, {backend.name}: {ratio:.2f}x calls for {growth:.2f}x nodes"


def test_qdq_units_make_a_linear_number_of_calls():
    """QDQ node units (DequantizeLinear -> op -> QuantizeLinear, taken whole by NNAPI) on a quantized chain."""
    small, large = graphs.qdq_chain(700), graphs.qdq_chain(2800)
    backends = [b for b in _backends() if b.qdq_ops()]
    if not backends:
        pytest.skip("no installed backend takes QDQ units")
    for backend in backends:
        assert any(len(p.nodes) > 1 for p in propose(small, [backend]).per_backend[backend.name].partitions)
        ratio = calls(lambda b=backend: _partition(large, b)) / calls(lambda b=backend: _partition(small, b))
        assert ratio < MAX_RATIO, f"{backend.name}: {ratio:.2f}x calls for 4x nodes"


def test_several_backends_together_make_a_linear_number_of_calls():
    small, large = graphs.make("branches", 1000), graphs.make("branches", 4000)
    backends = _backends()
    ratio = calls(lambda: analyze(large, backends)) / calls(lambda: analyze(small, backends))
    assert ratio < MAX_RATIO, f"{ratio:.2f}x calls for 4x nodes"


def test_check_makes_a_linear_number_of_calls(tmp_path):
    """The whole pipeline: inspection, validation, loading (shape inference), analysis, the after-convert
    view (legalization), the report.  onnxruntime's and onnx's own C++ work is not counted."""
    from mobile_ep.reports import text as report

    paths = []
    for nodes in (400, 1600):
        paths.append(graphs.save(graphs.make("transformer", nodes), tmp_path / f"t{nodes}.onnx"))
    counts = [calls(lambda p=p: report.check_text(api.check(p))) for p in paths]
    ratio = counts[1] / counts[0]
    assert ratio < MAX_RATIO, f"{ratio:.2f}x calls for 4x nodes"


def test_load_and_save_make_a_linear_number_of_calls(tmp_path):
    counts = []
    for nodes in (800, 3200):
        path = graphs.save(graphs.make("chain", nodes), tmp_path / f"c{nodes}.onnx")
        counts.append(calls(lambda p=path, n=nodes: mir.save(mir.load(p), tmp_path / f"saved{n}.onnx")))
    assert counts[1] / counts[0] < MAX_RATIO
