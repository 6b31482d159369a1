"""The QNN backend against the real QNN execution provider of onnxruntime-qnn (HTP simulator), through
mobile_ep.testing's oracle: session creation only, the placement read from ORT's EPContext output.

Default run: the nine light_* models, the models built in qnn_models, the first node case of every op the
real EP builds, and 100 random graphs of the differential strategy.  ``tox -e qnn-oracle``
(``MOBILE_EP_QNN_ORACLE=all``) runs every ONNX node case and 2,000 random graphs.
"""

from __future__ import annotations

import os
import pathlib

import onnx.backend.test
import pytest
import qnn_models
from hypothesis import HealthCheck, Phase, given, settings

from mobile_ep.errors import ModelError
from mobile_ep.testing import load_case, onnx_node_cases, run_oracle

FULL = os.environ.get("MOBILE_EP_QNN_ORACLE", "") == "all"
RANDOM_GRAPHS = int(os.environ.get("MOBILE_EP_QNN_RANDOM_GRAPHS", "2000" if FULL else "100"))
LIGHT = sorted((pathlib.Path(onnx.backend.test.__file__).parent / "data" / "light").glob("light_*.onnx"))

#: Node cases where the prediction differs from the real EP, each with why.  Shape inference: the model's
#: shapes come from ONNX's shape inference, which leaves symbolic some shapes ONNX Runtime computes (from
#: Shape nodes and functions it inlines): the backend then says "dynamic shape" for nodes the EP takes.
KNOWN = {
    "test_attention_local_window": "shape inference",
    "test_attention_bidirectional_window": "shape inference",
    "test_attention_local_window_default": "shape inference",
    "test_attention_local_window_with_past": "shape inference",
    "test_attention_3d_local_window": "shape inference",
    "test_group_normalization_example": "shape inference",
    "test_group_normalization_epsilon": "shape inference",
}


def _check(result):
    assert result.built, result.diff()
    assert result.matches, result.diff()


@pytest.mark.parametrize("path", LIGHT, ids=[p.stem for p in LIGHT])
def test_light_model_as_the_real_ep(qnn_backend, qnn_ep, path):
    result = run_oracle(qnn_backend, path, qnn_ep)
    _check(result)
    assert len(result.real.partitions) == 1 and not result.real.cpu_nodes  # the whole model, one partition


@pytest.mark.parametrize("name", ["transformer_encoder", "lstm_speech", "small_cnn"])
def test_built_float_model_in_one_partition(qnn_backend, qnn_ep, name):
    result = run_oracle(qnn_backend, getattr(qnn_models, name)(), qnn_ep, case=name)
    _check(result)
    assert len(result.real.partitions) == 1 and not result.real.cpu_nodes


def test_qdq_cnn_leaves_the_boundary_qdq_on_the_cpu(qnn_backend, qnn_ep, tmp_path):
    result = run_oracle(qnn_backend, qnn_models.qdq_cnn(tmp_path), qnn_ep, case="qdq_cnn")
    _check(result)
    assert len(result.real.partitions) == 1
    cpu = sorted(result.nodes[n] for n in result.real.cpu_nodes)
    assert cpu == ["DequantizeLinear", "QuantizeLinear"]  # the input's Q and the output's DQ


def test_qdq_cnn_without_offloading_takes_the_boundary_qdq(qnn_backend, tmp_path):
    backend = qnn_backend.configure({"offload_graph_io_quantization": "false"})
    result = run_oracle(backend, qnn_models.qdq_cnn(tmp_path), backend.execution_provider(), case="qdq_cnn")
    _check(result)
    assert not result.real.cpu_nodes


def test_dynamic_shapes_take_nothing(qnn_backend, qnn_ep):
    result = run_oracle(qnn_backend, qnn_models.dynamic_cnn(), qnn_ep, case="dynamic_cnn")
    _check(result)
    assert not result.real.partitions and not result.predicted
    assert all("dynamic shape" in reason for reason in result.reasons.values())


def _node_cases():
    cases = [c for c in onnx_node_cases() if c.name not in KNOWN]
    if FULL:
        return cases
    first, seen = [], set()
    for case in cases:  # one case per op set
        if case.ops not in seen:
            seen.add(case.ops)
            first.append(case)
    return first


@pytest.mark.parametrize("case", _node_cases(), ids=lambda c: c.name)
def test_node_case_as_the_real_ep(qnn_backend, qnn_ep, case):
    try:
        model = load_case(case)
        result = run_oracle(qnn_backend, model, qnn_ep, case=case.name)
    except ModelError as exc:
        pytest.skip(f"onnxruntime's CPU EP cannot load the case: {exc}")
    if not result.built:
        pytest.skip(f"the real QNN EP does not build this case: {result.real.error[:200]}")
    assert result.matches, result.diff()


def test_random_graphs_as_the_real_ep(qnn_backend, qnn_ep):
    done = []

    @settings(max_examples=RANDOM_GRAPHS, deadline=None, derandomize=True, database=None,
              phases=[Phase.explicit, Phase.generate],  # no shrinking: each example costs a real session
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(qnn_models.differential_graphs())
    def run(example):
        model, steps = example
        result = run_oracle(qnn_backend, model, qnn_ep, case=str(steps))
        assert result.built, result.diff()
        assert result.matches, result.diff()
        done.append(1)

    run()
    assert len(done) >= RANDOM_GRAPHS // 2
