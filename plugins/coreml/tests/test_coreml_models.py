"""Whole models: ONNX's node tests (no rule may raise) and the light_* CNNs shipped in the onnx wheel."""

from __future__ import annotations

import collections
import os
import warnings

import onnx
import pytest
from coreml_testing import MLP, NN, coreml

import mobile_ep.model_io as mir
from mobile_ep.passes import fold_constants
from mobile_ep.testing import as_model, proposal, supports_all

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
FORMATS = pytest.mark.parametrize("backend", [MLP, NN], ids=["mlprogram", "neuralnetwork"])


@pytest.fixture(scope="module")
def node_test_models():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators overflow casts on purpose
        cases = collect_testcases("")
    models = []
    for case in cases:
        m = as_model(case.model)
        # ORT loads opsets up to 26; clamp newer ones so the rules past the opset check run too.
        for domain, version in list(m.opset_imports.items()):
            if domain in ("", "ai.onnx") and version > 26:
                m.opset_imports[domain] = 26
        models.append((case.name, m))
    return models


def test_no_rule_raises_on_onnx_node_tests(node_test_models):
    backends = [MLP, NN, coreml(deployment_target="iOS18", require_static_input_shapes="1")]
    claimed = collections.Counter()
    failures = []
    for name, m in node_test_models:
        for backend in backends:
            try:
                answers = supports_all(m, backend)
            except Exception as exc:  # report every failing case, not only the first
                failures.append(f"{name} [{backend.options.model_format}]: {type(exc).__name__}: {exc}")
                continue
            claimed[backend.options.model_format] += sum(bool(a) for a in answers.values())
            assert all(a or a.reason for a in answers.values())
    assert not failures, "\n".join(failures[:20])
    assert len(node_test_models) > 1500
    # sanity: rules actually claim things, and ML Program claims more than NeuralNetwork
    assert claimed["NeuralNetwork"] > 500
    assert claimed["MLProgram"] > 2 * claimed["NeuralNetwork"]


def _light(name, tmp_path_factory):
    out = tmp_path_factory.mktemp(name)
    return mir.load(fold_constants.ort_optimized(os.path.join(LIGHT, f"light_{name}.onnx"), out), check=False)


@FORMATS
def test_resnet50_splits_at_every_sum(backend, tmp_path_factory):
    m = _light("resnet50", tmp_path_factory)
    result = proposal(m, backend).per_backend["coreml"]
    assert len(result.partitions) == 17
    assert {n.op_type for n in result.rejected} == {"Sum"}
    assert len(result.rejected) == 16
    assert all("coreml has no rule for Sum" in reason for reason in result.rejected.values())
    assert result.supported_nodes == result.total_nodes - 16


# (model, ML Program partitions, NeuralNetwork partitions, op types left on the CPU)
#  - alexnet, zfnet512, inception_v1: two LRN layers, NeuralNetwork-only in ORT, split the ML Program
#    into 3 partitions; as a NeuralNetwork each model is one partition.
#  - shufflenet: 13 Sum (residual adds) split it in 14 partitions in both formats.
#  - densenet121 (Conv/BN/Relu/Concat on channels/pools), inception_v2, squeezenet, vgg19: all claimed.
LIGHT_EXPECTED = [
    ("bvlc_alexnet", 3, 1, {"LRN"}),
    ("densenet121", 1, 1, set()),
    ("inception_v1", 3, 1, {"LRN"}),
    ("inception_v2", 1, 1, set()),
    ("shufflenet", 14, 14, {"Sum"}),
    ("squeezenet", 1, 1, set()),
    ("vgg19", 1, 1, set()),
    ("zfnet512", 3, 1, {"LRN"}),
]


@pytest.mark.parametrize(("name", "mlp_parts", "nn_parts", "cpu_ops"), LIGHT_EXPECTED,
                         ids=[e[0] for e in LIGHT_EXPECTED])
def test_light_models(name, mlp_parts, nn_parts, cpu_ops, tmp_path_factory):
    m = _light(name, tmp_path_factory)
    mlp = proposal(m, MLP).per_backend["coreml"]
    nn = proposal(m, NN).per_backend["coreml"]
    assert len(mlp.partitions) == mlp_parts
    assert len(nn.partitions) == nn_parts
    assert {n.op_type for n in mlp.rejected} == cpu_ops
    assert {n.op_type for n in nn.rejected} == (cpu_ops - {"LRN"})
    if "LRN" in cpu_ops:
        assert all("needs model_format=NeuralNetwork" in r for n, r in mlp.rejected.items() if n.op_type == "LRN")
