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
import contextlib
import dataclasses
import gc
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import onnx_ir as ir

from .capability import _CYCLIC, Backend, NodeUnit, PartitionView, RuleContext, Support, op_label
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
    #: Each backend's rule answers by node (``id`` of a unit's target), for :func:`propose`'s *answers*.
    answers: dict[str, dict[int, Support]] = dataclasses.field(default_factory=dict, repr=False, compare=False)

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


_GRAPH_ATTRIBUTES = (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)


def _reads(nodes: Iterable[ir.Node]) -> dict[ir.Node, tuple[ir.Value, ...]]:
    """:func:`_outer_inputs` of every node, computed once (the partitioner walks them several times)."""
    result: dict[ir.Node, tuple[ir.Value, ...]] = {}
    for node in nodes:
        attributes = node.attributes
        if attributes and any(a.type in _GRAPH_ATTRIBUTES for a in attributes.values()):
            result[node] = tuple(_outer_inputs(node))
        else:
            inputs = tuple(node.inputs)
            result[node] = inputs if None not in inputs else tuple(v for v in inputs if v is not None)
    return result


def _producers(reads: Mapping[ir.Node, Sequence[ir.Value]]) -> dict[ir.Node, tuple[ir.Node, ...]]:
    """Each node's distinct producers, in the order it first reads them (itself excluded)."""
    result: dict[ir.Node, tuple[ir.Node, ...]] = {}
    for node, values in reads.items():
        if len(values) == 1:
            producer = values[0].producer()
            result[node] = () if producer is None or producer is node else (producer,)
            continue
        seen: dict[ir.Node, None] = {}
        for value in values:
            producer = value.producer()
            if producer is not None and producer is not node:
                seen[producer] = None
        result[node] = tuple(seen)
    return result


def _unit_edges(
    nodes: Sequence[ir.Node], units: Mapping[ir.Node, NodeUnit],
    reads: Mapping[ir.Node, Sequence[ir.Value]] | None = None,
    producers: Mapping[ir.Node, Sequence[ir.Node]] | None = None,
) -> tuple[list[NodeUnit], dict[NodeUnit, list[NodeUnit]], dict[NodeUnit, int]]:
    """Units in topological order of their first node, consumers per unit, and in-degrees."""
    if producers is None:
        producers = _producers(reads if reads is not None else _reads(nodes))
    order: list[NodeUnit] = list(dict.fromkeys(units[node] for node in nodes))  # units hash by identity
    consumers: dict[NodeUnit, list[NodeUnit]] = {u: [] for u in order}
    in_degree: dict[NodeUnit, int] = dict.fromkeys(order, 0)
    if len(order) == len(nodes):  # every unit one node: each edge comes once from _producers
        for node in nodes:
            unit = units[node]
            for producer in producers[node]:
                source = units.get(producer)
                if source is not None:
                    consumers[source].append(unit)
                    in_degree[unit] += 1
        return order, consumers, in_degree
    edges: set[tuple[NodeUnit, NodeUnit]] = set()
    for node in nodes:
        unit = units[node]
        for producer in producers[node]:
            source = units.get(producer)
            if source is None or source is unit:
                continue
            key = (source, unit)
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
            supported = supported_memo.get(unit)
            if supported is None:
                supported = supported_memo[unit] = bool(is_supported(unit))
            if supported:
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


def _partition_io(units: Sequence[NodeUnit], graph: ir.Graph,
                  reads: Mapping[ir.Node, Sequence[ir.Value]] | None = None,
                  graph_outputs: frozenset[ir.Value] | set[ir.Value] | None = None,
                  ) -> tuple[tuple[ir.Value, ...], tuple[ir.Value, ...]]:
    """The group's inputs and outputs.  Linear in the group's size: *reads* (from :func:`_reads`) and
    *graph_outputs* are computed once per graph by the caller, not once per group."""
    group = [n for u in units for n in u.nodes]
    members = set(group)
    inputs: dict[ir.Value, None] = {}
    outputs: dict[ir.Value, None] = {}
    if graph_outputs is None:
        graph_outputs = set(graph.outputs)
    for node in group:
        for value in (reads[node] if reads is not None else _outer_inputs(node)):
            if value not in inputs and value.producer() not in members:
                inputs[value] = None
        for value in node.outputs:
            if value in outputs:
                continue
            if value in graph_outputs:
                outputs[value] = None
                continue
            for use in value.uses():
                if use.node not in members:
                    outputs[value] = None
                    break
    return tuple(inputs), tuple(outputs)


def _topological_nodes(graph: ir.Graph, reads: Mapping[ir.Node, Sequence[ir.Value]] | None = None,
                       producers: Mapping[ir.Node, Sequence[ir.Node]] | None = None) -> list[ir.Node]:
    """The graph's nodes in a topological order (the graph itself is left as it is)."""
    nodes = list(producers) if producers is not None else list(graph)  # (producers has them in graph order)
    if producers is None:
        producers = _producers(reads if reads is not None else _reads(nodes))
    pending = dict.fromkeys(nodes, 0)
    users: dict[ir.Node, list[ir.Node]] = {node: [] for node in nodes}
    for node in nodes:
        for producer in producers[node]:  # each once (and only producers in this graph count)
            if producer in pending:
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
    answers: Mapping[str, Mapping[int, Support]] | None = None,
) -> Proposal:
    """Decide, for each backend in priority order, which nodes it takes.  Pure: the model is not changed.

    ``on_error`` turns an exception raised by a backend's rule into an answer (by default it propagates).
    ``answers``: rule answers already known, per backend name (:attr:`Proposal.answers` of an earlier
    proposal of this same model with the same backend objects): those rules are not asked again.
    """
    with _gc_paused():
        return _propose(model, backends, on_error, answers or {})


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause Python's cycle collector while proposing.

    Proposing allocates a few small, acyclic objects per node; with the collector on, each full
    collection walks the whole in-memory model again (a third of the time on a 100k-node graph).
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _propose(model: ir.Model, backends: Sequence[Backend],
             on_error: Callable[[Backend, NodeUnit, Exception], Support] | None,
             answers: Mapping[str, Mapping[int, Support]]) -> Proposal:
    graph = model.graph
    reads = _reads(graph)
    producers = _producers(reads)
    nodes = _topological_nodes(graph, producers=producers)
    graph_outputs = frozenset(graph.outputs)
    order_index = {n: i for i, n in enumerate(nodes)}
    owner: dict[ir.Node, str] = {}
    memos: dict[str, dict[int, Support]] = {}
    per_backend: dict[str, BackendProposal] = {}
    reasons: dict[ir.Node, list[str]] = collections.defaultdict(list)

    for backend in backends:
        ctx = RuleContext(model, backend, graph)
        units = build_node_units(graph, backend.qdq_ops(), nodes)
        ctx.units = units
        known = answers.get(backend.name)
        if known:  # not the placeholders of queries that raised: those are asked again
            ctx._memo.update((key, answer) for key, answer in known.items() if answer is not _CYCLIC)
        memos[backend.name] = ctx._memo
        order, consumers, in_degree = _unit_edges(nodes, units, producers=producers)
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
            owned = next((owner[n] for n in unit.nodes if n in owner), None) if owner else None
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
        for group in wave_groups(order, consumers, in_degree, is_supported):
            inputs, outputs = _partition_io(group, graph, reads, graph_outputs)
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
    return Proposal(nodes, per_backend, placements, memos)
