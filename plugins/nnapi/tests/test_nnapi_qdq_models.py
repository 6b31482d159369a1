"""Quantized image classifiers end to end on NNAPI: convert (ORT's EP, with convert's QDQ rewrites), convert
--compile of the same graph, and convert --compile with compile_ops=extended (mobile-ep's own lowering of the
QDQ pools), each one partition verified within one quantization step of onnxruntime's CPU result.

The models are :mod:`quant_models`' float mobilenet_v2, mobilenet_v3_large, resnet18 and efficientnet_b0
equivalents at random weights, made QDQ by onnxruntime.quantization.quantize_static directly and by
``mobile-ep quantize``.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest
from nnapi_compile_kit import compile_whole, emulate, ort_run
from nnapi_models import at_api, backend, qdq_unary, support

import mobile_ep
from mobile_ep.quantize import quantize

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "tests"))
import quant_models  # noqa: E402

ARCHITECTURES = tuple(quant_models.ARCHITECTURES)
EXTENDED = mobile_ep.Options.build("nnapi", options=["nnapi.compile_ops=extended"])


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qdq_models")
    made = {}
    for name in ARCHITECTURES:
        made[name, "quantize_static"] = quant_models.write(name, folder)
        made[name, "mobile-ep quantize"] = quantize(folder / f"{name}.onnx", "nnapi", folder / f"{name}.mep.onnx",
                                                    random=4, check=False).output
    return made


def _within_one_step(result) -> None:
    assert result.verification and all(v.ok for v in result.verification)
    assert max(o.max_steps for v in result.verification for o in v.outputs) <= 1


@pytest.mark.parametrize("how", ["quantize_static", "mobile-ep quantize"])
@pytest.mark.parametrize("name", ARCHITECTURES)
def test_compiled_one_partition_verified_within_one_step(models, name, how, tmp_path):
    result = mobile_ep.convert(models[name, how], "nnapi", tmp_path, compile=True, options=EXTENDED)
    report = result.check
    assert len(report.partitions) == 1 and report.supported_nodes >= 0.98 * report.nodes
    assert len(result.compiled.compiled) == 1 and not result.compiled.failures
    _within_one_step(result)


@pytest.mark.parametrize("compile", [False, True], ids=["ort-ep", "compile"])
@pytest.mark.parametrize("how", ["quantize_static", "mobile-ep quantize"])
@pytest.mark.parametrize("name", ARCHITECTURES)
def test_ort_ep_path_one_partition_verified_within_one_step(models, name, how, compile, tmp_path):
    # convert's QDQ rewrites (qdq-gap-to-qlinearconv, qdq-maxpool-to-uint8, ...) leave ORT's EP nothing to refuse:
    # the written file, partitioned as onnxruntime loads it, is one partition; --compile lowers the same graph
    result = mobile_ep.convert(models[name, how], "nnapi", tmp_path, compile=compile)
    report = result.check
    assert len(report.partitions) == 1 and report.supported_nodes >= 0.98 * report.nodes
    assert not compile or (len(result.compiled.compiled) == 1 and not result.compiled.failures)
    _within_one_step(result)


# -- the QDQ pools only mobile-ep's lowering takes (compile_ops=extended) -----------------------------------
def test_qdq_global_average_pool_only_with_extended_compile_ops():
    m = qdq_unary("GlobalAveragePool", out_scale=0.01, out_zp=100)
    assert not support(m, "target")  # ORT's EP refuses the unit
    assert support(m, "target", be=backend(compile_ops="extended"))
    assert support(m, "target", be=at_api(28, compile_ops="extended")).reason.startswith(
        "a QDQ GlobalAveragePool (QUANTIZE) needs NNAPI feature level 3")
    feeds = {"x": np.random.default_rng(0).integers(0, 256, (1, 3, 8, 8)).astype(np.uint8)}
    be = backend(compile_ops="extended")
    got = emulate(compile_whole(m, be), feeds, be)["y"].astype(np.int32)
    assert np.abs(got - ort_run(m, feeds)["y"].astype(np.int32)).max() <= 1


def test_qdq_max_pool_only_with_extended_compile_ops():
    m = qdq_unary("MaxPool", kernel_shape=[2, 2], strides=[2, 2])
    assert not support(m, "target")
    be = backend(compile_ops="extended")
    assert support(m, "target", be=be)
    feeds = {"x": np.random.default_rng(1).integers(0, 256, (1, 3, 8, 8)).astype(np.uint8)}
    np.testing.assert_array_equal(emulate(compile_whole(m, be), feeds, be)["y"], ort_run(m, feeds)["y"])
