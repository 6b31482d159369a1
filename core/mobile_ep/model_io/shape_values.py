"""Shapes onnxruntime knows that ONNX's shape inference leaves unknown: a shape computed in the graph.

onnxruntime, loading a model, propagates the values of small integer tensors made from static shapes (``Shape``
of a tensor whose dims are known, then ``Gather``, ``Slice``, ``Concat``, ``Squeeze``, ``Unsqueeze``, ``Cast``
and integer arithmetic on them) into the ops that read a shape from an input: a ``Reshape`` to
``Shape(x)`` has a static output there, as the execution providers see it, where ONNX's inference (without its
data propagation, which misses the older op versions exporters still write, such as ``Reshape``-13) leaves the
output's shape unknown.  :func:`propagate` works those values out on the main graph and gives the shapes they
fix to the ``Reshape``, ``Expand`` and ``ConstantOfShape`` outputs ONNX left unknown; the caller then infers
again from them.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

__all__ = ["propagate"]

#: Integer tensors of at most this many elements are followed (shapes, axes, indices).
MAX_ELEMENTS = 64
_INTS = frozenset({ir.DataType.INT64, ir.DataType.INT32})


def _static(value: ir.Value | None) -> tuple[int, ...] | None:
    shape = value.shape if value is not None else None
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return tuple(int(d) for d in shape)  # type: ignore[arg-type]


def _attr(node: ir.Node, name: str, default=None):
    attribute = node.attributes.get(name)
    return default if attribute is None else attribute.value


def _computed(node: ir.Node, known: dict[ir.Value, np.ndarray]) -> np.ndarray | None:
    """The integer value *node*'s first output holds, when its inputs' values are known (else None)."""
    op, inputs = node.op_type, list(node.inputs)

    def arg(i: int) -> np.ndarray | None:
        return known.get(inputs[i]) if i < len(inputs) and inputs[i] is not None else None

    if op == "Shape":
        dims = _static(inputs[0])
        if dims is None:
            return None
        rank = len(dims)
        start, end = _attr(node, "start", 0), _attr(node, "end", rank)
        return np.array(dims, np.int64)[slice(start, end)]
    if op == "Size":
        dims = _static(inputs[0])
        return None if dims is None else np.array(int(np.prod(dims)), np.int64)
    values = [arg(i) for i in range(len(inputs))]
    if op in ("Identity", "Cast") and values and values[0] is not None:
        return values[0] if op == "Identity" or _attr(node, "to") in (ir.DataType.INT64, ir.DataType.INT32) else None
    if op == "Gather" and len(values) == 2 and values[0] is not None and values[1] is not None:
        data, index = values
        if data.ndim != 1 or np.any(index >= data.size) or np.any(index < -data.size):
            return None
        return np.take(data, index)
    if op == "Concat" and values and all(v is not None for v in values):
        return np.concatenate([np.atleast_1d(v) for v in values])
    if op == "Unsqueeze" and values and values[0] is not None and values[0].ndim == 0:
        return values[0].reshape(1)
    if op == "Squeeze" and values and values[0] is not None and values[0].size == 1:
        return values[0].reshape(())
    if op == "Slice" and len(values) >= 3 and all(v is not None for v in values) and values[0].ndim == 1:
        axes = values[3] if len(values) > 3 else np.zeros(1, np.int64)
        steps = values[4] if len(values) > 4 else np.ones(1, np.int64)
        if any(v.size != 1 for v in (values[1], values[2], axes, steps)) or int(axes[0]) not in (0, -1) or \
                int(steps[0]) == 0:
            return None
        return values[0][slice(int(values[1][0]), int(values[2][0]), int(steps[0]))]
    if op in ("Add", "Sub", "Mul") and len(values) == 2 and all(v is not None for v in values):
        return {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}[op](values[0], values[1])
    return None


def _fixed_shape(node: ir.Node, known: dict[ir.Value, np.ndarray]) -> tuple[int, ...] | None:
    """The static output shape of a Reshape, Expand or ConstantOfShape whose shape input's value is known."""
    shape_input = node.inputs[1] if node.op_type in ("Reshape", "Expand") else node.inputs[0]
    wanted = known.get(shape_input) if shape_input is not None else None
    if wanted is None or wanted.ndim != 1:
        return None
    dims = [int(d) for d in wanted]
    if node.op_type == "ConstantOfShape":
        return tuple(dims) if all(d >= 0 for d in dims) else None
    source = _static(node.inputs[0])
    if source is None:
        return None
    if node.op_type == "Expand":
        try:
            return tuple(int(d) for d in np.broadcast_shapes(source, tuple(dims)))
        except ValueError:
            return None
    if not _attr(node, "allowzero", 0):
        dims = [source[i] if d == 0 and i < len(source) else d for i, d in enumerate(dims)]
    if dims.count(-1) > 1 or any(d < -1 for d in dims):
        return None
    total, rest = int(np.prod(source)), int(np.prod([d for d in dims if d != -1]))
    if -1 in dims:
        if rest == 0 or total % rest:
            return None
        dims[dims.index(-1)] = total // rest
    return tuple(dims) if int(np.prod(dims)) == total else None


def propagate(graph: ir.Graph) -> bool:
    """Give the ``Reshape``, ``Expand`` and ``ConstantOfShape`` outputs of *graph* whose shape ONNX left
    unknown the static shape the values onnxruntime propagates fix; whether any was given."""
    known: dict[ir.Value, np.ndarray] = {}
    for value in graph.initializers.values():
        tensor = value.const_value
        if tensor is not None and tensor.dtype in _INTS and tensor.size <= MAX_ELEMENTS:
            known[value] = tensor.numpy().astype(np.int64)
    changed = False
    for node in graph:
        if node.op_type in ("Reshape", "Expand", "ConstantOfShape") and node.domain in ("", "ai.onnx") and \
                node.outputs and _static(node.outputs[0]) is None:
            shape = _fixed_shape(node, known)
            if shape is not None:
                node.outputs[0].shape = ir.Shape(shape)
                changed = True
        if not node.outputs or node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Constant":
            tensor = _attr(node, "value")
            if tensor is not None and tensor.dtype in _INTS and tensor.size <= MAX_ELEMENTS:
                known[node.outputs[0]] = tensor.numpy().astype(np.int64)
            continue
        try:
            value = _computed(node, known)
        except (ValueError, IndexError, TypeError, OverflowError):
            value = None
        if value is not None and value.size <= MAX_ELEMENTS and not np.any(np.asarray(value) < 0):
            known[node.outputs[0]] = np.asarray(value, np.int64)
    return changed
