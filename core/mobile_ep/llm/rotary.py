"""The rotary tables folded: ``cos``/``sin`` of the positions become rows gathered from a table.

A decoder computes its rotary embedding from ``position_ids`` at every step (positions times the inverse
frequencies, then ``Cos`` and ``Sin``).  Over a fixed context the positions are ``0..context-1``, so each
``Cos``/``Sin`` output that depends only on the positions (and constants), shaped ``[1, seq, dim]`` with one row
per position, is the row ``position`` of a ``[context, dim]`` table: the table is computed once (by onnxruntime's
CPU EP running the same nodes, so its values are those the graph would compute) and the nodes become one
``Gather``.  The accelerators then see no ``Cos`` or ``Sin`` (NNAPI takes neither) and no per-step trigonometry.
A table is used only when the rows computed in another order agree (each row depends on its own position only).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from onnx_ir.passes.common import RemoveUnusedNodesPass

from mobile_ep import sessions
from mobile_ep.llm.decoder import Interface

__all__ = ["fold_rotary"]


def _only_positions(value: ir.Value, positions: str, seen: dict[str, bool]) -> bool:
    """Whether *value* is computed from the positions and constants only (and from the positions at all)."""
    if value.name in seen:
        return seen[value.name]
    seen[value.name] = False  # (no cycles in a graph; a guard all the same)
    if value.name == positions:
        seen[value.name] = True
        return True
    producer = value.producer()
    if value.const_value is not None or producer is None:
        return False
    inputs = [v for v in producer.inputs if v is not None]
    result = all(v.const_value is not None or _only_positions(v, positions, seen) for v in inputs) and any(
        v.const_value is None for v in inputs)
    seen[value.name] = result
    return result


def _nodes_of(value: ir.Value, positions: str) -> list[ir.Node]:
    found: dict[int, ir.Node] = {}
    stack = [value]
    while stack:
        v = stack.pop()
        node = v.producer()
        if v.name == positions or node is None or id(node) in found:
            continue
        found[id(node)] = node
        stack.extend(x for x in node.inputs if x is not None)
    return list(found.values())


def _table(model: ir.Model, nodes: list[ir.Node], value: ir.Value, positions: str, seq: int, context: int
           ) -> np.ndarray | None:
    """Rows ``0..context-1`` of *value* (``[1, seq, dim]``) computed by *nodes*, or None when a row depends on
    more than its own position."""
    import onnxruntime as ort

    from mobile_ep.llm.split import copy_nodes  # (a model of copies of the nodes, weights shared)

    order = [n for n in model.graph if any(n is m for m in nodes)]
    sub = copy_nodes(model, order, [value], "rotary_table")
    sub.graph.inputs[:] = [v for v in sub.graph.inputs if v.name == positions]
    proto = ir.serde.serialize_model(sub)
    proto.ir_version = min(proto.ir_version, 10)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = sessions.open_session(proto.SerializeToString(), options)
    count = -(-context // seq)
    ids = np.arange(count * seq, dtype=np.int64)

    def rows(order_of_ids: np.ndarray) -> np.ndarray:
        out = np.empty((count * seq, *value.shape[2:]), np.float32)
        for k in range(count):
            chunk = order_of_ids[k * seq:(k + 1) * seq]
            out[chunk] = session.run(None, {positions: chunk[None]})[0][0]
        return out

    table = rows(ids)
    if not np.array_equal(table, rows(ids[::-1].copy())):
        return None
    return table[:context]


def fold_rotary(model: ir.Model, face: Interface, context: int, seq: int) -> int:
    """Replace each ``Cos``/``Sin`` output of the positions only by a ``Gather`` from its table; how many."""
    positions = face.position_ids
    if not positions:
        return 0
    graph = model.graph
    seen: dict[str, bool] = {}
    folded = 0
    position_value = next(v for v in graph.inputs if v.name == positions)
    for node in list(graph):
        if node.op_type not in ("Cos", "Sin") or node.domain not in ("", "ai.onnx"):
            continue
        value = node.outputs[0]
        shape = value.shape
        if (shape is None or len(shape) != 3 or list(shape)[:2] != [1, seq] or not isinstance(shape[2], int)
                or value.dtype != ir.DataType.FLOAT or not _only_positions(value, positions, seen)):
            continue
        table = _table(model, _nodes_of(value, positions), value, positions, seq, context)
        if table is None:
            continue
        constant = ir.Value(name=f"{value.name}.table", shape=ir.Shape(table.shape), type=ir.TensorType(ir.DataType.FLOAT),
                            const_value=ir.tensor(table, name=f"{value.name}.table"))
        graph.register_initializer(constant)
        gather = ir.node("Gather", [constant, position_value], attributes={"axis": 0}, name=f"{node.name}.from_table")
        graph.insert_before(node, gather)
        out = gather.outputs[0]
        out.shape, out.dtype = value.shape, value.dtype
        value.replace_all_uses_with(out)
        out.name, value.name = value.name, f"{value.name}.computed"
        folded += 1
    if folded:
        RemoveUnusedNodesPass()(model)  # (the computing nodes, and the inverse frequencies they alone read)
    return folded
