"""Shortcuts for the compile tests: lower a whole model as one partition, emulate it, run it in onnxruntime."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnxruntime as ort

from mobile_ep import CompiledPartition, RuleContext
from mobile_ep.contract.compile import partition_view
from mobile_ep.partitioning.units import build_node_units
from mobile_ep.testing import as_model
from mobile_ep_nnapi import NnapiBackend, serialize
from mobile_ep_nnapi.model import NnapiModel
from mobile_ep_nnapi.nnapi import OperationCode


def compile_whole(proto, backend: NnapiBackend | None = None) -> CompiledPartition:
    """Every node of *proto* must be claimed; the model lowered as one partition."""
    backend = backend or NnapiBackend()
    model = as_model(proto)
    ctx = RuleContext(model, backend)
    ctx.units = build_node_units(model.graph, backend.qdq_ops())
    for node in model.graph:
        answer = ctx.claims(node)
        assert answer, f"{node.op_type} {node.name!r} not claimed: {answer.reason}"
    return backend.compile(partition_view(ctx, list(model.graph)), ctx)


def nnapi_model(payload: CompiledPartition) -> NnapiModel:
    return serialize.read(payload.data)


def ops(payload: CompiledPartition) -> list[str]:
    return [OperationCode(op.type).name for op in nnapi_model(payload).operations]


def emulate(payload: CompiledPartition, feeds: Mapping[str, np.ndarray],
            backend: NnapiBackend | None = None) -> dict[str, np.ndarray]:
    restored = CompiledPartition.from_bytes(payload.to_bytes())
    return (backend or NnapiBackend()).emulate(restored, {s.name: feeds[s.name] for s in restored.inputs})


def ort_run(proto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    session = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(feeds)), strict=True))


def random(shape, seed: int = 0, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, size=shape).astype(np.float32)
