"""Whole models through ``mobile-ep convert --ep coreml --compile``: the compiled model (EPContext nodes with
zipped .mlpackages) must verify against the original on this machine (onnxruntime + the emulator of the
saved Core ML models), and every .mlpackage of the app bundle must reload with coremltools.

The ``light_*`` models of the onnx wheel build their weights with ConstantOfShape, so every weight is the
same number and a wrong lowering can still produce the right (degenerate) outputs: they are also verified
with He-scaled random weights and their logits (:func:`coreml_compile_kit.randomized`).  Every light model
runs with ``MOBILE_EP_ALL_LIGHT_MODELS=1`` (tox env ``coreml-models``; VGG-19, AlexNet and ZFNet carry
250-550 MB of weights); by default SqueezeNet does, and SqueezeNet, Inception v1 and v2 and ShuffleNet (every
op of the nine among them) compile as shipped.
"""

from __future__ import annotations

import os
import pathlib

import onnx
import pytest
from coreml_compile_kit import randomized

from mobile_ep import pipeline as api
from mobile_ep.reports import model as reports
from mobile_ep.samples import write_sample
from mobile_ep.testing import registered, smoke_models
from mobile_ep_coreml import CoreMLBackend

ALL_LIGHT = os.environ.get("MOBILE_EP_ALL_LIGHT_MODELS", "").strip() not in ("", "0")
DEFAULT_LIGHT = {"light_squeezenet"}
#: With SqueezeNet, the smallest set of light models whose ops (after onnxruntime's basic optimizations) are
#: every op of the nine (see the NNAPI tests' COVERING_LIGHT): compiled as shipped in the default run (~55 s
#: here); all nine with ``MOBILE_EP_ALL_LIGHT_MODELS=1``.
COVERING_LIGHT = {"light_squeezenet", "light_inception_v1", "light_inception_v2", "light_shufflenet"}


def convert(path: pathlib.Path, out: pathlib.Path, **options: str) -> reports.ConvertReport:
    with registered(CoreMLBackend()) as plugins:
        report = api.convert(path, "coreml", out, plugins=plugins, compile=True, options={"coreml": options})
    assert report.compiled is not None and report.compiled.compiled, report.compiled
    assert not report.compiled.failures, report.compiled.failures
    names = [pathlib.Path(v.candidate).name for v in report.verification]
    assert any(n.endswith(".coreml.compiled.onnx") for n in names), names
    assert all(v.ok for v in report.verification)  # convert raises VerificationError otherwise
    packages = sorted(pathlib.Path(report.compiled.bundle).glob("*.mlpackage"))
    assert len(packages) == len(report.compiled.compiled)
    import coremltools as ct

    for package in packages:
        spec = ct.models.MLModel(str(package), skip_model_load=True).get_spec()
        assert spec.WhichOneof("Type") == ("mlProgram" if options.get("model_format", "MLProgram") == "MLProgram"
                                           else "neuralNetwork")
    return report


@pytest.mark.parametrize("options", [
    {}, {"model_format": "NeuralNetwork"}, {"compute_precision": "float16"},
    {"model_format": "NeuralNetwork", "compute_precision": "float16"}, {"deployment_target": "iOS18"},
], ids=["mlprogram", "neuralnetwork", "mlprogram-fp16", "neuralnetwork-fp16", "ios18"])
def test_the_builtin_sample_compiles_and_verifies(tmp_path, options):
    report = convert(write_sample(tmp_path), tmp_path / "out", **options)
    out = tmp_path / "out"
    assert (out / "adapter" / "Sources" / "MobileEPCoreML" / "CoreMLPartition.swift").exists()
    assert (out / "mobilenet_sample.coreml.compiled" / "plan.json").exists()
    assert report.compiled.compiled_nodes == report.check.supported_nodes
    for partition in report.compiled.compiled:
        assert partition.metadata["compute_precision"] == options.get("compute_precision", "float32")


def test_equal_channels_stay_equal_whatever_blas_kernel_sums_them(tmp_path):
    """A 1x1 Conv of 1,000 equal channels and a Softmax over them (logits ~3e8, a float32 step is 32):
    onnxruntime gives 0.001 each.  Summed in float32 by OpenBLAS's Haswell kernels (AVX2 machines; forced
    here with OPENBLAS_CORETYPE) some channels came out a step higher and the softmax 0.03; the emulator
    sums products in float64 and rounds once."""
    import subprocess
    import sys

    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    weights = numpy_helper.from_array(np.full((1000, 512, 1, 1), 1e6, np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                               helper.make_node("Softmax", ["c"], ["y"], axis=1, name="softmax")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 512, 13, 13])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1000, 13, 13])], [weights])
    path = tmp_path / "equal.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if " avx2" in (pathlib.Path("/proc/cpuinfo").read_text() if pathlib.Path("/proc/cpuinfo").exists() else ""):
        env["OPENBLAS_CORETYPE"] = "Haswell"
    proc = subprocess.run([sys.executable, "-m", "mobile_ep.cli", "convert", str(path), "--ep", "coreml", "--compile",
                           "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "equal.coreml.compiled.onnx matches the original (max abs error 0.00e+00)" in proc.stdout, proc.stdout


def _light(names: set[str]) -> list:
    return [pytest.param(p, id=p.stem, marks=[] if ALL_LIGHT or p.stem in names else pytest.mark.skip(
        reason="set MOBILE_EP_ALL_LIGHT_MODELS=1 (tox -e coreml-models)")) for p in smoke_models()]


@pytest.mark.parametrize("path", _light(COVERING_LIGHT))
def test_light_models_compile_and_verify(path, tmp_path):
    report = convert(path, tmp_path / "out")
    assert report.compiled.compiled_nodes > 0.9 * report.compiled.nodes


@pytest.mark.parametrize("path", _light(DEFAULT_LIGHT))
def test_light_models_with_random_weights_compile_and_verify(path, tmp_path):
    source = randomized(path, tmp_path / path.name)
    report = convert(source, tmp_path / "out")
    compared = [d for v in report.verification for d in v.outputs if v.candidate.endswith(".compiled.onnx")]
    assert len(compared) == len(onnx.load(str(source), load_external_data=False).graph.output)  # logits too
    assert all(d.ok for d in compared)
