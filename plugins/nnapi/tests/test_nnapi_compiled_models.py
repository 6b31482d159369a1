"""Whole models through ``mobile-ep convert --ep nnapi --compile``: the compiled model (EPContext nodes with
serialized NNAPI models) must verify against the original on this machine (onnxruntime + the NNAPI emulator).

The ``light_*`` models of the onnx wheel build their weights with ConstantOfShape, so every weight is the
same number and wrong lowerings can still produce the right (degenerate) outputs.  They are also verified
with random weights: after onnxruntime's basic optimizations (constant folding turns the weights into
initializers) each float initializer is replaced by He-scaled random values.  Every light model runs
with ``MOBILE_EP_ALL_LIGHT_MODELS=1`` (tox env ``nnapi-models``); by default the smallest one does, and the
smallest set of others covering every op of the nine runs as shipped (:data:`COVERING_LIGHT`).
"""

from __future__ import annotations

import math
import os
import pathlib

import numpy as np
import onnx
import pytest
from nnapi_compile_kit import random
from onnx import helper, numpy_helper

from mobile_ep import model_io as mir
from mobile_ep import pipeline as api
from mobile_ep.options import Options
from mobile_ep.passes import fold_constants
from mobile_ep.reports import model as reports
from mobile_ep.samples import write_sample
from mobile_ep.testing import registered, smoke_models
from mobile_ep_nnapi import NnapiBackend

ALL_LIGHT = os.environ.get("MOBILE_EP_ALL_LIGHT_MODELS", "").strip() not in ("", "0")
DEFAULT_LIGHT = {"light_squeezenet"}
#: With SqueezeNet, the smallest set of light models whose ops (as onnxruntime's basic optimizations leave
#: them, pooling with and without pads, grouped convolutions) are every op of the nine: LRN, Gemm and padded
#: AveragePool (Inception v1), BatchNormalization, Add and Mul (Inception v2), grouped Conv, Transpose and Sum
#: (ShuffleNet).  Run as shipped in the default run (~35 s here); all nine with ``MOBILE_EP_ALL_LIGHT_MODELS=1``.
COVERING_LIGHT = {"light_inception_v1", "light_inception_v2", "light_shufflenet"}


def convert(path: pathlib.Path, out: pathlib.Path, expect_partitions: bool = True, **options: str) -> reports.ConvertReport:
    backend = NnapiBackend()
    with registered(backend) as plugins:
        report = api.convert(path, "nnapi", out, plugins=plugins, compile=True, options={"nnapi": options})
    assert report.compiled is not None and (report.compiled.compiled or not expect_partitions), report.compiled
    assert not report.compiled.failures, report.compiled.failures
    names = [pathlib.Path(v.candidate).name for v in report.verification]
    assert any(n.endswith(".nnapi.compiled.onnx") for n in names), names
    assert all(v.ok for v in report.verification)  # convert raises VerificationError otherwise
    return report


def randomized(source: pathlib.Path, target: pathlib.Path, seed: int = 0) -> pathlib.Path:
    """*source* after onnxruntime's basic optimizations with every float weight replaced by He-scaled noise."""
    work = target.parent / f"{target.stem}-ort"
    work.mkdir(parents=True, exist_ok=True)
    optimized = fold_constants.ort_optimized(source, work)
    proto = onnx.load(str(optimized))
    rng = np.random.default_rng(seed)
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in proto.graph.node:
        for index, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, index))
    for tensor in proto.graph.initializer:
        array = numpy_helper.to_array(tensor)
        if array.dtype != np.float32 or array.ndim == 0:
            continue
        uses = consumers.get(tensor.name, [])
        if array.ndim == 1:
            positive = any(n.op_type == "BatchNormalization" and i in (1, 4) for n, i in uses)
            values = rng.uniform(0.5, 1.5, array.shape) if positive else rng.uniform(-0.1, 0.1, array.shape)
        else:
            fan_in = math.prod(array.shape[1:])
            for node, index in uses:
                if node.op_type in ("Gemm", "MatMul") and index == 1:
                    trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
                    fan_in = array.shape[-1] if trans_b else array.shape[-2]
            values = rng.standard_normal(array.shape) * math.sqrt(2.0 / max(fan_in, 1))
        tensor.CopyFrom(numpy_helper.from_array(values.astype(np.float32), tensor.name))
    # IR 3 lists initializers as graph inputs (constants there); from IR 4 on they need not be inputs
    initializers = {t.name for t in proto.graph.initializer}
    kept = [i for i in proto.graph.input if i.name not in initializers]
    del proto.graph.input[:]
    proto.graph.input.extend(kept)
    proto.ir_version = min(max(proto.ir_version, 8), mir.MAX_IR_VERSION)
    onnx.save(proto, str(target))
    return target


def mobilenet_v2_style(path: pathlib.Path, activation: str = "Clip", opset: int = 13) -> pathlib.Path:
    """Inverted residual blocks: 1×1 expand + activation, 3×3 depthwise (stride 1 and 2), 1×1 project,
    residual Add; global pooling and a classifier."""
    nodes, inits = [], []
    counter = [0]

    def weight(shape, scale):
        counter[0] += 1
        name = f"w{counter[0]}"
        inits.append(numpy_helper.from_array(random(shape, counter[0], -scale, scale), name))
        return name

    def conv(x, cin, cout, k, stride=1, group=1, act=True):
        counter[0] += 1
        out = f"conv{counter[0]}"
        w = weight((cout, cin // group, k, k), math.sqrt(6.0 / (cin // group * k * k)))
        b = weight((cout,), 0.1)
        nodes.append(helper.make_node("Conv", [x, w, b], [out], name=out, group=group, strides=[stride, stride],
                                      pads=[k // 2] * 4))
        if not act:
            return out
        if activation == "Clip":
            nodes.append(helper.make_node("Clip", [out, "zero", "six"], [out + "_a"], name=out + "_act"))
        else:
            nodes.append(helper.make_node(activation, [out], [out + "_a"], name=out + "_act"))
        return out + "_a"

    inits += [numpy_helper.from_array(np.float32(0), "zero"), numpy_helper.from_array(np.float32(6), "six")]
    x = conv("input", 3, 16, 3, stride=2)
    for index, (cin, cout, stride) in enumerate([(16, 16, 1), (16, 24, 2), (24, 24, 1)]):
        hidden = cin * 4
        y = conv(x, cin, hidden, 1)
        y = conv(y, hidden, hidden, 3, stride=stride, group=hidden)
        y = conv(y, hidden, cout, 1, act=False)
        if stride == 1 and cin == cout:
            nodes.append(helper.make_node("Add", [x, y], [f"res{index}"], name=f"res{index}"))
            y = f"res{index}"
        x = y
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool"], name="pool"))
    nodes.append(helper.make_node("Flatten", ["pool"], ["flat"], name="flat"))
    nodes.append(helper.make_node("Gemm", ["flat", weight((10, 24), 0.3), weight((10,), 0.1)], ["logits"],
                                  name="fc", transB=1))
    graph = helper.make_graph(nodes, "mobilenet_v2_style",
                              [helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, [1, 3, 64, 64])],
                              [helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, [1, 10])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())
    return path


def test_the_builtin_sample_compiles_and_verifies(tmp_path):
    report = convert(write_sample(tmp_path), tmp_path / "out")
    assert (tmp_path / "out" / "adapter" / "src" / "nnapi_partition.cc").exists()
    assert (tmp_path / "out" / "mobilenet_sample.nnapi.compiled" / "plan.json").exists()
    assert report.compiled.compiled_nodes == report.check.supported_nodes


@pytest.mark.parametrize("options", [
    {}, {"use_nchw": "true"}, {"api_level": "28"}, {"use_fp16": "true"},
    {"cpu_disabled": "true", "preference": "sustained_speed"},
], ids=["default", "nchw", "api28", "fp16", "npu-only"])
def test_a_mobilenet_v2_style_model_with_depthwise_convolutions(tmp_path, options):
    report = convert(mobilenet_v2_style(tmp_path / "mnv2.onnx"), tmp_path / "out", **options)
    ops = report.compiled.compiled[0].metadata["nnapi_ops"]
    assert "DEPTHWISE_CONV_2D" in ops and "CONV_2D" in ops
    assert report.compiled.compiled_nodes == report.compiled.nodes  # one partition: the whole model


def test_compile_only_ops_in_compile_mode(tmp_path):
    """Softplus: ORT's NNAPI EP leaves it on the CPU (one partition per block); with compile_ops=extended the
    compiled model is one NNAPI partition computing it with EXP, ADD and LOG."""
    path = mobilenet_v2_style(tmp_path / "softplus.onnx", activation="Softplus")
    extended = convert(path, tmp_path / "ext", compile_ops="extended")
    assert len(extended.compiled.compiled) == 1 and extended.compiled.compiled_nodes == extended.compiled.nodes
    assert {"EXP", "LOG"} <= set(extended.compiled.compiled[0].metadata["nnapi_ops"].split(","))
    plain = convert(path, tmp_path / "ort", expect_partitions=False)
    assert plain.compiled.compiled_nodes < plain.compiled.nodes


def test_a_quantized_model_compiles_and_verifies_within_one_step(tmp_path):
    """QDQ Conv with per-channel int8 weights: uint8 NNAPI tensors, per-channel filter, int32 bias; the
    compiled model may differ from onnxruntime by one quantization step (declared in the payload)."""
    from test_nnapi_compile import _qdq_conv

    proto = _qdq_conv(per_channel=True)
    proto.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4, 6, 6]))
    bias_dq = next(n for n in proto.graph.node if n.name == "dqb")
    bias_dq.input.append("bz")
    proto.graph.initializer.append(numpy_helper.from_array(np.zeros(4, np.int32), "bz"))
    path = tmp_path / "qdq.onnx"
    path.write_bytes(proto.SerializeToString())
    with registered(NnapiBackend()) as plugins:
        report = api.convert(path, "nnapi", tmp_path / "out", plugins=plugins, compile=True,
                             options=Options(cost_model=False))
    [partition] = report.compiled.compiled
    assert partition.metadata["quantized"] == "true" and float(partition.metadata["atol"]) >= 0.1
    assert "QUANTIZE" in partition.metadata["nnapi_ops"] and all(v.ok for v in report.verification)


LIGHT = [p for p in smoke_models() if ALL_LIGHT or p.stem in DEFAULT_LIGHT]
COVERING = [p for p in smoke_models() if not ALL_LIGHT and p.stem in COVERING_LIGHT]


def logits_out(source: pathlib.Path, target: pathlib.Path) -> pathlib.Path:
    """*source* with each graph output computed by a Softmax replaced by that Softmax's input (the logits).

    The weights the light models ship with are one number per tensor, so activations grow by about
    fan-in x weight per layer: SqueezeNet's logits reach ~7e9, where one float32 step is 512.  Two correct
    float32 convolutions that sum in different orders (onnxruntime's kernels, the emulator's BLAS) then give
    logits a few steps apart, and a softmax over them turns that into 0 against 0.025 for some classes.
    The logits themselves agree to float32 precision: they are what such weights can verify.
    """
    proto = onnx.load(str(source))
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(proto).graph.value_info}
    producers = {name: node for node in proto.graph.node for name in node.output}
    for index, output in enumerate(proto.graph.output):
        node = producers.get(output.name)
        if node is not None and node.op_type == "Softmax":
            proto.graph.output[index].CopyFrom(inferred[node.input[0]])
            proto.graph.node.remove(node)
    onnx.save(proto, str(target))
    return target


def _avx2() -> bool:
    try:
        return " avx2" in pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def test_equal_channels_stay_equal_whatever_blas_kernel_sums_them(tmp_path):
    """The smallest graph of SqueezeNet's failure: a 1x1 Conv of 1,000 equal channels (equal weights) and a
    Softmax over them.  onnxruntime gives 1,000 equal logits (~3e8: a float32 step is 32), so 0.001 each.
    The emulator summed in float32 by numpy's BLAS, whose order depends on the CPU's kernels: OpenBLAS's
    Haswell kernels (any AVX2 machine without AVX-512; forced here with OPENBLAS_CORETYPE) gave some channels
    a step more, and the softmax 0.04 against 0.001.  Summed in float64 and rounded once, they stay equal."""
    import subprocess
    import sys

    from onnx import TensorProto

    weights = numpy_helper.from_array(np.full((1000, 512, 1, 1), 1e6, np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                               helper.make_node("Softmax", ["c"], ["y"], axis=1, name="softmax")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 512, 13, 13])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1000, 13, 13])], [weights])
    path = tmp_path / "equal.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if _avx2():
        env["OPENBLAS_CORETYPE"] = "Haswell"
    proc = subprocess.run([sys.executable, "-m", "mobile_ep.cli", "convert", str(path), "--ep", "nnapi", "--compile",
                           "-o", str(tmp_path / "out")], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "equal.nnapi.compiled.onnx matches the original (max abs error 0.00e+00)" in proc.stdout, proc.stdout


@pytest.mark.parametrize("source", COVERING, ids=[p.stem for p in COVERING])
def test_light_models_covering_every_op_compile_and_verify_as_shipped(tmp_path, source):
    convert(logits_out(source, tmp_path / source.name), tmp_path / "as-shipped")


@pytest.mark.parametrize("source", LIGHT, ids=[p.stem for p in LIGHT])
def test_light_models_compile_and_verify(tmp_path, source):
    headless = logits_out(source, tmp_path / source.name)
    assert [n.op_type for n in onnx.load(str(headless)).graph.node if n.op_type == "Softmax"] == []
    convert(headless, tmp_path / "as-shipped")
    convert(randomized(source, tmp_path / f"{source.stem}.random.onnx"), tmp_path / "random")
