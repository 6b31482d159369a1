"""Whole models: ONNX's node test cases (no rule may raise) and the light_* CNNs shipped in the onnx wheel."""

from __future__ import annotations

import collections
import pathlib
import warnings

import onnx
import pytest

import mobile_ep.model_io as mir
from mobile_ep import Support
from mobile_ep.passes import fold_constants
from mobile_ep.testing import proposal, supports_all
from mobile_ep_nnapi import NnapiBackend

LIGHT_DIR = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT_MODELS = sorted(p.stem for p in LIGHT_DIR.glob("light_*.onnx"))


@pytest.fixture(scope="module")
def node_test_models():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reference implementations overflow on purpose
        cases = collect_testcases("")
    # single-node cases carry their I/O shapes; infer shapes only where there are intermediate values
    return [(case.name, mir.from_proto(case.model, shapes=len(case.model.graph.node) > 1)) for case in cases]


def test_no_rule_raises_on_any_onnx_node_test(node_test_models):
    assert len(node_test_models) > 1000
    backends = [NnapiBackend(), NnapiBackend().configure({"api_level": "27", "use_nchw": "1"})]
    failures = []
    claimed = set()
    conv_reason = None
    for name, m in node_test_models:
        for backend in backends:
            try:
                answers = supports_all(m, backend)
            except Exception as exc:  # noqa: BLE001 - the point is to catch any rule crashing
                failures.append(f"{name} ({backend.options.api_level}): {type(exc).__name__}: {exc}")
                continue
            for answer in answers.values():
                assert isinstance(answer, Support) and (answer or answer.reason)
            if backend.options.api_level == 31 and answers and all(answers.values()):
                claimed.add(name)
            if name == "test_conv_with_strides_padding" and backend.options.api_level == 31:
                conv_reason = answers["node"].reason
    assert not failures, "\n".join(failures[:20])
    # a sample of cases ORT's NNAPI EP takes
    assert {"test_relu", "test_add", "test_sigmoid", "test_maxpool_2d_default", "test_softmax_axis_1",
            "test_transpose_default", "test_averagepool_2d_default"} <= claimed
    # and some it never takes: unknown ops, and weights fed as graph inputs
    assert not {"test_sum_example", "test_hardswish", "test_nonzero_example", "test_gemm_default_no_bias"} & claimed
    assert conv_reason == "weight (input 1) is not a constant initializer"


@pytest.fixture(scope="module")
def optimized_light_models(tmp_path_factory):
    """The light_* models as an ORT session sees them (basic optimizations fold the ConstantOfShape weights)."""
    result = {}
    for stem in LIGHT_MODELS:
        out = tmp_path_factory.mktemp(stem)
        result[stem] = mir.load(fold_constants.ort_optimized(LIGHT_DIR / f"{stem}.onnx", out), check=False)
    return result


def test_light_resnet50_splits_at_every_sum(optimized_light_models):
    result = proposal(optimized_light_models["light_resnet50"], NnapiBackend())
    nnapi = result.per_backend["nnapi"]
    assert len(nnapi.partitions) == 17
    rejected = collections.Counter((node.op_type, reason) for node, reason in nnapi.rejected.items())
    assert rejected == {("Sum", "nnapi has no rule for Sum"): 16}
    assert nnapi.verdict == "NO"


@pytest.mark.parametrize("stem", [s for s in LIGHT_MODELS if s != "light_resnet50"])
def test_other_light_models(optimized_light_models, stem):
    nnapi = proposal(optimized_light_models[stem], NnapiBackend()).per_backend["nnapi"]
    assert nnapi.partitions and all(nnapi.rejected.values())
    if stem == "light_shufflenet":
        # channel shuffles reshape to rank 5, beyond NNAPI's rank 4; residual Sums stay on the CPU too
        assert {node.op_type for node in nnapi.rejected} == {"Sum", "Reshape", "Transpose"}
        assert all("rank 5" in reason for node, reason in nnapi.rejected.items() if node.op_type != "Sum")
    else:
        assert len(nnapi.partitions) == 1 and not nnapi.rejected, nnapi.rejected
