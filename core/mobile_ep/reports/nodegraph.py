"""Plain-data snapshots of the graphs a report describes: nodes, ops, value types and shapes.

A :class:`~mobile_ep.pipeline.BackendReport` names its partitions' nodes and the nodes left on CPU; the HTML
report and ``mobile-ep explain`` also need the graph itself.  The pipeline attaches a
:class:`GraphSnapshot` to each report's ``graph`` field while :func:`recording` is active (it costs a walk
over the graph, so nothing is recorded otherwise).  Snapshots hold no ``onnx_ir`` objects: they outlive
the pipeline's temporary files and pickle across processes (``--jobs``).  They are not part of the JSON.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import heapq
from collections.abc import Iterator

import onnx_ir as ir

from mobile_ep.contract import op_label

__all__ = ["SnapshotNode", "GraphSnapshot", "recording", "is_recording", "attach"]

_RECORDING: contextvars.ContextVar[bool] = contextvars.ContextVar("mobile_ep_recording_graphs", default=False)

#: Attribute values longer than this are summarized (their type and size) in :attr:`SnapshotNode.attrs`.
_ATTR_TEXT_MAX = 48


@dataclasses.dataclass(frozen=True)
class SnapshotNode:
    name: str
    #: ``Conv``, or ``domain:op_type`` outside the default domain.
    op: str
    #: Value names read, in input order (``""`` for omitted optional inputs).
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    #: Values read from outer scopes by the node's subgraphs (If/Loop/Scan bodies).
    implicit_inputs: tuple[str, ...] = ()
    #: A short rendering of the attributes (``kernel_shape=[3,3] strides=[2,2]``).
    attrs: str = ""


@dataclasses.dataclass
class GraphSnapshot:
    """One graph, node by node (in topological order)."""

    nodes: list[SnapshotNode]
    #: ``float32[1,3,224,224]`` by value name, for the values whose type is known.
    types: dict[str, str]
    #: Names of the constant values (initializers).
    constants: frozenset[str]
    inputs: list[str]
    outputs: list[str]

    def __len__(self) -> int:
        return len(self.nodes)

    def index(self) -> dict[str, int]:
        """Position of each node by name."""
        return {n.name: i for i, n in enumerate(self.nodes)}

    @classmethod
    def from_model(cls, model: ir.Model) -> GraphSnapshot:
        graph = model.graph
        types: dict[str, str] = {}
        constants = {name for name in graph.initializers}
        for value in graph.inputs:
            _record_type(types, value)
        for value in graph.initializers.values():
            _record_type(types, value)
        nodes = []
        for node in _topological(graph):
            inputs = tuple(v.name or "" if v is not None else "" for v in node.inputs)
            for value in node.inputs:
                if value is not None and value.name not in types:
                    _record_type(types, value)
            for value in node.outputs:
                _record_type(types, value)
            nodes.append(SnapshotNode(node.name or "", op_label(node), inputs,
                                      tuple(v.name or "" for v in node.outputs), _implicit_inputs(node),
                                      _attrs(node)))
        return cls(nodes, types, frozenset(constants), [v.name or "" for v in graph.inputs if not v.is_initializer()],
                   [v.name or "" for v in graph.outputs])


def _record_type(types: dict[str, str], value: ir.Value) -> None:
    if not value.name:
        return
    dtype = value.dtype
    shape = value.shape
    if (dtype is None or shape is None) and value.const_value is not None:
        dtype = dtype or value.const_value.dtype
        shape = shape or value.const_value.shape
    if dtype is None and shape is None:
        return
    name = dtype.name.lower() if dtype is not None else "?"
    dims = "" if shape is None else "[" + ",".join(str(d) if isinstance(d, int) else (str(d) if str(d) else "?")
                                                  for d in shape) + "]"
    types[value.name] = name + (dims or "[?]")


def _subgraphs(node: ir.Node) -> list[ir.Graph]:
    graphs: list[ir.Graph] = []
    for attribute in node.attributes.values():
        if attribute.type == ir.AttributeType.GRAPH:
            graphs.append(attribute.value)
        elif attribute.type == ir.AttributeType.GRAPHS:
            graphs.extend(attribute.value)
    return graphs


def _implicit_inputs(node: ir.Node) -> tuple[str, ...]:
    graphs = _subgraphs(node)
    if not graphs:
        return ()
    explicit = {v for v in node.inputs if v is not None}
    found: dict[str, None] = {}
    for graph in graphs:
        inner_defined = {v for v in graph.inputs} | set(graph.initializers.values())
        for inner in graph.all_nodes():
            inner_defined.update(inner.outputs)
        for inner in graph.all_nodes():
            for value in inner.inputs:
                if value is not None and value not in inner_defined and value not in explicit and value.name:
                    found.setdefault(value.name, None)
    return tuple(found)


def _attr_text(attribute: ir.Attr) -> str:
    if attribute.is_ref():
        return f"@{attribute.ref_attr_name}"
    value = attribute.value
    kind = attribute.type
    if kind in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
        count = 1 if kind == ir.AttributeType.GRAPH else len(value)
        return f"<{count} graph{'s' if count != 1 else ''}>"
    if kind in (ir.AttributeType.TENSOR, ir.AttributeType.SPARSE_TENSOR):
        shape = getattr(value, "shape", None)
        return f"<tensor {list(shape) if shape is not None else ''}>"
    if kind == ir.AttributeType.TENSORS:
        return f"<{len(value)} tensors>"
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, float):
        text = f"{value:g}"
    elif isinstance(value, (list, tuple)):
        items = [v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v for v in value]
        text = "[" + ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in items) + "]"
    else:
        text = str(value)
    return text if len(text) <= _ATTR_TEXT_MAX else text[: _ATTR_TEXT_MAX - 1] + "…"


def _attrs(node: ir.Node) -> str:
    if not node.attributes:
        return ""
    return " ".join(f"{name}={_attr_text(a)}" for name, a in node.attributes.items())


def _topological(graph: ir.Graph) -> list[ir.Node]:
    """The graph's nodes in a topological order (Kahn's, stable: graph order among ready nodes)."""
    nodes = list(graph)
    position = {node: i for i, node in enumerate(nodes)}
    pending = [0] * len(nodes)
    users: list[list[int]] = [[] for _ in nodes]
    for i, node in enumerate(nodes):
        producers = set()
        for value in node.inputs:
            if value is not None:
                producer = value.producer()
                if producer is not None and producer is not node and producer in position:
                    producers.add(position[producer])
        for inner_graph in _subgraphs(node):  # values the subgraphs read from this scope
            for inner in inner_graph.all_nodes():
                for value in inner.inputs:
                    producer = value.producer() if value is not None else None
                    if producer is not None and producer in position and producer is not node:
                        producers.add(position[producer])
        pending[i] = len(producers)
        for p in producers:
            users[p].append(i)
    ready = [i for i, p in enumerate(pending) if p == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for user in users[i]:
            pending[user] -= 1
            if pending[user] == 0:
                heapq.heappush(ready, user)
    if len(order) != len(nodes):  # a cycle: validation rejects those; keep the graph order
        return nodes
    return [nodes[i] for i in order]


# --------------------------------------------------------------------------------------------------
# Recording snapshots while the pipeline runs
# --------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def recording(enabled: bool = True) -> Iterator[None]:
    """While active, the pipeline attaches a :class:`GraphSnapshot` to every report's ``graph``."""
    token = _RECORDING.set(enabled)
    try:
        yield
    finally:
        _RECORDING.reset(token)


def is_recording() -> bool:
    return _RECORDING.get()


def attach(report: object, model: ir.Model) -> None:
    """Set ``report.graph`` to a snapshot of *model* (only while :func:`recording`)."""
    if _RECORDING.get():
        report.graph = GraphSnapshot.from_model(model)  # type: ignore[attr-defined]
