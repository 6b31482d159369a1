"""Helpers for the Core ML backend tests: single-node ONNX models built in code, and backends per option set.

A plain module (not conftest.py) with a unique name, so the suites of several plugins can run together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from mobile_ep import Support
from mobile_ep.testing import node_support
from mobile_ep_coreml import CoreMLBackend

F, F16, I32, I64, B, F64 = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT32, TensorProto.INT64,
                            TensorProto.BOOL, TensorProto.DOUBLE)

MLP = CoreMLBackend()
NN = CoreMLBackend().configure({"model_format": "NeuralNetwork"})
BOTH = pytest.mark.parametrize("backend", [MLP, NN], ids=["mlprogram", "neuralnetwork"])


def coreml(**options: str) -> CoreMLBackend:
    return CoreMLBackend().configure(options)  # type: ignore[return-value]


def model(
    nodes: Sequence[Any],
    inputs: Sequence[Any],
    outputs: Sequence[Any] = ("y",),
    *,
    opset: int = 17,
    extra_opsets: dict[str, int] | None = None,
):
    """A ModelProto from nodes and input specs.

    An input spec is ``(name, elem_type, shape)`` for a graph input (shape ``None``: unknown), or
    ``(name, ndarray)`` for a constant initializer, or ``(name, ndarray, "input")`` for an initializer that
    is also a graph input (overridable).  An output spec is a name (type and shape inferred) or
    ``(name, elem_type, shape)``.
    """
    graph_inputs, initializers = [], []
    for spec in inputs:
        if len(spec) == 2 or (len(spec) == 3 and isinstance(spec[1], np.ndarray)):
            name, array = spec[0], spec[1]
            initializers.append(numpy_helper.from_array(np.asarray(array), name))
            if len(spec) == 3:
                graph_inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype),
                                                                  array.shape))
        else:
            name, elem_type, shape = spec
            graph_inputs.append(helper.make_tensor_value_info(name, elem_type, shape))
    graph_outputs = [
        helper.make_empty_tensor_value_info(o) if isinstance(o, str) else helper.make_tensor_value_info(*o)
        for o in outputs
    ]
    graph = helper.make_graph(list(nodes), "g", graph_inputs, graph_outputs, initializer=initializers)
    opsets = [helper.make_opsetid("", opset)]
    opsets += [helper.make_opsetid(d, v) for d, v in (extra_opsets or {}).items()]
    return helper.make_model(graph, ir_version=10, opset_imports=opsets)


def single(op_type: str, inputs: Sequence[Any], outputs: Sequence[Any] = ("y",), *, opset: int = 17,
           domain: str = "", **attrs: Any):
    """A model of one node; input specs as in :func:`model`, ``None`` for an omitted optional input."""
    names = ["" if spec is None else spec[0] for spec in inputs]
    out_names = [o if isinstance(o, str) else o[0] for o in outputs]
    node = helper.make_node(op_type, names, out_names, name="n", domain=domain, **attrs)
    extra = {domain: 1} if domain else None
    return model([node], [s for s in inputs if s is not None], outputs, opset=opset, extra_opsets=extra)


def support(proto: Any, backend: CoreMLBackend, node: str | int = "n") -> Support:
    return node_support(proto, backend, node)


def yes(proto: Any, backend: CoreMLBackend, node: str | int = "n") -> None:
    answer = support(proto, backend, node)
    assert answer, f"expected supported, got: {answer.reason}"


def no(proto: Any, backend: CoreMLBackend, reason: str, node: str | int = "n") -> str:
    answer = support(proto, backend, node)
    assert not answer, "expected unsupported"
    assert reason in answer.reason, f"{reason!r} not in {answer.reason!r}"
    return answer.reason


def x(shape: Sequence[Any] | None = (1, 3, 4, 4), elem_type: int = F, name: str = "x"):
    return (name, elem_type, None if shape is None else list(shape))


def const(name: str, value: Any, dtype: Any = np.float32):
    return (name, np.asarray(value, dtype=dtype))


def i64(name: str, value: Any):
    return const(name, value, np.int64)
