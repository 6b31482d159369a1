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
import functools
import gc
import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import onnx_ir as ir

from mobile_ep.contract import SUPPORTED, Backend, NodeUnit, PartitionView, RuleContext, Support, op_label
from mobile_ep.contract.support import CYCLIC, node_reads, single_units
from mobile_ep.partitioning.context import ProposalContext
from mobile_ep.partitioning.units import build_node_units

__all__ = ["Partition", "Placement", "BackendProposal", "Proposal", "propose", "wave_groups", "verdict", "gc_paused"]

#: Ask a rule with ``signature_memo`` once per node signature (off only to test that it changes no answer).
SIGNATURE_MEMO = True


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
_GRAPH_ATTRIBUTES = (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)


_GRAPH_ATTRIBUTE_SET = frozenset(_GRAPH_ATTRIBUTES)
_is_not_none = functools.partial(operator.is_not, None)
_op_type = operator.attrgetter("op_type")
_domain = operator.attrgetter("domain")
_inputs = operator.attrgetter("inputs")
_outputs = operator.attrgetter("outputs")
_attribute_data = operator.attrgetter("attributes.data")  # (the mapping itself, not the slower UserDict view)
_attribute_type = operator.attrgetter("type")


def _has_subgraphs(node: ir.Node) -> bool:
    for attribute in node.attributes.data.values():  # (the mapping itself, not the slower UserDict view)
        if attribute.type in _GRAPH_ATTRIBUTES:
            return True
    return False


class _GraphIndex:
    """A graph's nodes by number (their position in the graph) with producers and consumers as numbers,
    and a topological order.

    Built once per :func:`propose` in a few linear passes; everything after (units, waves, partition inputs
    and outputs) works on lists of ints instead of mappings keyed by nodes.  Only nodes of this graph count
    as producers: graph inputs, initializers and values made in subgraphs or outer scopes have none.
    """

    __slots__ = ("graph", "graph_nodes", "order", "position", "producers", "in_degree", "consumers", "made_by",
                 "outer_reads", "_has_quantize", "_signatures")

    def __init__(self, graph: ir.Graph) -> None:
        self.graph = graph
        self.graph_nodes = graph_nodes = list(graph)
        # (map/chain keep these loops in C: they run for every node)
        outputs = _gather(_outputs, graph_nodes)
        numbers = itertools.chain.from_iterable(map(itertools.repeat, range(len(graph_nodes)), map(len, outputs)))
        self.made_by = made_by = dict(zip(itertools.chain.from_iterable(outputs), numbers, strict=True))
        # Each node's distinct producers, in the order it first reads them.  Values nothing here makes are dropped.
        producers = _producers(_gather(_inputs, graph_nodes), made_by)
        #: What nodes with subgraphs read, their subgraphs' reads from this scope included (:func:`~mobile_ep.contract.support.node_reads`).
        self.outer_reads: dict[int, tuple[ir.Value, ...]] = {}
        attributes = _gather(_attribute_data, graph_nodes)
        kinds = map(_attribute_type, itertools.chain.from_iterable(map(dict.values, filter(None, attributes))))
        if not _GRAPH_ATTRIBUTE_SET.isdisjoint(kinds):  # (none in most graphs: then no node is looked at)
            for i in [i for i, data in enumerate(attributes) if data]:
                node = graph_nodes[i]
                if _has_subgraphs(node):
                    values = self.outer_reads[i] = tuple(node_reads(node))
                    producers[i] = _producers([values], made_by)[0]
        in_degree, users = _in_degrees(producers)
        order = _kahn(in_degree, users)
        if order is None:
            # A node reading its own output is not an edge (validation reports those); any other cycle is.
            for i, sources in enumerate(producers):
                if i in sources:
                    producers[i] = tuple(j for j in sources if j != i)
            in_degree, users = _in_degrees(producers)
            order = _kahn(in_degree, users)
            if order is None:
                from mobile_ep.errors import ModelError

                stuck = graph_nodes[_stuck(in_degree, users)]
                raise ModelError(f"the graph has a cycle through node {stuck.name!r} ({op_label(stuck)})")
        self.order = order
        self.producers = producers
        self.in_degree = in_degree
        #: Each node's place in ``order``, and its consumers in that order (each consumer once).
        self.position, self.consumers = _ordered_consumers(order, users)
        self._has_quantize: bool | None = None
        self._signatures: tuple[object, list[tuple | None] | None] | None = None  # (see signatures)

    def signatures(self, ctx: ProposalContext) -> list[tuple | None] | None:
        """Every node's signature as *ctx* works them out (``ctx.signatures(nodes)``), made once for all the
        proposals that share this index: a node's signature depends on the node and the model only, when the
        context is a plain proposal context with nothing pending (then its facts are worked out in C, as any
        such context would).  None for another context, or when working them out raised."""
        if (type(ctx) is not ProposalContext or ctx.pending_constants
                or type(ctx).dtype is not RuleContext.dtype or type(ctx).is_constant is not RuleContext.is_constant):
            return None
        key = (id(ctx.model), (ctx.model.ir_version or 0) >= 4)
        if self._signatures is None or self._signatures[0] != key:
            try:
                every = ctx.signatures(self.graph_nodes)
            except Exception:
                every = None
            self._signatures = (key, every)
        return self._signatures[1]

    @property
    def nodes(self) -> list[ir.Node]:
        """The nodes in topological order."""
        return list(map(self.graph_nodes.__getitem__, self.order))

    def has_quantize(self) -> bool:
        if self._has_quantize is None:
            self._has_quantize = "QuantizeLinear" in map(_op_type, self.graph_nodes)
        return self._has_quantize

    def io_many(self, groups: Sequence[Sequence[int]], graph_outputs: frozenset[ir.Value]
                ) -> list[tuple[tuple[ir.Value, ...], tuple[ir.Value, ...]]]:
        """:meth:`io` of each group."""
        return [self.io(members, graph_outputs) for members in groups]

    def io(self, members: Sequence[int], graph_outputs: frozenset[ir.Value]
           ) -> tuple[tuple[ir.Value, ...], tuple[ir.Value, ...]]:
        """Inputs and outputs of the group of nodes *members* (in the group's order).  Linear in its size."""
        nodes = self.graph_nodes
        made_by = self.made_by.get
        node_inputs, node_outputs = _inputs, _outputs
        outer_reads = self.outer_reads
        inside = set(members)
        inside_nodes = set(map(nodes.__getitem__, members))
        inputs: dict[ir.Value, None] = {}
        outputs: dict[ir.Value, None] = {}
        for i in members:
            node = nodes[i]
            for value in (outer_reads.get(i, node_inputs(node)) if outer_reads else node_inputs(node)):
                if value is None or value in inputs:
                    continue
                if made_by(value) not in inside:  # (None, for a value no node here makes, is not either)
                    inputs[value] = None
            for value in node_outputs(node):
                if value in outputs:
                    continue
                if value in graph_outputs:
                    outputs[value] = None
                    continue
                for use in value.uses():
                    if use.node not in inside_nodes:
                        outputs[value] = None
                        break
        return tuple(inputs), tuple(outputs)


def _producers(inputs: Sequence[Sequence[ir.Value | None]], made_by: Mapping[ir.Value, int]
                  ) -> list[tuple[int, ...]]:
    """For each node's inputs, the distinct numbers *made_by* maps them to, in the order first read."""
    get = made_by.get
    return [tuple(filter(_is_not_none, dict.fromkeys(map(get, values)))) for values in inputs]


def _in_degrees(producers: Sequence[Sequence[int]]) -> tuple[list[int], list[list[int]]]:
    """Each node's count of producers, and each node's users (in node order)."""
    pending = [len(p) for p in producers]
    users: list[list[int]] = [[] for _ in producers]
    for i, sources in enumerate(producers):
        for j in sources:
            users[j].append(i)
    return pending, users


def _ordered_consumers(order: Sequence[int], users: Sequence[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Each node's position in *order* (all nodes, once each), and its *users* sorted by position."""
    position = [0] * len(order)
    for k, i in enumerate(order):
        position[i] = k
    key = position.__getitem__
    return position, [u if len(u) < 2 else sorted(u, key=key) for u in users]


def _drain(in_degree: Sequence[int], users: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    """Kahn's algorithm (depth first among ready nodes, graph order first): the nodes placed, in order, and
    each node's count of producers never placed (all zero unless there is a cycle)."""
    pending = list(in_degree)
    ready = [i for i, count in enumerate(pending) if not count]
    ready.reverse()
    result: list[int] = []
    while ready:
        i = ready.pop()
        result.append(i)
        for user in reversed(users[i]):
            pending[user] -= 1
            if not pending[user]:
                ready.append(user)
    return result, pending


def _kahn(in_degree: Sequence[int], users: Sequence[Sequence[int]]) -> list[int] | None:
    """A topological order of nodes given by their in-degrees and users (:func:`_in_degrees`), or ``None``
    if there is a cycle."""
    result, pending = _drain(in_degree, users)
    return result if len(result) == len(pending) else None


def _stuck(in_degree: Sequence[int], users: Sequence[Sequence[int]]) -> int:
    """The first node (in graph order) that :func:`_kahn` cannot place."""
    _, pending = _drain(in_degree, users)
    return next(i for i, count in enumerate(pending) if count > 0)


def _unit_graph(index: _GraphIndex, units: Mapping[ir.Node, NodeUnit]
                ) -> tuple[list[NodeUnit], list[tuple[int, ...]], list[list[int]], list[int]]:
    """Units (QDQ groups) numbered in topological order of their first node: their nodes (by number),
    consumers and in-degrees."""
    graph_nodes = index.graph_nodes
    order: list[NodeUnit] = list(dict.fromkeys(units[graph_nodes[i]] for i in index.order))  # hash by identity
    number = {unit: u for u, unit in enumerate(order)}
    where = dict(zip(graph_nodes, range(len(graph_nodes)), strict=True))
    unit_of = [number[units[node]] for node in graph_nodes]
    unit_nodes = [tuple(where[n] for n in unit.nodes) for unit in order]
    consumers: list[list[int]] = [[] for _ in order]
    in_degree = [0] * len(order)
    edges: set[tuple[int, int]] = set()
    producers = index.producers
    for i in index.order:
        u = unit_of[i]
        for j in producers[i]:
            source = unit_of[j]
            if source == u or (source, u) in edges:
                continue
            edges.add((source, u))
            consumers[source].append(u)
            in_degree[u] += 1
    return order, unit_nodes, consumers, in_degree


def wave_groups(
    order: Sequence[NodeUnit],
    consumers: Mapping[NodeUnit, Sequence[NodeUnit]],
    in_degree: Mapping[NodeUnit, int],
    is_supported: Callable[[NodeUnit], bool],
) -> list[list[NodeUnit]]:
    """ORT's wave algorithm: groups of supported units, none of which can form a cycle when fused."""
    number = {unit: i for i, unit in enumerate(order)}
    groups = _waves(range(len(order)), [[number[c] for c in consumers[u]] for u in order],
                    [in_degree[u] for u in order], lambda i: is_supported(order[i]))
    return [[order[i] for i in group] for group in groups]


def _waves(order: Sequence[int], consumers: Sequence[Sequence[int]], in_degree: Sequence[int],
              is_supported: Callable[[int], bool], fast: tuple | None = None) -> list[list[int]]:
    """:func:`wave_groups` over units numbered 0..n-1 (*order*: all of them, topologically).

    Each wave collects at most one group of supported units; an unsupported unit that consumes a value of
    the current group is deferred to the next wave together with everything behind it.

    *fast*, when given, is ``(signatures, answers, keys, memo, yes)``: a unit ``u`` whose ``signatures[u]`` is
    not None, whose ``keys[u]`` is not in *memo* and for which ``answers.get(signatures[u])`` is *yes* is
    supported without asking *is_supported*, and ``memo[keys[u]]`` is set to *yes*.
    """
    if fast is not None:
        is_supported = _fast_path(is_supported, *fast)
    remaining = list(in_degree)
    queue = collections.deque([u for u in order if not remaining[u]])
    popleft, push = queue.popleft, queue.append
    supported_memo: list[bool | None] = [None] * len(remaining)
    groups: list[list[int]] = []
    while queue:
        group: list[int] = []
        border: set[int] = set()
        deferred: list[int] = []
        while queue:
            unit = popleft()
            supported = supported_memo[unit]
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
                if not remaining[consumer]:
                    push(consumer)
        if group:
            groups.append(group)
        queue.extend(deferred)
    return groups


def _fast_path(ask: Callable[[int], bool], signatures: Sequence[tuple | None], answers: Mapping[tuple, Support],
               keys: Sequence[int], memo: dict[int, Support], yes: Support) -> Callable[[int], bool]:
    def is_supported(u: int) -> bool:
        signature = signatures[u]
        if signature is not None:
            key = keys[u]
            if key not in memo and answers.get(signature) is yes:
                memo[key] = yes
                return True
        return ask(u)

    return is_supported




def _gather(getter: Callable[[object], object], objects: Sequence[object]) -> list:
    """``getter`` of each object."""
    return list(map(getter, objects))




# --------------------------------------------------------------------------------------------------
# Proposal
# --------------------------------------------------------------------------------------------------
def propose(
    model: ir.Model,
    backends: Sequence[Backend],
    *,
    on_error: Callable[[Backend, NodeUnit, Exception], Support] | None = None,
    answers: Mapping[str, Mapping[int, Support]] | None = None,
    signatures: dict | None = None,
    first: Proposal | None = None,
    index: _GraphIndex | None = None,
) -> Proposal:
    """Decide, for each backend in priority order, which nodes it takes.  Pure: the model is not changed.

    ``on_error`` turns an exception raised by a backend's rule into an answer (by default it propagates).
    ``answers``: rule answers already known, per backend name (:attr:`Proposal.answers` of an earlier
    proposal of this same model with the same backend objects): those rules are not asked again.
    ``signatures``: a dict (empty at first) to keep the answers of rules with ``signature_memo`` by node
    signature across proposals, of this model or others (``check`` shares one between a model as is and
    after its rewrites), per backend object, opsets and IR version; it holds on to the backends.
    ``first``: the proposal of this same model by the first of *backends* alone (the same backend object):
    with nothing taken before it, that backend takes what it took there, so its part is taken as it is.
    ``index``: an index of this same model's graph (:func:`graph_index`), not changed since it was made, for
    proposals of one model to share (with the node signatures it keeps); one is made here when not given.
    """
    with gc_paused():
        return _propose(model, backends, on_error, answers or {}, signatures, first, index)


def graph_index(model: ir.Model) -> _GraphIndex:
    """An index of *model*'s graph for :func:`propose`'s *index*: proposals of the model, as long as it does not
    change, can share it (and the node signatures it keeps) instead of each making its own.  It holds on to
    what it keeps until dropped."""
    return _GraphIndex(model.graph)


def _signature_store(signatures: dict | None, backend: Backend, model: ir.Model) -> dict[tuple, Support]:
    """*backend*'s answers by signature in *signatures* for models with *model*'s opsets and IR version
    (a new dict when *signatures* is None)."""
    if signatures is None:
        return {}
    key = (id(backend), tuple(sorted(model.opset_imports.items())), model.ir_version)
    entry = signatures.get(key)
    if entry is None or entry[0] is not backend:  # (the entry keeps its backend alive: its id is not reused)
        entry = signatures[key] = (backend, {})
    return entry[1]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cycle collector while proposing (or costing partitions: :mod:`~mobile_ep.partitioning.cost`).

    Proposing allocates a few small, acyclic objects per node; with the collector on, each full
    collection walks the whole in-memory model again (a third of the time on a 100k-node graph).
    Nests: an inner pause leaves the collector as the outer one had it.
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
             answers: Mapping[str, Mapping[int, Support]], shared: dict | None = None,
             first: Proposal | None = None, index: _GraphIndex | None = None) -> Proposal:
    graph = model.graph
    shared_index = isinstance(index, _GraphIndex) and index.graph is graph
    if not shared_index:
        index = _GraphIndex(graph)
    graph_nodes = index.graph_nodes  # nodes are numbered by their position here
    position = index.position.__getitem__  # ... and ordered by their position in index.order
    graph_outputs = frozenset(graph.outputs)
    #: Which backend took each node (by number), for the backends after it.
    owner: list[str | None] = [None] * len(graph_nodes)
    memos: dict[str, dict[int, Support]] = {}
    per_backend: dict[str, BackendProposal] = {}
    reasons: dict[ir.Node, list[str]] = collections.defaultdict(list)
    per_node_units: list[NodeUnit] | None = None  # one unit per node: the same for every backend

    for backend in backends:
        if first is not None and backend is backends[0] and backend.name in first.per_backend:
            _take_first(first, backend.name, graph_nodes, owner, memos, per_backend, reasons)
            continue
        ctx = ProposalContext(model, backend, graph, graph_nodes)
        qdq_ops = backend.qdq_ops()
        single = True
        if qdq_ops and index.has_quantize():
            units = build_node_units(graph, qdq_ops, index.nodes)
            unit_list, unit_nodes, consumers, in_degree = _unit_graph(index, units)
            order: Sequence[int] = range(len(unit_list))
            single = len(unit_list) == len(graph_nodes) and all(len(members) == 1 for members in unit_nodes)
        if single:  # (a QDQ-aware backend on a graph without QDQ units too): unit i is node i
            if per_node_units is None:
                per_node_units = single_units(graph_nodes)
            unit_list = per_node_units
            units = dict(zip(graph_nodes, unit_list, strict=True))
            unit_nodes = [(i,) for i in range(len(graph_nodes))] if any(owner) else []
            consumers, order, in_degree = index.consumers, index.order, index.in_degree
        ctx.units = units
        memo = ctx.answers
        known = answers.get(backend.name)
        if known:  # not the placeholders of queries that raised: those are asked again
            memo.update((key, answer) for key, answer in known.items() if answer is not CYCLIC)
        memos[backend.name] = memo
        rejected: dict[ir.Node, str] = {}
        try:
            excluded = dict(backend.excluded_nodes(graph, ctx))
        except Exception as exc:
            if on_error is None:
                raise
            # A broken exclusion hook costs the backend all its claims, nothing else.
            answer = on_error(backend, units[graph_nodes[index.order[0]]], exc) if graph_nodes else Support.no(str(exc))
            excluded = dict.fromkeys(index.nodes, answer.reason)
        taken = any(owner)

        # Answers by node signature, for rules whose answer is a function of it (OpRule.signature_memo): when the
        # backend asks its rules the usual way (Backend.supports), and only for single-node units.  "No" answers
        # only when their reason names nothing of the node asked (_names_nothing_of).
        signatures: dict[tuple, Support] | None = None
        if SIGNATURE_MEMO and type(backend).supports is Backend.supports:
            signatures = _signature_store(shared, backend, model)
        # Every node's signature worked out up front (None where the memo does not apply), so that the wave loop
        # answers a node whose signature is known "supported" without calling is_supported.
        fast_signatures = _fast_signatures(graph_nodes, ctx, backend, owner if taken else None, excluded,
                                           index if shared_index else None) \
            if signatures is not None and single else None
        fast = None if fast_signatures is None else (
            fast_signatures, signatures, list(map(id, graph_nodes)), memo, SUPPORTED)

        def is_supported(u: int, backend: Backend = backend, ctx: ProposalContext = ctx, memo: dict = memo,
                         unit_list: list[NodeUnit] = unit_list, unit_nodes: list = unit_nodes, taken: bool = taken,
                         excluded: Mapping[ir.Node, str] = excluded, rejected: dict[ir.Node, str] = rejected,
                         single: bool = single, signatures: dict | None = signatures,
                         fast_signatures: list | None = fast_signatures) -> bool:
            unit = unit_list[u]
            owned = next((owner[i] for i in unit_nodes[u] if owner[i] is not None), None) if taken else None
            if owned is not None:
                reason = f"taken by {owned}, which has priority"
            elif excluded and unit.target in excluded:
                reason = excluded[unit.target]
            else:
                target = unit.target
                key = id(target)
                answer = memo.get(key)
                if answer is None:  # ctx.claims_unit(unit), inlined: it is asked for every unit
                    memo[key] = CYCLIC  # guards rules that look back at this unit
                    try:
                        signature = None
                        if signatures is not None and (single or unit.kind == "single"):
                            # (fast_signatures holds ctx.memo_signature of every node not taken or excluded)
                            signature = ctx.memo_signature(target) if fast_signatures is None else fast_signatures[u]
                        memo[key] = answer = ctx.ask(unit, signature, signatures)  # type: ignore[arg-type]
                    except Exception as exc:
                        if on_error is None:
                            raise
                        answer = on_error(backend, unit, exc)
                if answer is SUPPORTED or answer:
                    return True
                reason = answer.reason or "unsupported"
            if single:
                rejected[unit.target] = reason
            else:
                for node in unit.nodes:
                    rejected[node] = reason
            return False

        partitions: list[Partition] = []
        groups = _waves(order, consumers, in_degree, is_supported, fast)
        member_lists = groups if single else [[i for u in group for i in unit_nodes[u]] for group in groups]
        for group, members, (inputs, outputs) in zip(groups, member_lists, index.io_many(member_lists, graph_outputs),
                                                     strict=True):
            view = PartitionView(backend.name, tuple(map(unit_list.__getitem__, group)), inputs, outputs)
            # (the units' nodes, in the units' order: what view.nodes would work out unit by unit)
            object.__setattr__(view, "_nodes", tuple(map(graph_nodes.__getitem__, members)))
            try:
                verdict_ = backend.accept_partition(view, ctx)
            except Exception as exc:
                if on_error is None:
                    raise
                verdict_ = on_error(backend, unit_list[group[0]], exc)
            if not verdict_:
                reason = f"partition dropped by {backend.name}: {verdict_.reason}"
                for i in members:
                    rejected[graph_nodes[i]] = reason
                continue
            members = sorted(members, key=position)  # the partition's nodes in topological order
            partitions.append(Partition(backend.name, tuple(map(graph_nodes.__getitem__, members)), inputs, outputs))
            for i in members:
                owner[i] = backend.name
        for node, reason in rejected.items():
            reasons[node].append(f"{backend.name}: {reason}")
        per_backend[backend.name] = BackendProposal(backend.name, partitions, rejected, len(graph_nodes))

    nodes = index.nodes
    owners = list(map(owner.__getitem__, index.order))
    if len(backends) == 1:  # a node is either taken or rejected, never both: no joining, no test
        texts: Iterable[str] = map({node: texts[0] for node, texts in reasons.items()}.get, nodes, itertools.repeat(""))
    else:
        texts = ["" if name is not None else "; ".join(reasons.get(node, ()))
                 for node, name in zip(nodes, owners, strict=True)]
    return Proposal(nodes, per_backend, _placements(nodes, owners, texts), memos)


def _take_first(first: Proposal, name: str, graph_nodes: list[ir.Node], owner: list[str | None],
                memos: dict[str, dict[int, Support]], per_backend: dict[str, BackendProposal],
                reasons: dict[ir.Node, list[str]]) -> None:
    """The first backend's part of a proposal, as it proposed alone (*first*): its partitions, its rejections,
    its answers."""
    taken = first.per_backend[name]
    number = dict(zip(graph_nodes, range(len(graph_nodes)), strict=True))
    for partition in taken.partitions:
        for node in partition.nodes:
            owner[number[node]] = name
    for node, reason in taken.rejected.items():
        reasons[node].append(f"{name}: {reason}")
    memos[name] = first.answers.get(name, {})
    per_backend[name] = BackendProposal(name, list(taken.partitions), dict(taken.rejected), taken.total_nodes)


def _fast_signatures(nodes: list[ir.Node], ctx: ProposalContext, backend: Backend, owner: list[str | None] | None,
                     excluded: Mapping[ir.Node, str], index: _GraphIndex | None = None) -> list[tuple | None] | None:
    """Each node's signature where its rule has ``signature_memo`` and the node is neither taken by an earlier
    backend nor excluded, else None; ``None`` altogether if working them out raised (then each node is asked
    on its own, and its error is handled as usual).  *index*: an index of the graph that several proposals share
    (:meth:`_GraphIndex.signatures` keeps every node's signature there for them); without one, only the
    signatures asked for are worked out."""
    try:
        domains = _gather(_domain, nodes)
        ops = _gather(_op_type, nodes)
        lookup = backend.rules.lookup
        memoized = {}
        for domain, op in set(zip(domains, ops, strict=True)):
            rule = lookup(domain, op, ctx.opset(domain))  # (= ctx.node_opset of a node of that domain)
            memoized[domain, op] = rule is not None and bool(rule.signature_memo)
        mask = list(map(memoized.__getitem__, zip(domains, ops, strict=True)))
        if owner is not None:
            mask = [wanted and name is None for wanted, name in zip(mask, owner, strict=True)]
        if excluded:
            mask = [wanted and node not in excluded for wanted, node in zip(mask, nodes, strict=True)]
    except Exception:
        return None
    every = index.signatures(ctx) if index is not None else None
    if every is not None:
        return [signature if wanted else None for signature, wanted in zip(every, mask, strict=True)]
    try:
        return ctx.signatures(nodes, mask)
    except Exception:
        return None


def _placements(nodes: Iterable[ir.Node], owners: Iterable[str | None], texts: Iterable[str]
                ) -> dict[ir.Node, Placement]:
    """``{node: Placement(node, owner, text)}`` in half the time (one per node of the graph).

    A field left at its default is not set on the instance: a dataclass keeps defaults as class attributes,
    so these placements are indistinguishable from ones made by ``Placement(...)``.
    """
    new, set_field = object.__new__, object.__setattr__
    result: dict[ir.Node, Placement] = {}
    for node, owner, text in zip(nodes, owners, texts, strict=True):
        placement = new(Placement)
        set_field(placement, "node", node)
        set_field(placement, "backend", owner)
        if text:
            set_field(placement, "reason", text)
        result[node] = placement
    return result
