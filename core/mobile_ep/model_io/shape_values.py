"""Shapes onnxruntime knows that ONNX's shape inference leaves unknown: a shape computed in the graph.

onnxruntime, resolving a graph, propagates the values of small integer tensors made from static shapes into the
ops that read a shape from an input, so that a ``Reshape`` to ``Shape(x)`` has a static output there, as its
execution providers see it, where ONNX's inference (without data propagation, as mobile-ep runs it) leaves the
output's shape unknown.  Such a computed shape survives onnxruntime's constant folding only in the body of a
function op it inlines after partitioning (SoftmaxCrossEntropyLoss, Attention, ...): that is where it matters.

What onnxruntime propagates, as its real EPs show (the QNN EP takes a node only when its shapes are static):

- a value starts at a ``Shape`` (with ``start``/``end``) or ``Size`` of a tensor whose dims are all known; an
  initializer or a ``Constant`` never starts one;
- it goes through ``Cast`` to an integer type, ``Squeeze`` and ``Unsqueeze`` (axes constant), ``Gather`` of it
  with a constant index, ``Concat`` of values that all are propagated ones (a constant among the inputs stops it:
  LinearAttention's ``Concat(batch, seq, -1)``), and ``Add``, ``Sub``, ``Mul``, ``Div`` of two propagated values;
- it fixes the output shape of ``Reshape``, ``Expand`` and ``ConstantOfShape`` reading it as their shape, and of
  ``Range`` whose start, limit and delta each are one or a constant.

:func:`propagate` works those values out on the main graph and gives the shapes they fix to the outputs ONNX left
unknown; the caller then infers again from them.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

__all__ = ["propagate"]

#: Integer tensors of at most this many elements are followed (shapes, axes, indices).
MAX_ELEMENTS = 64
_INTS = frozenset({ir.DataType.INT64, ir.DataType.INT32})
#: The ops whose output shape a propagated value fixes.
_FIXED = frozenset({"Reshape", "Expand", "ConstantOfShape", "Range"})
_ARITHMETIC = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}


def _static(value: ir.Value | None) -> tuple[int, ...] | None:
    shape = value.shape if value is not None else None
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return tuple(int(d) for d in shape)  # type: ignore[arg-type]


def _attr(node: ir.Node, name: str, default=None):
    attribute = node.attributes.get(name)
    return default if attribute is None else attribute.value


def _constant(value: ir.Value | None) -> np.ndarray | None:
    """The value of a small integer initializer or Constant output (a parameter: an index, axes), else None."""
    if value is None:
        return None
    tensor = value.const_value
    if tensor is None:
        producer = value.producer()
        if producer is None or producer.op_type != "Constant" or producer.domain not in ("", "ai.onnx"):
            return None
        tensor = _attr(producer, "value")
    if tensor is None or tensor.dtype not in _INTS or tensor.size > MAX_ELEMENTS:
        return None
    return tensor.numpy().astype(np.int64)


def _axes(node: ir.Node) -> list[int] | None:
    """The constant axes of a Squeeze or Unsqueeze (its second input, or its attribute before opset 13)."""
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = _constant(node.inputs[1])
        return None if axes is None else [int(a) for a in axes.reshape(-1)]
    axes = _attr(node, "axes")
    return None if axes is None else [int(a) for a in axes]


def _computed(node: ir.Node, known: dict[ir.Value, np.ndarray]) -> np.ndarray | None:
    """The value onnxruntime propagates to *node*'s first output, when it propagates one (else None)."""
    op, inputs = node.op_type, list(node.inputs)
    if op in ("Shape", "Size"):
        dims = _static(inputs[0])
        if dims is None:
            return None
        if op == "Size":
            return np.array(int(np.prod(dims)), np.int64)
        return np.array(dims, np.int64)[slice(_attr(node, "start", 0), _attr(node, "end", len(dims)))]
    values = [known.get(v) if v is not None else None for v in inputs]
    if not values or values[0] is None:
        return None
    first = values[0]
    if op == "Cast":
        return first if _attr(node, "to") in (ir.DataType.INT64, ir.DataType.INT32) else None
    if op == "Gather":
        index = _constant(inputs[1]) if len(inputs) > 1 else None
        if first.ndim != 1 or index is None or np.any(index >= first.size) or np.any(index < -first.size):
            return None
        return np.take(first, index)
    if op == "Concat":
        return np.concatenate([np.atleast_1d(v) for v in values]) if all(v is not None for v in values) else None
    if op in ("Squeeze", "Unsqueeze"):
        axes = _axes(node)
        if op == "Unsqueeze":
            return first.reshape(1) if first.ndim == 0 and axes in ([0], [-1]) else None
        return first.reshape(()) if first.size == 1 and (axes is None or axes in ([0], [-1])) else None
    if op in (*_ARITHMETIC, "Div") and len(values) == 2 and values[1] is not None:
        if op == "Div":
            return None if np.any(values[1] == 0) else np.floor_divide(first, values[1])
        return _ARITHMETIC[op](first, values[1])
    return None


def _fixed_shape(node: ir.Node, known: dict[ir.Value, np.ndarray]) -> tuple[int, ...] | None:
    """The static output shape of a Reshape, Expand or ConstantOfShape whose shape is a propagated value, or of a
    Range whose start, limit and delta each are one or a constant."""
    if node.op_type == "Range":
        ends = [known.get(v, _constant(v)) if v is not None else None for v in node.inputs[:3]]
        if len(ends) != 3 or any(v is None or v.size != 1 for v in ends) or all(v not in known for v in node.inputs):
            return None
        start, limit, delta = (int(v.reshape(-1)[0]) for v in ends)  # type: ignore[union-attr]
        return None if delta == 0 else (max(-(-(limit - start) // delta), 0),)
    shape_input = node.inputs[1] if node.op_type in ("Reshape", "Expand") else node.inputs[0]
    wanted = known.get(shape_input) if shape_input is not None else None
    if wanted is None or wanted.ndim != 1:
        return None
    dims = [int(d) for d in wanted]
    if node.op_type == "ConstantOfShape":
        return tuple(dims) if all(d >= 0 for d in dims) else None
    source = _static(node.inputs[0])
    if node.op_type == "Reshape" and all(d > 0 for d in dims):
        return tuple(dims)  # (no 0 to copy, no -1 to work out: the data's shape is not needed)
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
    """Give the outputs of *graph*'s ``Reshape``, ``Expand``, ``ConstantOfShape`` and ``Range`` nodes whose shape
    ONNX left unknown the static shape onnxruntime's propagated values fix; whether any was given.  One pass in
    graph order; a node without a Shape in the graph costs a dict lookup."""
    known: dict[ir.Value, np.ndarray] = {}
    changed = False
    for node in graph:
        if node.domain not in ("", "ai.onnx") or not node.outputs:
            continue
        if node.op_type in _FIXED and known and _static(node.outputs[0]) is None:
            shape = _fixed_shape(node, known)
            if shape is not None:
                node.outputs[0].shape = ir.Shape(shape)
                changed = True
            continue
        if node.op_type not in ("Shape", "Size") and not known:
            continue
        try:
            value = _computed(node, known)
        except (ValueError, IndexError, TypeError, OverflowError):
            value = None
        if value is not None and value.size <= MAX_ELEMENTS:
            known[node.outputs[0]] = np.asarray(value, np.int64)
    return changed
