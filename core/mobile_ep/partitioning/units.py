"""QDQ node units: DequantizeLinear -> op -> QuantizeLinear groups that a backend takes whole.

ONNX Runtime forms these groups for QDQ-aware execution providers (NNAPI, not Core ML) so that a
quantized op is claimed together with the Q/DQ nodes around it; a partition never splits one.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

import onnx_ir as ir

from mobile_ep.contract import NodeUnit

__all__ = ["build_node_units"]

# Which of the target's inputs must come from DequantizeLinear nodes.  ``None`` = every present input.
_DQ_INPUTS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    # op: (required DQ input indices, optional DQ input indices)
    "Conv": ((0, 1), (2,)),
    "Gemm": ((0, 1), (2,)),
    "MatMul": ((0, 1), ()),
    "Add": ((0, 1), ()),
    "Mul": ((0, 1), ()),
}
_DQ = "DequantizeLinear"
_Q = "QuantizeLinear"


def _dq_input_indices(node: ir.Node) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if node.op_type in _DQ_INPUTS:
        return _DQ_INPUTS[node.op_type]
    if node.op_type == "Concat":
        return tuple(range(len(node.inputs))), ()
    return (0,), ()


def _sole_consumer(value: ir.Value, graph_outputs: Collection[ir.Value]) -> ir.Node | None:
    uses = list(value.uses())
    if len(uses) != 1 or value in graph_outputs:
        return None
    return uses[0].node


def _unit_for(node: ir.Node, graph: ir.Graph, graph_outputs: Collection[ir.Value]) -> NodeUnit | None:
    required, optional = _dq_input_indices(node)
    dq_nodes: list[ir.Node] = []
    for index in (*required, *optional):
        value = node.inputs[index] if index < len(node.inputs) else None
        if value is None:
            if index in required:
                return None
            continue
        producer = value.producer()
        is_dq = (
            producer is not None
            and producer.op_type == _DQ
            and producer.domain in ("", "ai.onnx")
            and producer.graph is graph
            and _sole_consumer(value, graph_outputs) is node
        )
        if not is_dq:
            if index in required:
                return None
            continue
        dq_nodes.append(producer)  # type: ignore[arg-type]
    q_nodes: list[ir.Node] = []
    for value in node.outputs:
        consumer = _sole_consumer(value, graph_outputs)
        if consumer is None or consumer.op_type != _Q or consumer.domain not in ("", "ai.onnx"):
            return None
        q_nodes.append(consumer)
    if not q_nodes:
        return None
    return NodeUnit(node, "qdq", tuple(dq_nodes), tuple(q_nodes))


def build_node_units(graph: ir.Graph, qdq_ops: Collection[str], nodes: Iterable[ir.Node] | None = None) -> dict[ir.Node, NodeUnit]:
    """Map every node of *graph* to its unit.  Q/DQ nodes absorbed by a QDQ unit map to that unit."""
    nodes = list(graph if nodes is None else nodes)
    units: dict[ir.Node, NodeUnit] = {}
    if qdq_ops:
        outputs = set(graph.outputs)
        for node in nodes:
            if node.op_type in qdq_ops and node.domain in ("", "ai.onnx"):
                unit = _unit_for(node, graph, outputs)
                if unit is None:
                    continue
                if any(member in units for member in unit.nodes):
                    continue  # a DQ feeding two targets cannot belong to both; first come, first served
                for member in unit.nodes:
                    units[member] = unit
    for node in nodes:
        if node not in units:
            units[node] = NodeUnit(node)
    return units
