"""Partition: which nodes a backend claims, grouped as ORT groups them, and which groups are worth their copies.

:func:`mobile_ep.partitioning.propose.propose` (pure: ORT's wave algorithm over the backend's answers) and
:func:`mobile_ep.partitioning.cost.select_partitions` (the cost model, ``--max-partitions``, ``--min-nodes``)
do the work; this pass runs them on a model and keeps what they found for the reports.  The model is not
changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import onnx_ir as ir

from mobile_ep.contract import Backend, NodeUnit, RuleContext, Support, op_label
from mobile_ep.errors import BackendError
from mobile_ep.options import Options
from mobile_ep.partitioning.cost import PartitionCost, select_partitions
from mobile_ep.partitioning.platforms import platform_groups
from mobile_ep.partitioning.propose import BackendProposal, Proposal, graph_index, propose

__all__ = ["PartitionPass", "isolate_faults", "analyze"]

log = logging.getLogger(__name__)

#: Backend failures already warned about (bounded: cleared when it grows large).
_WARNED: set[tuple[str, str, str]] = set()


def isolate_faults(strict: bool) -> Callable[[Backend, NodeUnit, Exception], Support]:
    """What to do when a backend's code raises: cost it only its own claims, or (strict) stop."""

    def on_error(backend: Backend, unit: NodeUnit, exc: Exception) -> Support:
        if len(_WARNED) > 10_000:
            _WARNED.clear()
        where = f"{op_label(unit.target)} node {unit.name!r}"
        message = " ".join(str(exc).split()) or "no message"
        if strict:
            raise BackendError(f"backend {backend.name!r} raised {type(exc).__name__} on {where}: {message}") from exc
        key = (backend.name, where, message)
        if key not in _WARNED:  # one warning per failure, however often the pipeline asks
            _WARNED.add(key)
            log.warning("backend %s raised %s on %s: %s", backend.name, type(exc).__name__, where, message)
        return Support.no(f"{backend.name} failed on this node ({type(exc).__name__}: {message}); left on CPU")

    return on_error


class PartitionPass(ir.passes.PassBase):
    """Propose *backend*'s partitions of the model and judge them; the results stay on the pass.

    An analysis: it changes nothing (onnx_ir's side-effect-only pass: ``in_place``, not ``changes_input``),
    so a pass manager hands the model on as it was.  After a run: ``proposal`` (the backend's
    :class:`BackendProposal`), ``nodes`` (the graph's nodes in topological order) and ``costs`` (one
    :class:`PartitionCost` per partition, ``kept`` or not and why).  With *options* None, the cost model judges
    but drops nothing a user did not ask for.
    """

    @property
    def in_place(self) -> bool:
        return True

    @property
    def changes_input(self) -> bool:
        return False

    def __init__(self, backend: Backend, options: Options | None = None, *, index: Any = None) -> None:
        super().__init__()
        self.backend = backend
        self.options = options or Options()
        self.index = index  # (graph_index of the model it runs on, shared by passes over one unchanged model)
        self.proposal: BackendProposal | None = None
        self.nodes: list[ir.Node] = []
        self.costs: list[PartitionCost] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        options = self.options
        found = propose(model, [self.backend], on_error=isolate_faults(options.strict), index=self.index)
        self.proposal = found.per_backend[self.backend.name]
        self.nodes = found.nodes
        self.costs = select_partitions(self.proposal.partitions, RuleContext(model, self.backend),
                                       self.backend.cost_params(), max_partitions=options.max_partitions,
                                       min_nodes=options.min_nodes, use_cost=options.cost_model)
        return ir.passes.PassResult(model, modified=False)

    def kept_nodes(self) -> set[str]:
        """Names of the nodes in partitions the cost model keeps."""
        assert self.proposal is not None, "run the pass first"
        return {n.name or "" for p, c in zip(self.proposal.partitions, self.costs, strict=True) if c.kept
                for n in p.nodes}

    def rejected_partitions(self) -> list[set[str]]:
        """Names of the nodes of each partition the cost model rejects."""
        assert self.proposal is not None, "run the pass first"
        return [{n.name or "" for n in p.nodes} for p, c in zip(self.proposal.partitions, self.costs, strict=True)
                if not c.kept]


def analyze(model: ir.Model, backends: Sequence[Backend], *, strict: bool = False
            ) -> tuple[list[tuple[BackendProposal, list[ir.Node], list[PartitionCost]]], list[Proposal]]:
    """Each backend alone on *model* (its proposal, the nodes, the costs), and the backends of each platform
    together in priority order, as ORT does with several EPs registered (one proposal per platform with more
    than one backend: :func:`~mobile_ep.partitioning.platforms.platform_groups`)."""
    on_error = isolate_faults(strict)
    index = graph_index(model)  # (the model does not change here: one index for every proposal)
    alone, singles = [], []
    for backend in backends:
        proposal = propose(model, [backend], on_error=on_error, index=index)
        singles.append(proposal)
        found = proposal.per_backend[backend.name]
        costs = select_partitions(found.partitions, RuleContext(model, backend), backend.cost_params())
        alone.append((found, proposal.nodes, costs))
    together = []
    answers = {name: answer for p in singles for name, answer in p.answers.items()}
    for _platform, group in platform_groups(backends):
        if len(group) > 1:  # the rules' answers are those of the runs above: only the grouping is redone
            together.append(propose(model, group, on_error=on_error, answers=answers,
                                    first=singles[list(backends).index(group[0])], index=index))
    return alone, together
