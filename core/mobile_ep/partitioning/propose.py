"""Proposing partitions: ONNX Runtime's wave algorithm, over node units, for several backends.

:func:`propose` is pure: it reads the graph and returns a :class:`Proposal` (which node goes where and
why).  Rewriting the graph from a proposal is a separate pass.

The grouping is ORT's ``CreateSupportedPartitionNodeGroups`` (``partitioning_utils.cc``), a Kahn
topological walk in waves:

- every unit whose producers have all been visited is ready; a wave takes ready units one by one;
- a supported unit joins the wave's group, and its consumers become the group's *border*;
- an unsupported unit on the border consumes a value of the group: it waits for the next wave, and so
  does everything behind it (its consumers are not released).  Any other unsupported unit is visited
  and stays on the CPU;
- when no unit is ready the group is closed, and the deferred units start the next wave.

A group therefore never reaches itself through a node outside it: fusing it into one node makes no
cycle.  The walk is over *units*: a QDQ group (DequantizeLinear -> op -> QuantizeLinear, see
:mod:`~mobile_ep.partitioning.units`) is one unit, so it is never split.  Backends are processed in
priority order; units a backend before took count as unsupported for those after, as ORT does for
execution providers.  Each group is then offered to the backend's ``accept_partition``, which may drop it.

The nodes of a function op's body that onnxruntime inlined (the values between them are named
``_inlfunc_<op>_...``; :data:`INLINED_PREFIX`) are offered to an EP only after the rest: onnxruntime inlines a
function node no EP took and partitions again, and the partitions made before are not reopened.  So the walk runs
twice: the other units first, then the body units, each group of the second walk a partition of its own (seen
with the real QNN EP: a Mish between two Convs it takes is three partitions).  A function node inside an inlined
body (NegativeLogLikelihoodLoss in SoftmaxCrossEntropyLoss's) is inlined one round later again: its body is
walked after the body it was in (:func:`inlining_rounds`).

A backend's rule is asked once per node (the context's memo of answers), and a rule with
:attr:`~mobile_ep.contract.OpRule.signature_memo` once per node *signature*
(:meth:`~mobile_ep.partitioning.context.ProposalContext.ask`): on a big model most nodes share a signature
with another.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import gc
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import TypeVar

import onnx_ir as ir

from mobile_ep.contract import Backend, NodeUnit, PartitionView, Support, op_label
from mobile_ep.contract.support import CYCLIC, node_reads
from mobile_ep.errors import ModelError
from mobile_ep.model_io.protos import function_body_ops
from mobile_ep.partitioning.context import ProposalContext
from mobile_ep.partitioning.units import build_node_units

__all__ = ["Partition", "Placement", "BackendProposal", "Proposal", "propose", "graph_index", "wave_groups",
           "verdict", "gc_paused"]

#: Ask a rule with ``signature_memo`` once per node signature (off only to test that it changes no answer).
SIGNATURE_MEMO = True

OnError = Callable[[Backend, NodeUnit, Exception], Support]
U = TypeVar("U", bound=Hashable)


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
# The graph, indexed
# --------------------------------------------------------------------------------------------------
_GRAPH_ATTRIBUTES = (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)


class _GraphIndex:
    """A graph's nodes numbered by their position in the graph, the edges between them, and a topological
    order.

    Only nodes of this graph count as producers: graph inputs, initializers and values made in subgraphs
    or outer scopes have none.  A node with subgraphs (If, Loop, Scan) depends on whatever its subgraphs
    read from this graph, not only on its own inputs.  A node reading its own output is not an edge
    (validation reports those); any other cycle is an error.
    """

    def __init__(self, graph: ir.Graph) -> None:
        self.graph = graph
        #: The nodes in graph order: a node's number is its position here.
        self.nodes: list[ir.Node] = list(graph)
        #: The number of the node making each value.
        self.made_by = {value: i for i, node in enumerate(self.nodes) for value in node.outputs}
        #: What each node with subgraphs reads, its subgraphs' reads included.
        self.outer_reads: dict[int, tuple[ir.Value, ...]] = {}
        #: Each node's distinct producers, in the order it first reads them.
        self.producers: list[list[int]] = []
        for i, node in enumerate(self.nodes):
            reads: Sequence[ir.Value | None] = node.inputs
            if _has_subgraphs(node):
                reads = self.outer_reads[i] = tuple(node_reads(node))
            sources: list[int] = []
            for value in reads:
                j = self.made_by.get(value)
                if j is not None and j != i and j not in sources:
                    sources.append(j)
            self.producers.append(sources)

        self.in_degree = [len(sources) for sources in self.producers]
        users: list[list[int]] = [[] for _ in self.nodes]
        for i, sources in enumerate(self.producers):
            for j in sources:
                users[j].append(i)
        #: The node numbers in topological order, and each node's place in it.
        self.order = self._topological_order(users)
        self.position = [0] * len(self.order)
        for k, i in enumerate(self.order):
            self.position[i] = k
        #: Each node's consumers (each once), in topological order.
        self.consumers = [sorted(nodes, key=self.position.__getitem__) for nodes in users]
        #: The nodes in topological order.
        self.sorted_nodes = [self.nodes[i] for i in self.order]
        #: Node signatures (:meth:`ProposalContext.signature`) worked out so far: a fact of the unchanged graph,
        #: whichever backend asks, for the proposals that share this index.
        self.signatures: dict[ir.Node, tuple | None] = {}
        self._rounds: dict[int, dict[int, int]] = {}

    def inlining_rounds(self, opset: int) -> dict[int, int]:
        """:func:`inlining_rounds` of the nodes (worked out once per opset)."""
        if opset not in self._rounds:
            self._rounds[opset] = inlining_rounds(self.nodes, opset)
        return self._rounds[opset]

    def _topological_order(self, users: Sequence[Sequence[int]]) -> list[int]:
        """Kahn's algorithm, depth first among the ready nodes (the first in graph order first)."""
        pending = list(self.in_degree)
        ready = [i for i, count in enumerate(pending) if count == 0]
        ready.reverse()
        order: list[int] = []
        while ready:
            i = ready.pop()
            order.append(i)
            for user in reversed(users[i]):
                pending[user] -= 1
                if pending[user] == 0:
                    ready.append(user)
        if len(order) < len(self.nodes):
            stuck = self.nodes[next(i for i, count in enumerate(pending) if count > 0)]
            raise ModelError(f"the graph has a cycle through node {stuck.name!r} ({op_label(stuck)})")
        return order

    def io(self, members: Sequence[int], graph_outputs: frozenset[ir.Value]
           ) -> tuple[tuple[ir.Value, ...], tuple[ir.Value, ...]]:
        """Inputs and outputs of the group of nodes *members* (numbers), in the order the group reads and
        makes them: the values it reads that none of its nodes makes, and the values it makes that a node
        outside it reads or that are graph outputs."""
        inside = set(members)
        inside_nodes = {self.nodes[i] for i in members}
        inputs: dict[ir.Value, None] = {}
        outputs: dict[ir.Value, None] = {}
        for i in members:
            node = self.nodes[i]
            for value in self.outer_reads.get(i, node.inputs):
                if value is not None and self.made_by.get(value) not in inside:
                    inputs[value] = None
            for value in node.outputs:
                if value in graph_outputs or any(use.node not in inside_nodes for use in value.uses()):
                    outputs[value] = None
        return tuple(inputs), tuple(outputs)


def _has_subgraphs(node: ir.Node) -> bool:
    for attribute in node.attributes.values():
        if attribute.type in _GRAPH_ATTRIBUTES:
            return True
    return False


def graph_index(model: ir.Model) -> _GraphIndex:
    """An index of *model*'s graph for :func:`propose`'s *index*: proposals of the model, as long as it does
    not change, can share it instead of each making its own."""
    return _GraphIndex(model.graph)


# --------------------------------------------------------------------------------------------------
# Units and waves
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class _UnitGraph:
    """The graph of node units (QDQ groups, or single nodes), by number."""

    units: list[NodeUnit]
    #: Every unit's number, in topological order.
    order: Sequence[int]
    #: Each unit's node numbers, in the unit's order (DequantizeLinear nodes, target, QuantizeLinear nodes).
    members: list[list[int]]
    #: Each unit's consumer units (each once, in topological order), and its count of producer units.
    consumers: list[list[int]]
    in_degree: list[int]


def _node_graph(index: _GraphIndex) -> _UnitGraph:
    """The unit graph when every unit is one node (a backend without QDQ units, or a graph without
    QuantizeLinear nodes): the node graph itself, numbered as the index numbers nodes."""
    units = [NodeUnit(node) for node in index.nodes]
    return _UnitGraph(units, index.order, [[i] for i in range(len(units))], index.consumers, index.in_degree)


def _unit_graph(index: _GraphIndex, unit_of: Mapping[ir.Node, NodeUnit]) -> _UnitGraph:
    """The units of *unit_of* (each node's unit), numbered in topological order of their first node, and
    the edges between them: one wherever a node of one unit reads a value a node of another makes."""
    units = list(dict.fromkeys(unit_of[node] for node in index.sorted_nodes))
    number = {unit: u for u, unit in enumerate(units)}
    unit_number = [number[unit_of[node]] for node in index.nodes]
    node_number = {node: i for i, node in enumerate(index.nodes)}
    members = [[node_number[node] for node in unit.nodes] for unit in units]
    consumers: list[dict[int, None]] = [{} for _ in units]  # (dicts as ordered sets)
    for i in index.order:
        u = unit_number[i]
        for j in index.producers[i]:
            if unit_number[j] != u:
                consumers[unit_number[j]][u] = None
    in_degree = [0] * len(units)
    for users in consumers:
        for u in users:
            in_degree[u] += 1
    return _UnitGraph(units, range(len(units)), members, [list(users) for users in consumers], in_degree)


def wave_groups(
    order: Sequence[U],
    consumers: Mapping[U, Sequence[U]] | Sequence[Sequence[U]],
    in_degree: Mapping[U, int] | Sequence[int],
    is_supported: Callable[[U], bool],
    on_close: Callable[[], object] | None = None,
) -> list[list[U]]:
    """ORT's wave algorithm (see the module's docstring): the groups of supported units, none of which can
    form a cycle when fused.

    *order* holds every unit in topological order; ``consumers[unit]`` and ``in_degree[unit]`` are its
    consumers (each once) and its number of producers (dicts by unit, or lists when the units are the
    numbers 0 to n-1).  Each unit is asked about once, when the wave reaches it; *on_close* is called
    whenever a group closes (ORT's ``on_group_closed``).
    """
    remaining = {unit: in_degree[unit] for unit in order}
    ready = collections.deque(unit for unit in order if remaining[unit] == 0)
    supported: dict[U, bool] = {}  # (a deferred unit comes round again in the next wave)
    groups: list[list[U]] = []
    while ready:
        group: list[U] = []
        border: set[U] = set()
        deferred: list[U] = []
        while ready:
            unit = ready.popleft()
            if unit not in supported:
                supported[unit] = bool(is_supported(unit))
            if supported[unit]:
                group.append(unit)
                border.update(consumers[unit])
            elif unit in border:
                deferred.append(unit)  # it reads the group's values: it waits for the next wave
                continue
            for consumer in consumers[unit]:
                remaining[consumer] -= 1
                if remaining[consumer] == 0:
                    ready.append(consumer)
        if group:
            groups.append(group)
        if on_close is not None:
            on_close()
        ready.extend(deferred)
    return groups


# --------------------------------------------------------------------------------------------------
# Proposal
# --------------------------------------------------------------------------------------------------
def propose(
    model: ir.Model,
    backends: Sequence[Backend],
    *,
    on_error: OnError | None = None,
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
    signature across proposals, of this model or others, per backend object, opsets and IR version; it
    holds on to the backends.
    ``first``: the proposal of this same model by the first of *backends* alone (the same backend object):
    with nothing taken before it, that backend takes what it took there, so its part is taken as it is.
    ``index``: an index of this same model's graph (:func:`graph_index`), not changed since it was made, for
    proposals of one model to share; one is made here when not given.
    """
    with gc_paused():
        graph = model.graph
        if index is None or index.graph is not graph:
            index = _GraphIndex(graph)
        owner: dict[ir.Node, str] = {}  # which backend took each node, for the backends after it
        per_backend: dict[str, BackendProposal] = {}
        memos: dict[str, dict[int, Support]] = {}
        for backend in backends:
            name = backend.name
            if first is not None and backend is backends[0] and name in first.per_backend:
                alone = first.per_backend[name]
                found = BackendProposal(name, list(alone.partitions), dict(alone.rejected), alone.total_nodes)
                memos[name] = first.answers.get(name, {})
            else:
                by_signature = None
                if SIGNATURE_MEMO and type(backend).supports is Backend.supports:  # (its rules answer)
                    by_signature = _signature_store(signatures, backend, model)
                ctx = ProposalContext(model, backend, graph)
                found = _propose_for(ctx, index, owner, on_error, (answers or {}).get(name), by_signature)
                memos[name] = ctx.answers
            per_backend[name] = found
            for partition in found.partitions:
                for node in partition.nodes:
                    owner[node] = name

        reasons: dict[ir.Node, list[str]] = collections.defaultdict(list)
        for name, found in per_backend.items():
            for node, reason in found.rejected.items():
                reasons[node].append(f"{name}: {reason}")
        placements = {}
        for node in index.sorted_nodes:
            taken_by = owner.get(node)
            reason = "" if taken_by is not None else "; ".join(reasons.get(node, ()))
            placements[node] = Placement(node, taken_by, reason)
        return Proposal(list(index.sorted_nodes), per_backend, placements, memos)


def _propose_for(ctx: ProposalContext, index: _GraphIndex, owner: Mapping[ir.Node, str],
                 on_error: OnError | None, known: Mapping[int, Support] | None,
                 by_signature: dict[tuple, Support] | None) -> BackendProposal:
    """What ``ctx.backend`` takes of the nodes no backend before it took (*owner*): its units, grouped in
    waves (:func:`wave_groups`), each group offered to its ``accept_partition``.  *known*: answers already
    known, by node; *by_signature*: answers by node signature (None: each node is asked)."""
    backend, graph = ctx.backend, ctx.graph
    qdq_ops = backend.qdq_ops()
    if qdq_ops and any(node.op_type == "QuantizeLinear" for node in index.nodes):
        ctx.units = build_node_units(graph, qdq_ops, index.sorted_nodes)
        units = _unit_graph(index, ctx.units)
    else:
        units = _node_graph(index)
        ctx.units = dict(zip(index.nodes, units.units, strict=True))
    if known:  # not the placeholders of queries that raised: those are asked again
        ctx.answers.update((key, answer) for key, answer in known.items() if answer is not CYCLIC)
    rejected: dict[ir.Node, str] = {}
    try:
        excluded = dict(backend.excluded_nodes(graph, ctx))
    except Exception as exc:
        if on_error is None:
            raise
        # A broken exclusion hook costs the backend all its claims, nothing else.
        answer = on_error(backend, ctx.units[index.sorted_nodes[0]], exc) if index.nodes else Support.no(str(exc))
        excluded = dict.fromkeys(index.sorted_nodes, answer.reason)

    def is_supported(u: int) -> bool:
        unit = units.units[u]
        taken_by = next((owner[node] for node in unit.nodes if node in owner), None) if owner else None
        if taken_by is not None:
            reason = f"taken by {taken_by}, which has priority"
        elif unit.target in excluded:
            reason = excluded[unit.target]
        else:
            answer = _ask(ctx, unit, by_signature, on_error, index)
            if answer:
                group_values.update(unit.target.outputs)
                return True
            reason = answer.reason or "unsupported"
        for node in unit.nodes:
            rejected[node] = reason
        return False

    graph_outputs = frozenset(graph.outputs)
    partitions: list[Partition] = []
    group_values = ctx.group_values = set()
    rounds = index.inlining_rounds(ctx.model.opset_imports.get("", 0))
    late = {u: r for u in units.order if (r := max((rounds.get(i, 0) for i in units.members[u]), default=0))} \
        if rounds else {}
    groups: list = []
    explicit = _explicit_in_degree(index, units) if backend.groups_by_explicit_inputs and index.outer_reads else None
    for walk in [0, *sorted(set(late.values()))]:  # (onnxruntime inlines the function nodes no EP took, then
        found = wave_groups(units.order, units.consumers, explicit or units.in_degree,  # partitions their bodies
                            lambda u, walk=walk: late.get(u, 0) == walk and is_supported(u), group_values.clear)
        split = _unfusable(found, index, units) if explicit else None
        if split is not None:  # onnxruntime drops every group of the round
            reason = (f"onnxruntime drops every group {backend.name} proposes in this round: the group of "
                      f"{split.name!r} has a path through the CPU (a subgraph reading an outer value) between its nodes")
            for group in found:
                for u in group:
                    for i in units.members[u]:
                        rejected[index.nodes[i]] = reason
            continue
        groups += found
    ctx.group_values = None
    for group in groups:
        members = [i for u in group for i in units.members[u]]
        inputs, outputs = index.io(members, graph_outputs)
        view = PartitionView(backend.name, tuple(units.units[u] for u in group), inputs, outputs)
        try:
            accepted = backend.accept_partition(view, ctx)
        except Exception as exc:
            if on_error is None:
                raise
            accepted = on_error(backend, units.units[group[0]], exc)
        if not accepted:
            reason = f"partition dropped by {backend.name}: {accepted.reason}"
            for i in members:
                rejected[index.nodes[i]] = reason
            continue
        nodes = tuple(index.nodes[i] for i in sorted(members, key=index.position.__getitem__))
        partitions.append(Partition(backend.name, nodes, inputs, outputs))
    return BackendProposal(backend.name, partitions, rejected, len(index.nodes))


def _explicit_in_degree(index: _GraphIndex, units: _UnitGraph) -> list[int]:
    """Each of *units*' count of producer units counting only the values its nodes read as inputs, not those
    their subgraphs read from the outer graph (``Backend.groups_by_explicit_inputs``).  The consumers stay every
    edge's: a node whose subgraphs read outer values is ready once as many of its producers, of either kind,
    were visited as it has producers of inputs (seen with onnxruntime-qnn 2.7: an If is ready before the value
    its branches read is made)."""
    unit_number = [0] * len(index.nodes)
    for u, members in enumerate(units.members):
        for i in members:
            unit_number[i] = u
    in_degree = [0] * len(units.units)
    for u in units.order:
        sources = {unit_number[j] for i in units.members[u] for value in index.nodes[i].inputs
                   if value is not None and (j := index.made_by.get(value)) is not None}
        sources.discard(u)
        in_degree[u] = len(sources)
    return in_degree


def _unfusable(groups: Sequence[Sequence[int]], index: _GraphIndex, units: _UnitGraph) -> ir.Node | None:
    """The first node of the first of *groups* (of units) that onnxruntime's check splits: the wave algorithm over
    the nodes, every edge counted, with only that group's nodes supported, makes more than one group of them."""
    supported = {u for group in groups for u in group}
    usual = {tuple(group) for group in wave_groups(units.order, units.consumers, units.in_degree, supported.__contains__)}
    for group in groups:
        if tuple(group) in usual:  # (a group of the wave algorithm over every edge passes the check)
            continue
        members = {i for u in group for i in units.members[u]}
        if len(members) > 1 and len(wave_groups(index.order, index.consumers, index.in_degree,
                                                 members.__contains__)) > 1:
            return index.nodes[units.members[group[0]][0]]
    return None


#: How onnxruntime names the values inside a function body it inlined.
INLINED_PREFIX = "_inlfunc_"
#: (fold_constants.INSERTED_CAST_PREFIX: the float32 copy of a float16 value the CPU session makes.)
_COPY_PREFIX = "InsertedPrecisionFreeCast_"


def inlined_name(name: str) -> bool:
    """Whether *name* is a value onnxruntime named inside a function body it inlined (or its float32 copy)."""
    return name.removeprefix(_COPY_PREFIX).startswith(INLINED_PREFIX)


def _bodies(node: ir.Node) -> set[str]:
    """The function ops whose inlined bodies' values *node* reads or makes (``_inlfunc_<op>_...``)."""
    found = set()
    for values in (node.inputs, node.outputs):
        for value in values:
            name = value.name if value is not None else None
            if name and INLINED_PREFIX in name and (name := name.removeprefix(_COPY_PREFIX)).startswith(INLINED_PREFIX):
                op, sep, _ = name[len(INLINED_PREFIX):].partition("_")
                if op and sep:
                    found.add(op)
    return found


def inlining_rounds(nodes: Sequence[ir.Node], opset: int) -> dict[int, int]:
    """The round of inlining in which onnxruntime made each node of an inlined function body (by position in
    *nodes*; the others are not listed): 1 for the body of a node of the file, 2 for the body of a function node
    in such a body, and so on.

    A node reading or making values of two bodies belongs to the inner one: its function node was in the outer
    body, whose op's ONNX function (at *opset*) holds the inner op
    (:func:`mobile_ep.model_io.protos.function_body_ops`).
    """
    touched = {i: ops for i, node in enumerate(nodes) if (ops := _bodies(node))}
    parent: dict[str, str] = {}
    for ops in touched.values():
        if len(ops) > 1:
            for outer in ops:
                for inner in ops - {outer}:
                    if inner not in parent and inner in function_body_ops(outer, opset):
                        parent[inner] = outer

    @functools.cache
    def depth(op: str, seen: frozenset[str] = frozenset()) -> int:
        outer = parent.get(op)
        return 1 if outer is None or outer in seen else 1 + depth(outer, seen | {op})

    return {i: max(depth(op) for op in ops) for i, ops in touched.items()}




def _ask(ctx: ProposalContext, unit: NodeUnit, by_signature: dict[tuple, Support] | None,
         on_error: OnError | None, index: _GraphIndex) -> Support:
    """The backend's answer for *unit*: asked once per node (``ctx.answers``) and, for a single node whose
    rule answers by signature, once per signature in *by_signature*.  A rule that raises gets *on_error*'s
    answer, which is not kept: a later proposal asks again."""
    answers, key = ctx.answers, id(unit.target)
    answer = answers.get(key)
    if answer is not None:
        return answer
    answers[key] = CYCLIC  # what a rule asking back about this unit gets
    try:
        signature = None
        if by_signature is not None and unit.kind == "single":
            signature = ctx.memo_signature(unit.target, index.signatures)
        answer = answers[key] = ctx.ask(unit, signature, by_signature)
    except Exception as exc:
        if on_error is None:
            raise
        answer = on_error(ctx.backend, unit, exc)
    return answer


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
    """Pause Python's cycle collector while proposing.

    Proposing allocates a few small, acyclic objects per node; with the collector on, each full
    collection walks the whole in-memory model again (40% of the time on a 100k-node graph).
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
