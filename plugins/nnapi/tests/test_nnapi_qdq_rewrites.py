"""convert's rewrites of QDQ units ORT's NNAPI EP refuses (mobile_ep_nnapi.qdq_rewrites): applied in QDQ units
only, claimed after convert as the written file is partitioned again, and verified within one output step."""

from __future__ import annotations

import onnx
from nnapi_models import model, node, qdq_unary

import mobile_ep


def _convert(m, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    return mobile_ep.check(path, "nnapi"), mobile_ep.convert(path, "nnapi", tmp_path / "out")


def _steps(result) -> float:
    return max(o.max_steps for v in result.verification for o in v.outputs)


def test_qdq_flatten_becomes_a_qdq_reshape(tmp_path):
    checked, converted = _convert(qdq_unary("Flatten", axis=1), tmp_path)
    assert checked.backends["nnapi"].supported_nodes == 0  # a QDQ Flatten unit: refused whole
    after = converted.check
    assert [r["rewrite"] for r in after.rewrites] == ["qdq-flatten-to-reshape"]
    assert after.supported_nodes == after.nodes == 3 and len(after.partitions) == 1
    assert _steps(converted) == 0


def test_qdq_sigmoid_becomes_float_tanh_between_dequantize_and_quantize(tmp_path):
    m = qdq_unary("Sigmoid", out_scale=1 / 255, out_zp=0)
    checked, converted = _convert(m, tmp_path)
    assert checked.backends["nnapi"].supported_nodes == 0
    after = converted.check
    assert [r["rewrite"] for r in after.rewrites] == ["qdq-sigmoid-to-tanh"]
    assert after.supported_nodes == after.nodes and len(after.partitions) == 1
    assert all(v.ok for v in converted.verification) and _steps(converted) <= 1


def test_a_float_sigmoid_is_left_alone(tmp_path):
    checked, converted = _convert(model(node("Sigmoid", ["x"]), {"x": [1, 3, 8, 8]}), tmp_path)
    assert converted.check.rewrites == [] and converted.check.supported_nodes == 1
