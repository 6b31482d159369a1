"""``convert``'s steps for one backend, shared by ``convert`` and ``check``'s after-convert view: legalize and
partition (:meth:`Conversion.plan`, rewrites whose nodes only make partitions the cost model rejects undone),
fuse the CPU part and write the file (:meth:`Conversion.write`), and what the backend takes of the written file
as ORT loads it (:meth:`Conversion.as_loaded`)."""

from __future__ import annotations

import dataclasses
import pathlib

import onnx_ir as ir

from mobile_ep.contract import Backend
from mobile_ep.options import Options
from mobile_ep.partitioning.cost import PartitionCost
from mobile_ep.partitioning.propose import BackendProposal
from mobile_ep.passes import fuse_cpu
from mobile_ep.passes.legalize import LegalizePass
from mobile_ep.passes.partition import PartitionPass

__all__ = ["Conversion", "Found", "legalize_and_partition"]

#: A backend's partition of a model as :func:`mobile_ep.passes.partition.analyze` gives it: the proposal, the
#: nodes, the costs.
Found = tuple[BackendProposal, list[ir.Node], list[PartitionCost]]


@dataclasses.dataclass
class Conversion:
    """``convert``'s steps for one backend, for ``convert`` and ``check``'s after-convert alike: :meth:`plan`
    (legalize, partition), :meth:`write` (fuse the CPU part, write the file), :meth:`as_loaded` (what the
    backend takes of the written file as ORT loads it)."""

    backend: Backend
    options: Options
    model: ir.Model  # (legalized)
    planned: PartitionPass
    rewrites: list[dict]
    fusion: fuse_cpu.CpuFusion | None = None
    target: pathlib.Path | None = None
    work: pathlib.Path | None = None
    by_reference: bool = False  # (the written file is a work copy: see :meth:`write`)
    loaded: tuple[PartitionPass, ir.Model] | None = None
    settled: bool = False  # (see :attr:`reusable`)

    @classmethod
    def plan(cls, model: ir.Model, backend: Backend, options: Options, found: Found | None = None, *,
             settled: bool = False) -> Conversion:
        """*model* legalized for *backend* (:func:`legalize_and_partition`) and partitioned; *found*: the
        backend's partition of *model* as it is, with the cost model's default limits (:func:`analyze`), which
        is the plan when no rewrite applies and *options* set no other limits.  *settled*: *model* is a view a
        session of it written as it is sees again (:attr:`mobile_ep.passes.load.View.settled`)."""
        defaults = Options()
        limits = (options.cost_model, options.max_partitions, options.min_nodes)
        rewriting = options.legalize and (backend.answers_whole_graph or LegalizePass(backend).has_work(model))
        if found is not None and not rewriting and limits == (
                defaults.cost_model, defaults.max_partitions, defaults.min_nodes):
            partition = PartitionPass(backend, options)
            partition.proposal, partition.nodes, partition.costs = found
            return cls(backend, options, model, partition, [], settled=settled)
        return cls(backend, options, *legalize_and_partition(model, backend, options), settled=settled)

    @property
    def unchanged(self) -> bool:
        """Whether the backend claims every node with no rewrite: the model is written as it is (no CPU part)."""
        assert self.planned.proposal is not None
        return not self.rewrites and sum(len(p.nodes) for p in self.planned.proposal.partitions) == len(
            self.model.graph)

    @property
    def reusable(self) -> bool:
        """Whether what the backend takes of the written file is what was planned: the model is :attr:`unchanged`
        and *settled*, a graph ORT's basic level made that a session loading it sees again (only the order of
        the nodes may differ: onnxruntime orders them anew when it loads a file)."""
        return self.settled and self.unchanged

    def write(self, target: pathlib.Path, work: pathlib.Path, *, by_reference: bool = False) -> None:
        """Write *target*, the CPU part fused where that keeps what the backend takes (work files in *work*;
        *by_reference*: see :func:`mobile_ep.passes.fuse_cpu.fuse_and_write`)."""
        self.target, self.work, self.by_reference = target, work, by_reference
        self.fusion, self.loaded = fuse_cpu.fuse_and_write(self.model, self.planned, self.options, target, work,
                                                           by_reference=by_reference)

    def as_loaded(self) -> tuple[PartitionPass, ir.Model]:
        """What the backend takes of the written file after the basic optimizations every session applies,
        and that model; for a :attr:`reusable` model, not written (``check``) or written as it is, what was
        planned."""
        if self.loaded is None:
            if self.reusable and self.fusion is None:
                self.loaded = self.planned, self.model
            else:
                assert self.target is not None and self.work is not None, "write() first"
                self.loaded = fuse_cpu.partition_written(self.target, self.backend,
                                                         self.work / f"{self.target.stem}.written", self.options,
                                                         beside=self.by_reference)
        return self.loaded


def legalize_and_partition(model: ir.Model, backend: Backend, options: Options
                            ) -> tuple[ir.Model, PartitionPass, list[dict]]:
    """Legalize *model* (a copy, if a rewrite applies) for *backend* and partition it; rewrites whose nodes only
    make partitions the cost model rejects are undone (tried again without them).  Returns the model, the
    partition pass (with its results) and the rewrites applied.  For a backend that answers about the whole
    graph: :func:`asking_again`."""
    if backend.answers_whole_graph and options.legalize:
        return asking_again(model, backend, options)
    skip: set[str] = set()
    while True:
        legalize = LegalizePass(backend, skip=skip) if options.legalize else None
        candidate = model.clone() if legalize is not None and legalize.has_work(model) else model
        partition = PartitionPass(backend, options)
        ir.passes.PassManager([p for p in (legalize, partition) if p is not None])(candidate)
        made_by = {n.name: a.node for a in (legalize.applied if legalize else []) for n in a.nodes}
        undo = {made_by[n] for names in partition.rejected_partitions() if names <= made_by.keys() for n in names}
        if not undo or undo <= skip:
            break
        skip |= undo
    return candidate, partition, [a.as_dict() for a in legalize.applied] if legalize else []


def _left(partition: PartitionPass) -> tuple[int, int]:
    """What rewritten graphs are compared by: the nodes the backend leaves on the CPU, and its partitions."""
    assert partition.proposal is not None
    taken = sum(len(p.nodes) for p in partition.proposal.partitions)
    return len(partition.nodes) - taken, len(partition.proposal.partitions)


def asking_again(model: ir.Model, backend: Backend, options: Options) -> tuple[ir.Model, PartitionPass, list[dict]]:
    """Legalize and partition for a backend whose claims are a real EP's answer about the whole graph
    (``Backend.answers_whole_graph``): each of its rewrites, in order, is tried on the nodes the EP leaves on
    the CPU, and the rewritten graph is kept only when the EP, asked about it, leaves fewer nodes on the CPU
    in no more partitions than before (one question of the EP per rewrite that applies)."""
    best = PartitionPass(backend, options)
    best(model)
    applied: list[dict] = []
    for rewrite in backend.rewrites():
        assert best.proposal is not None
        left = frozenset(n.name or "" for n in best.nodes) - {
            n.name or "" for p in best.proposal.partitions for n in p.nodes}
        if not left:
            break
        legalize = LegalizePass(backend, rewrites=(rewrite,), unclaimed=left)
        if not legalize.has_work(model):
            continue
        candidate = model.clone()
        partition = PartitionPass(backend, options)
        ir.passes.PassManager([legalize, partition])(candidate)
        before, after = _left(best), _left(partition)
        if legalize.applied and after[0] < before[0] and after[1] <= before[1]:
            model, best = candidate, partition
            applied += [a.as_dict() for a in legalize.applied]
    return model, best, applied
