"""QDQ GoogLeNet (``quantize_static``, uint8 activations, int8 per-channel weights) on NNAPI: one partition, the
compiled model (the NNAPI emulator) equal to onnxruntime's CPU EP.

- A zero bias shared by several QDQ convolutions (torchvision's GoogLeNet at random weights, BatchNorm folded):
  ``quantize_static`` quantizes it once, with one convolution's scale; zero at any scale, NNAPI takes every
  Conv unit.
- MaxPools fed by a QDQ Concat unit, and by another MaxPool, after ``pool-ceil-to-pads``: NNAPI takes them.
"""

from __future__ import annotations

import json

import onnx
import pytest
import quant_models

import mobile_ep
from mepkit import has_backend


@pytest.mark.skipif(not has_backend("nnapi"), reason="the NNAPI plugin is not installed")
def test_shared_zero_bias_does_not_keep_conv_units_on_the_cpu(tmp_path):
    source = tmp_path / "googlenet.onnx"
    onnx.save(quant_models.googlenet(0), source)
    qdq = quant_models.quantize(source, tmp_path / "googlenet_qdq.onnx", per_channel=True)
    assert sum(n.op_type == "Identity" for n in onnx.load(source).graph.node) >= 4  # (the shared biases)
    out = tmp_path / "nnapi"
    mobile_ep.convert(qdq, "nnapi", out, compile=True, cost_model=False)
    report = json.loads((out / "report.json").read_text())
    unsupported = report["partitioning"]["unsupported"]
    assert not [u for u in unsupported if "bias" in json.dumps(u)], unsupported
    conv_units = [u for u in unsupported if "Conv" in json.dumps(u)]
    assert conv_units == [], conv_units


@pytest.mark.skipif(not has_backend("nnapi"), reason="the NNAPI plugin is not installed")
def test_qdq_googlenet_lands_in_one_partition_whatever_feeds_its_pools(tmp_path):
    source = tmp_path / "googlenet.onnx"
    onnx.save(quant_models.googlenet(0), source)
    qdq = quant_models.quantize(source, tmp_path / "googlenet_qdq.onnx", per_channel=True)
    out = tmp_path / "nnapi"
    mobile_ep.convert(qdq, "nnapi", out, compile=True, cost_model=False)
    report = json.loads((out / "report.json").read_text())
    partitioning = report["partitioning"]
    assert len(partitioning["partitions"]) == 1, partitioning["unsupported"]
    assert partitioning["supported_nodes"] >= 0.98 * partitioning["nodes"], partitioning["unsupported"]
    assert "qdq-maxpool-via-float" in json.dumps(partitioning["rewrites"])
    assert report["compiled"]["compiled_nodes"] == partitioning["supported_nodes"]
    assert [v["ok"] for v in report["verification"]] == [True, True, True], report["verification"]
    # (exact: the pools take the same integers; Max(x, x) is x)
    assert [o["max_step_error"] for v in report["verification"] for o in v["outputs"]] == [0.0, 0.0, 0.0]
    assert report["compiled"]["compiled_nodes"] == report["partitioning"]["supported_nodes"]
    assert [v["ok"] for v in report["verification"]] == [True, True, True], report["verification"]
    # (exact: the pools take the same integers; Max(x, x) is x)
    assert [o["max_step_error"] for v in report["verification"] for o in v["outputs"]] == [0.0, 0.0, 0.0]
