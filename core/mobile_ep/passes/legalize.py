"""Backend legalization: rewrite nodes a backend cannot take into equivalent nodes it can.

For every node the backend does not claim, the backend's rewrites for that op are tried in order.  A
rewrite's nodes are built off-graph and checked against the backend's own rules first; they replace the
node only if the backend claims every one of them, so a rewrite never turns a CPU node into other CPU
nodes -- except, for a rewrite marked ``cpu_at_inputs``, nodes reading only graph inputs and constants
(they run before every partition and cannot split one).  What was applied, and why other attempts were not,
is kept for the report.

Those checks ask a rule with ``signature_memo`` once per node signature in a pass, as the partitioner
does: a rewrite applied a thousand times makes the same few nodes a thousand times.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import onnx_ir as ir

from mobile_ep.contract import Backend, RuleContext, Support, op_label
from mobile_ep.contract.rewrite import Builder, Rewrite
from mobile_ep.contract.support import CYCLIC
from mobile_ep.partitioning import propose as partition
from mobile_ep.partitioning.context import ProposalContext

__all__ = ["Applied", "Skipped", "LegalizePass"]


@dataclasses.dataclass(frozen=True)
class Applied:
    rewrite: str
    node: str
    op: str
    into: list[str]
    #: The nodes the rewrite made (not part of the report).
    nodes: tuple[ir.Node, ...] = dataclasses.field(default=(), compare=False, repr=False)

    def as_dict(self) -> dict:
        return {"rewrite": self.rewrite, "node": self.node, "op": self.op, "into": self.into}


@dataclasses.dataclass(frozen=True)
class Skipped:
    rewrite: str
    node: str
    op: str
    reason: str


def _drop_inputs(node: ir.Node) -> None:
    """Drop the uses *node* registered on its inputs, in time linear in their number (``replace_input_with``
    builds the input tuple again each time: a ``Sum`` of 100,000 inputs would take minutes)."""
    inputs = node.inputs
    if len(inputs) < 16:
        for index in range(len(inputs)):
            node.replace_input_with(index, None)
        return
    for index, value in enumerate(inputs):  # what replace_input_with does, onnx_ir's bookkeeping, once
        if value is not None:
            value._remove_usage(node, index)
    node._inputs = ()


def _remove(graph: ir.Graph, node: ir.Node) -> None:
    """``graph.remove(node, safe=True)``, in time linear in the node's inputs."""
    _drop_inputs(node)
    graph.remove(node, safe=True)


def _remove_dead_nodes(graph: ir.Graph) -> None:
    """Remove nodes whose outputs nobody uses (what multi-node rewrites leave behind), last first."""
    for node in reversed(list(graph)):
        if all(not v.uses() and not v.is_graph_output() for v in node.outputs):
            _remove(graph, node)


def _qdq_units(backend: Backend, graph: ir.Graph) -> dict:
    """The graph's QDQ node units for *backend* (none without QuantizeLinear nodes)."""
    qdq_ops = backend.qdq_ops()
    if not qdq_ops or not any(node.op_type == "QuantizeLinear" for node in graph):
        return {}
    from mobile_ep.partitioning.units import build_node_units

    return build_node_units(graph, qdq_ops)


def _detach(nodes: Sequence[ir.Node]) -> None:
    """Forget off-graph nodes: drop the uses they registered on existing values."""
    for node in nodes:
        _drop_inputs(node)


class LegalizePass(ir.passes.InPlacePass):
    """*rewrites*: these instead of the backend's own; *unclaimed*: names of the nodes to take as not claimed
    whatever the rules say (for a backend whose claims are a real EP's answer about the whole graph: the nodes
    the EP left on the CPU), the nodes a rewrite makes being asked of the rules as usual."""

    def __init__(self, backend: Backend, skip: set[str] | frozenset[str] = frozenset(), *,
                 rewrites: Sequence[Rewrite] | None = None, unclaimed: frozenset[str] | None = None) -> None:
        super().__init__()
        self.backend = backend
        #: Names of nodes to leave alone (e.g. where the cost model rejected the result).
        self.skip = set(skip)
        self.rewrites = rewrites
        self.unclaimed = unclaimed
        self.applied: list[Applied] = []
        self.skipped: list[Skipped] = []
        #: The rules' answers by node signature, for the nodes looked at and those rewrites make (None: every
        #: node is asked).
        self._signatures: dict[tuple, Support] | None = (
            {} if partition.SIGNATURE_MEMO and type(backend).supports is Backend.supports else None)

    def _rewrites_by_op(self) -> dict[tuple[str, str], list[Rewrite]]:
        by_op: dict[tuple[str, str], list[Rewrite]] = {}
        for rewrite in self.backend.rewrites() if self.rewrites is None else self.rewrites:
            for op_type in rewrite.op_types:
                by_op.setdefault((rewrite.domain, op_type), []).append(rewrite)
        return by_op

    def has_work(self, model: ir.Model) -> bool:
        """Whether :meth:`call` could change *model*: a node, not skipped and not claimed, that a rewrite
        covering its op matches (or whose match raises).  When not, the pass leaves the model as it is
        (callers need not copy it)."""
        by_op = self._rewrites_by_op()
        graph = model.graph
        ctx = None
        for node in graph:
            candidates = by_op.get(("" if node.domain == "ai.onnx" else node.domain, node.op_type))
            if not candidates or node.name in self.skip:
                continue
            if ctx is None:  # (the model does not change here)
                ctx = ProposalContext(model, self.backend, graph)
                ctx.units = _qdq_units(self.backend, graph)
            if self._claims(ctx, node):
                continue
            for rewrite in candidates:
                try:
                    if rewrite.match(node, ctx):
                        return True
                except Exception:  # call() records the failure: let it run
                    return True
        return False

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        by_op = self._rewrites_by_op()
        if not by_op:
            return ir.passes.PassResult(model, False)
        graph = model.graph
        modified = False
        units = None
        for node in list(graph):
            candidates = by_op.get(("" if node.domain == "ai.onnx" else node.domain, node.op_type))
            if not candidates or node.name in self.skip:
                continue
            ctx = ProposalContext(model, self.backend, graph)  # (one per node: rewrites change the graph)
            units = _qdq_units(self.backend, graph) if units is None else units
            ctx.units = units  # (a node of a QDQ unit is asked about as the unit, as the partitioner asks)
            if self._claims(ctx, node):
                continue
            for rewrite in candidates:
                if self._try(model, graph, node, rewrite, ctx):
                    modified = True
                    units = None
                    break
        if modified:
            _remove_dead_nodes(graph)
        return ir.passes.PassResult(model, modified)

    def _skip(self, rewrite: Rewrite, node: ir.Node, reason: str) -> None:
        self.skipped.append(Skipped(rewrite.name, node.name or "", op_label(node), reason))

    def _try(self, model: ir.Model, graph: ir.Graph, node: ir.Node, rewrite: Rewrite, ctx: RuleContext) -> bool:
        try:
            matched = rewrite.match(node, ctx)
        except Exception as exc:  # a broken rewrite costs only its own application
            self._skip(rewrite, node, f"rewrite check failed: {type(exc).__name__}: {exc}")
            return False
        if not matched:
            self._skip(rewrite, node, matched.reason)
            return False
        builder = Builder(node, rewrite.name)
        try:
            replacements = list(rewrite.replace(node, ctx, builder))
        except Exception as exc:
            _detach(builder.nodes)
            self._skip(rewrite, node, f"rewrite failed: {type(exc).__name__}: {exc}")
            return False
        if len(replacements) != len(node.outputs) or any(
            new is None and (old.uses() or old.is_graph_output())
            for old, new in zip(node.outputs, replacements, strict=True)
        ):
            _detach(builder.nodes)
            self._skip(rewrite, node, "the rewrite does not replace every used output")
            return False
        # (the graph does not change while these are asked: one proposal context serves them all)
        check = ProposalContext(model, self.backend, graph)
        check.pending_constants = set(builder.initializers)
        made = set(builder.initializers)
        for new_node in builder.nodes:
            answer = self._claims(check, new_node)
            if not answer and rewrite.cpu_at_inputs and all(
                    value is None or value in made or value.is_graph_input() or value.const_value is not None
                    for value in new_node.inputs):
                continue  # (on the CPU before every partition)
            if not answer:
                _detach(builder.nodes)
                self._skip(rewrite, node, f"{self.backend.name} would not take the {op_label(new_node)} it makes: "
                                          f"{answer.reason}")
                return False
        self._splice(graph, node, builder, replacements)
        self.applied.append(Applied(rewrite.name, node.name or "", op_label(node),
                                    [op_label(n) for n in builder.nodes], tuple(builder.nodes)))
        return True

    def _claims(self, ctx: ProposalContext, node: ir.Node) -> Support:
        """``ctx.claims(node)``, asked once per node signature where *node*'s rule answers by signature
        (:meth:`ProposalContext.ask`, as the partitioner does)."""
        if self.unclaimed is not None and node.name in self.unclaimed:
            return Support.no("left on the CPU")
        signatures = self._signatures
        signature = None if signatures is None else ctx.memo_signature(node)
        if signature is None:
            return ctx.claims(node)
        memo, key = ctx.answers, id(node)
        answer = memo.get(key)
        if answer is None:  # (RuleContext.claims_unit's memo: the proposal context's would count a read beyond)
            memo[key] = CYCLIC  # guards rules that look back at this node
            memo[key] = answer = ctx.ask(RuleContext.unit_of(ctx, node), signature, signatures)
        return answer

    @staticmethod
    def _splice(graph: ir.Graph, node: ir.Node, builder: Builder, replacements: list[ir.Value | None]) -> None:
        for value in builder.initializers:
            graph.register_initializer(value)
        graph.insert_before(node, builder.nodes)
        for old, new in zip(node.outputs, replacements, strict=True):
            if new is None:
                continue
            if new.type is None:
                new.type = old.type
            if old.is_graph_output():
                # Keep the model's interface: the new value takes over the output's name and shape.
                name = old.name
                old.name = f"{name}/replaced"
                new.name = name
                if old.shape is not None:
                    new.shape = old.shape
            old.replace_all_uses_with(new, replace_graph_outputs=True)
        _remove(graph, node)
