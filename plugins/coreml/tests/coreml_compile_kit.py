"""Helpers for the Core ML compile tests: compile a whole ONNX model as one partition, reload the saved
``.mlpackage`` with coremltools, emulate the payload from its bytes and compare with onnxruntime.

A plain module (not conftest.py) with a unique name, so the suites of several plugins can run together.
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from mobile_ep import CompiledPartition, RuleContext
from mobile_ep.contract.compile import partition_view
from mobile_ep.partitioning.units import build_node_units
from mobile_ep.passes import fold_constants
from mobile_ep.testing import as_model
from mobile_ep_coreml import CoreMLBackend
from mobile_ep_coreml.emulator import load_package
from mobile_ep_coreml.package import write_package

_NUMPY = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.FLOAT16: np.float16, onnx.TensorProto.INT64: np.int64,
          onnx.TensorProto.INT32: np.int32, onnx.TensorProto.BOOL: np.bool_}


def compile_whole(proto: onnx.ModelProto, backend: CoreMLBackend) -> tuple[CompiledPartition, Any]:
    """The model's nodes as one partition, claimed (asserted) and compiled; returns (payload, IR model)."""
    model = as_model(proto)
    ctx = RuleContext(model, backend)
    ctx.units = build_node_units(model.graph, backend.qdq_ops())
    for node in model.graph:
        answer = ctx.claims_unit(ctx.unit_of(node))
        assert answer, f"{node.op_type}: not claimed ({backend.options.model_format}): {answer.reason}"
    payload = backend.compile(partition_view(ctx, list(model.graph)), ctx)
    return payload.validate(), model


def feeds_for(proto: onnx.ModelProto, seed: int = 0,
              ranges: Mapping[str, tuple[float, float]] | None = None) -> dict[str, np.ndarray]:
    """Random values for every graph input that is not an initializer."""
    rng = np.random.default_rng(seed)
    initializers = {t.name for t in proto.graph.initializer}
    feeds = {}
    for value in proto.graph.input:
        if value.name in initializers:
            continue
        tensor_type = value.type.tensor_type
        dtype = _NUMPY[tensor_type.elem_type]
        shape = [d.dim_value if d.dim_value > 0 else 2 for d in tensor_type.shape.dim]
        low, high = (ranges or {}).get(value.name, (-1.0, 1.0))
        if dtype is np.bool_:
            feeds[value.name] = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif np.issubdtype(dtype, np.integer):
            feeds[value.name] = rng.integers(int(low * 5), int(high * 5) + 1, size=shape).astype(dtype)
        else:
            feeds[value.name] = rng.uniform(low, high, size=shape).astype(dtype)
    return feeds


def onnxruntime_outputs(proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(feeds)), strict=True))


def reload_package(payload: CompiledPartition, folder: pathlib.Path) -> pathlib.Path:
    """Write the payload's .mlpackage to *folder*; coremltools must reload it (without Core ML itself)."""
    import coremltools as ct

    path = write_package(payload.data, folder / "partition.mlpackage")
    model = ct.models.MLModel(str(path), skip_model_load=True)
    assert model.get_spec().description.input, "the reloaded package has no inputs"
    return path


def check_against_onnxruntime(proto: onnx.ModelProto, backend: CoreMLBackend, folder: pathlib.Path, *,
                              rtol: float = 1e-4, atol: float = 1e-5, seed: int = 0,
                              ranges: Mapping[str, tuple[float, float]] | None = None) -> CompiledPartition:
    """Compile, reload with coremltools, emulate the payload (from its serialized bytes and from the package
    on disk) and compare every output with onnxruntime's."""
    payload, _ = compile_whole(proto, backend)
    path = reload_package(payload, folder)
    feeds = feeds_for(proto, seed, ranges)
    expected = onnxruntime_outputs(proto, feeds)
    restored = CompiledPartition.from_bytes(payload.to_bytes())
    got = backend.emulate(restored, {s.name: feeds[s.name] for s in restored.inputs})
    from_disk = load_package(path).run({s.name: feeds[s.name] for s in restored.inputs})
    for name, want in expected.items():
        for label, outputs in (("payload", got), ("package on disk", from_disk)):
            assert name in outputs, f"{label}: no output {name!r}"
            value = outputs[name]
            assert value.dtype == want.dtype, f"{label} {name}: dtype {value.dtype}, onnxruntime {want.dtype}"
            assert value.shape == want.shape, f"{label} {name}: shape {value.shape}, onnxruntime {want.shape}"
            if np.issubdtype(want.dtype, np.floating):
                np.testing.assert_allclose(value.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                           err_msg=f"{label} {name}")
            else:
                np.testing.assert_array_equal(value, want, err_msg=f"{label} {name}")
    return payload


def randomized(source: str | pathlib.Path, target: pathlib.Path, seed: int = 0) -> pathlib.Path:
    """*source* after onnxruntime's basic optimizations (weights built by ConstantOfShape become
    initializers) with every weight replaced by He-scaled noise: Conv / ConvTranspose / Gemm / MatMul
    weights ~ N(0, 2 / fan_in), biases ~ N(0, 0.1), BatchNormalization scale and variance ~ U(0.5, 1.5).
    A graph output computed by Softmax also gets the Softmax's input as an output (logits: a saturated
    softmax would hide errors)."""
    work = target.parent / f"{target.stem}-ort"
    work.mkdir(parents=True, exist_ok=True)
    proto = onnx.load(str(fold_constants.ort_optimized(source, work)))
    rng = np.random.default_rng(seed)
    role: dict[str, tuple[str, int]] = {}
    for node in proto.graph.node:
        for index, name in enumerate(node.input):
            role.setdefault(name, (node.op_type, index))
    tensors = []
    for tensor in proto.graph.initializer:
        array = numpy_helper.to_array(tensor)
        op, index = role.get(tensor.name, ("", -1))
        if array.dtype != np.float32 or array.ndim == 0:
            tensors.append(tensor)
            continue
        if op in ("Conv", "ConvTranspose", "Gemm", "MatMul") and index == 1:
            fan_in = array.shape[0] if op in ("MatMul", "ConvTranspose") else array.size // array.shape[0]
            new = rng.normal(0.0, np.sqrt(2.0 / max(fan_in, 1)), array.shape)
        elif op in ("Conv", "ConvTranspose", "Gemm") and index == 2:
            new = rng.normal(0.0, 0.1, array.shape)
        elif op == "BatchNormalization":
            new = rng.uniform(0.5, 1.5, array.shape) if index in (1, 4) else rng.normal(0.0, 0.1, array.shape)
        else:
            tensors.append(tensor)
            continue
        tensors.append(numpy_helper.from_array(new.astype(np.float32), tensor.name))
    del proto.graph.initializer[:]
    proto.graph.initializer.extend(tensors)
    proto.ir_version = max(proto.ir_version, 7)  # initializers need not be (overridable) graph inputs
    initializer_names = {t.name for t in tensors}
    inputs = [i for i in proto.graph.input if i.name not in initializer_names]
    del proto.graph.input[:]
    proto.graph.input.extend(inputs)
    inferred = onnx.shape_inference.infer_shapes(proto)
    infos = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    producers = {o: n for n in proto.graph.node for o in n.output}
    for output in list(proto.graph.output):
        node = producers.get(output.name)
        if node is not None and node.op_type == "Softmax" and node.input[0] in infos:
            proto.graph.output.append(infos[node.input[0]])
    onnx.save(proto, str(target))
    return target
