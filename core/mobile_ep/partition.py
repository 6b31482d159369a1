"""Proposing partitions: ONNX Runtime's wave algorithm, over node units, for several backends.

:func:`propose` is pure: it reads the graph and returns a :class:`Proposal` (which node goes where and
why).  Rewriting the graph from a proposal is a separate pass.

The algorithm is ORT's ``CreateSupportedPartitionNodeGroups`` (partitioning_utils.cc): a Kahn
topological walk in waves.  Each wave collects at most one group of supported units; an unsupported
unit that consumes a value of the current group is deferred to the next wave together with
everything behind it, so no group can reach itself through a node outside it (no cycles).  Backends
are processed in priority order and units claimed by an earlier backend count as unsupported for later
ones, as ORT does for execution providers.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence

import onnx_ir as ir

from .capability import Backend, NodeUnit, PartitionView, RuleContext, Support, op_label
from .qdq import build_node_units

__all__ = ["Partition", "Placement", "BackendProposal", "Proposal", "propose", "wave_groups", "verdict"]


@dataclasses.dataclass(frozen=True)
class Partition:
    backend: str
    nodes: tuple[ir.Node, ...]
    inputs: tuple[ir.Value, ...]
    outputs: tuple[ir.Value, ...]

    @property
    def node_names(self) -> list[str]:
        return [n.name or "" for n in self.nodes]


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where one node runs: a backend's name, or ``None`` for the CPU, with the reason."""

    node: ir.Node
    backend: str | None
    reason: str = ""


@dataclasses.dataclass
class BackendProposal:
    backend: str
    partitions: list[Partition]
    #: Every node the backend did not take, with the reason (its own rule's, or a filter's).
    rejected: dict[ir.Node, str]
    total_nodes: int

    @property
    def supported_nodes(self) -> int:
        return sum(len(p.nodes) for p in self.partitions)

    @property
    def verdict(self) -> str:
        return verdict(len(self.partitions), self.supported_nodes, self.total_nodes)


@dataclasses.dataclass
class Proposal:
    nodes: list[ir.Node]
    per_backend: dict[str, BackendProposal]
    placements: dict[ir.Node, Placement]

    @property
    def partitions(self) -> list[Partition]:
        return [p for bp in self.per_backend.values() for p in bp.partitions]


def verdict(partitions: int, supported: int, total: int) -> str:
    """ONNX Runtime's usability verdict: YES, MAYBE or NO (usability_checker ``suitability``)."""
    pct = 100.0 * supported / total if total else 0.0
    if partitions == 1:
        return "YES" if pct > 75 else "MAYBE" if pct > 50 else "NO"
    if partitions == 2:
        return "MAYBE" if pct > 75 else "NO"
    return "NO"


# --------------------------------------------------------------------------------------------------
# Unit graph
# --------------------------------------------------------------------------------------------------
def _outer_inputs(node: ir.Node) -> Iterable[ir.Value]:
    """Values a node reads, including those its subgraphs read from outer scopes."""
    yield from (v for v in node.inputs if v is not None)
    for attribute in node.attributes.values():
        graphs: list[ir.Graph] = []
        if attribute.type == ir.AttributeType.GRAPH:
            graphs = [attribute.value]
        elif attribute.type == ir.AttributeType.GRAPHS:
            graphs = list(attribute.value)
        for graph in graphs:
            for inner in graph.all_nodes():
                yield from (v for v in inner.inputs if v is not None)


def _unit_edges(
    nodes: Sequence[ir.Node], units: Mapping[ir.Node, NodeUnit]
) -> tuple[list[NodeUnit], dict[NodeUnit, list[NodeUnit]], dict[NodeUnit, int]]:
    """Units in topological order of their first node, consumers per unit, and in-degrees."""
    order: list[NodeUnit] = []
    seen: set[int] = set()
    for node in nodes:
        unit = units[node]
        if id(unit) not in seen:
            seen.add(id(unit))
            order.append(unit)
    consumers: dict[NodeUnit, list[NodeUnit]] = {u: [] for u in order}
    in_degree: dict[NodeUnit, int] = dict.fromkeys(order, 0)
    edges: set[tuple[int, int]] = set()
    for node in nodes:
        unit = units[node]
        for value in _outer_inputs(node):
            producer = value.producer()
            if producer is None or producer not in units:
                continue
            source = units[producer]
            if source is unit:
                continue
            key = (id(source), id(unit))
            if key in edges:
                continue
            edges.add(key)
            consumers[source].append(unit)
            in_degree[unit] += 1
    return order, consumers, in_degree


def wave_groups(
    order: Sequence[NodeUnit],
    consumers: Mapping[NodeUnit, Sequence[NodeUnit]],
    in_degree: Mapping[NodeUnit, int],
    is_supported: Callable[[NodeUnit], bool],
) -> list[list[NodeUnit]]:
    """ORT's wave algorithm: groups of supported units, none of which can form a cycle when fused."""
    remaining = dict(in_degree)
    queue = collections.deque(u for u in order if remaining[u] == 0)
    groups: list[list[NodeUnit]] = []
    supported_memo: dict[NodeUnit, bool] = {}
    while queue:
        group: list[NodeUnit] = []
        border: set[NodeUnit] = set()
        deferred: list[NodeUnit] = []
        while queue:
            unit = queue.popleft()
            if unit not in supported_memo:
                supported_memo[unit] = is_supported(unit)
            if supported_memo[unit]:
                group.append(unit)
                border.update(consumers[unit])
            elif unit in border:
                deferred.append(unit)  # behind the group: wait for the next wave
                continue
            for consumer in consumers[unit]:
                remaining[consumer] -= 1
                if remaining[consumer] == 0:
                    queue.append(consumer)
        if group:
            groups.append(group)
        queue.extend(deferred)
    return groups


def _partition_io(units: Sequence[NodeUnit], graph: ir.Graph) -> tuple[tuple[ir.Value, ...], tuple[ir.Value, ...]]:
    members = {n for u in units for n in u.nodes}
    inputs: dict[ir.Value, None] = {}
    outputs: dict[ir.Value, None] = {}
    graph_outputs = set(graph.outputs)
    for unit in units:
        for node in unit.nodes:
            for value in _outer_inputs(node):
                if value.producer() not in members:
                    inputs.setdefault(value, None)
            for value in node.outputs:
                if value in graph_outputs or any(use.node not in members for use in value.uses()):
                    outputs.setdefault(value, None)
    return tuple(inputs), tuple(outputs)


def _topological_nodes(graph: ir.Graph) -> list[ir.Node]:
    """The graph's nodes in a topological order (the graph itself is left as it is)."""
    nodes = list(graph)
    position = {node: i for i, node in enumerate(nodes)}
    pending = {node: 0 for node in nodes}
    users: dict[ir.Node, list[ir.Node]] = {node: [] for node in nodes}
    for node in nodes:
        producers = {v.producer() for v in _outer_inputs(node)}
        for producer in producers:
            if producer in position and producer is not node:
                pending[node] += 1
                users[producer].append(node)
    ready = [n for n in nodes if pending[n] == 0]
    ready.reverse()
    result: list[ir.Node] = []
    while ready:
        node = ready.pop()
        result.append(node)
        for user in reversed(users[node]):
            pending[user] -= 1
            if pending[user] == 0:
                ready.append(user)
    if len(result) != len(nodes):
        from .errors import ModelError

        stuck = next(n for n in nodes if pending[n] > 0)
        raise ModelError(f"the graph has a cycle through node {stuck.name!r} ({op_label(stuck)})")
    return result


# --------------------------------------------------------------------------------------------------
# Proposal
# --------------------------------------------------------------------------------------------------
def propose(
    model: ir.Model,
    backends: Sequence[Backend],
    *,
    on_error: Callable[[Backend, NodeUnit, Exception], Support] | None = None,
) -> Proposal:
    """Decide, for each backend in priority order, which nodes it takes.  Pure: the model is not changed.

    ``on_error`` turns an exception raised by a backend's rule into an answer (by default it propagates).
    """
    graph = model.graph
    nodes = _topological_nodes(graph)
    owner: dict[ir.Node, str] = {}
    per_backend: dict[str, BackendProposal] = {}
    reasons: dict[ir.Node, list[str]] = collections.defaultdict(list)

    for backend in backends:
        ctx = RuleContext(model, backend, graph)
        units = build_node_units(graph, backend.qdq_ops(), nodes)
        ctx.units = units
        order, consumers, in_degree = _unit_edges(nodes, units)
        rejected: dict[ir.Node, str] = {}
        try:
            excluded = dict(backend.excluded_nodes(graph, ctx))
        except Exception as exc:
            if on_error is None:
                raise
            # A broken exclusion hook costs the backend all its claims, nothing else.
            answer = on_error(backend, units[nodes[0]], exc) if nodes else Support.no(str(exc))
            excluded = dict.fromkeys(nodes, answer.reason)

        def is_supported(unit: NodeUnit, backend: Backend = backend, ctx: RuleContext = ctx,
                         excluded: Mapping[ir.Node, str] = excluded, rejected: dict[ir.Node, str] = rejected) -> bool:
            owned = next((owner[n] for n in unit.nodes if n in owner), None)
            if owned is not None:
                reason = f"taken by {owned}, which has priority"
            elif unit.target in excluded:
                reason = excluded[unit.target]
            else:
                try:
                    answer = ctx.claims_unit(unit)
                except Exception as exc:
                    if on_error is None:
                        raise
                    answer = on_error(backend, unit, exc)
                if answer:
                    return True
                reason = answer.reason or "unsupported"
            for node in unit.nodes:
                rejected[node] = reason
            return False

        partitions: list[Partition] = []
        order_index = {n: i for i, n in enumerate(nodes)}
        for group in wave_groups(order, consumers, in_degree, is_supported):
            inputs, outputs = _partition_io(group, graph)
            view = PartitionView(backend.name, tuple(group), inputs, outputs)
            try:
                verdict_ = backend.accept_partition(view, ctx)
            except Exception as exc:
                if on_error is None:
                    raise
                verdict_ = on_error(backend, group[0], exc)
            group_nodes = tuple(n for u in group for n in u.nodes)
            if not verdict_:
                for node in group_nodes:
                    rejected[node] = f"partition dropped by {backend.name}: {verdict_.reason}"
                continue
            # Nodes of a partition in graph (topological) order.
            group_nodes = tuple(sorted(group_nodes, key=order_index.__getitem__))
            partitions.append(Partition(backend.name, group_nodes, inputs, outputs))
            for node in group_nodes:
                owner[node] = backend.name
        for node, reason in rejected.items():
            reasons[node].append(f"{backend.name}: {reason}")
        per_backend[backend.name] = BackendProposal(backend.name, partitions, rejected, len(nodes))

    placements = {
        node: Placement(node, owner.get(node), "" if node in owner else "; ".join(reasons.get(node, [])))
        for node in nodes
    }
    return Proposal(nodes, per_backend, placements)
