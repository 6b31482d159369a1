"""What ``check`` and ``convert`` report, built from the passes' results: per backend, all together, as JSON.

The text, HTML and JSON forms are all made from these objects (:mod:`mobile_ep.reports.text`,
:mod:`mobile_ep.reports.html`, ``as_dict``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import onnx_ir as ir

from mobile_ep.contract import Backend, op_label
from mobile_ep.partitioning.cost import PartitionCost
from mobile_ep.partitioning.propose import BackendProposal, Proposal
from mobile_ep.reports import nodegraph

if TYPE_CHECKING:
    from mobile_ep import runtime
    from mobile_ep.passes.fuse_cpu import CpuFusion
    from mobile_ep.passes.to_epcontext import CompileResult

__all__ = ["NodeReason", "PartitionReport", "BackendReport", "CombinedReport", "CheckReport", "ConvertReport",
           "backend_report", "combined_report", "suggestions", "dynamic_inputs"]


@dataclasses.dataclass
class NodeReason:
    node: str
    op: str
    reason: str


@dataclasses.dataclass
class PartitionReport:
    nodes: list[str]
    ops: dict[str, int]
    inputs: list[str]
    outputs: list[str]
    #: The cost model's view: FLOPs, boundary bytes, estimated saving, kept or not and why.
    estimate: dict | None = None


@dataclasses.dataclass
class BackendReport:
    backend: str
    version: str
    options: dict[str, str]
    nodes: int
    supported_nodes: int
    partitions: list[PartitionReport]
    unsupported: list[NodeReason]
    verdict: str
    #: Rewrites applied (after convert only).
    rewrites: list[dict] = dataclasses.field(default_factory=list)
    #: What would help, in words.
    suggestions: list[str] = dataclasses.field(default_factory=list)
    #: The graph this report describes, node by node (recorded under ``nodegraph.recording()``, for the
    #: HTML report and ``explain``); not part of the JSON.
    graph: nodegraph.GraphSnapshot | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def coverage(self) -> float:
        return self.supported_nodes / self.nodes if self.nodes else 0.0

    def as_dict(self) -> dict:
        result = {
            "backend": self.backend,
            "version": self.version,
            "options": self.options,
            "nodes": self.nodes,
            "supported_nodes": self.supported_nodes,
            "partitions": [dataclasses.asdict(p) for p in self.partitions],
            "unsupported": [dataclasses.asdict(u) for u in self.unsupported],
            "verdict": self.verdict,
        }
        if self.rewrites:
            result["rewrites"] = self.rewrites
        if self.suggestions:
            result["suggestions"] = self.suggestions
        return result


@dataclasses.dataclass
class CombinedReport:
    """All backends registered together, in priority order (as ORT does with several EPs)."""

    order: list[str]
    placement: dict[str, int]  # backend name (or "cpu") -> number of nodes
    partitions: list[dict]

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class CheckReport:
    model: str
    nodes: int
    backends: dict[str, BackendReport]
    combined: CombinedReport | None = None
    #: The same analysis after ``mobile-ep convert`` (shape fixes, rewrites), per backend.
    after_convert: dict[str, BackendReport] = dataclasses.field(default_factory=dict)
    shape_changes: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    timings: dict[str, float] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict:
        result: dict = {
            "model": self.model,
            "nodes": self.nodes,
            "backends": {name: b.as_dict() for name, b in self.backends.items()},
        }
        if self.combined is not None:
            result["combined"] = self.combined.as_dict()
        if self.after_convert:
            result["after_convert"] = {name: b.as_dict() for name, b in self.after_convert.items()}
        if self.shape_changes:
            result["shape_changes"] = self.shape_changes
        result["timings"] = self.timings
        return result


@dataclasses.dataclass
class ConvertReport:
    model: str
    backend: str
    outputs: dict[str, str]
    check: BackendReport
    verification: list[runtime.Verification]
    #: The same analysis on the original model, as ORT Mobile would see it without mobile-ep.
    before: BackendReport | None = None
    shape_changes: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    #: The CPU-side fusions applied to nodes no partition keeps.
    cpu_fusion: CpuFusion | None = None
    #: ``convert --compile``: the compiled partitions (:class:`mobile_ep.passes.to_epcontext.CompileResult`).
    compiled: CompileResult | None = None

    def as_dict(self) -> dict:
        result = {
            "model": self.model,
            "backend": self.backend,
            "outputs": self.outputs,
            "partitioning": self.check.as_dict(),
        }
        if self.before is not None:
            result["before"] = {
                "nodes": self.before.nodes,
                "supported_nodes": self.before.supported_nodes,
                "partitions": len(self.before.partitions),
                "verdict": self.before.verdict,
            }
        if self.shape_changes:
            result["shape_changes"] = self.shape_changes
        if self.cpu_fusion is not None:
            result["cpu_fusion"] = self.cpu_fusion.as_dict()
        if self.compiled is not None:
            result["compiled"] = self.compiled.as_dict()
        result["verification"] = [v.as_dict() for v in self.verification]
        result["timings"] = self.timings
        return result


def _options_dict(backend: Backend) -> dict[str, str]:
    from mobile_ep.contract.backend import format_option

    if not dataclasses.is_dataclass(backend.options):
        return {}
    return {f.name: format_option(getattr(backend.options, f.name)) for f in dataclasses.fields(backend.options)}


def _reason(node: ir.Node, reason: str) -> str:
    label = op_label(node)
    return reason if reason.startswith(label) else f"{label}: {reason}"


def backend_report(backend: Backend, proposal: BackendProposal, nodes: Sequence[ir.Node],
                   costs: Sequence[PartitionCost] | None = None, model: ir.Model | None = None) -> BackendReport:
    """The report of one backend's proposal on *model* (whose graph is attached while recording for HTML)."""
    partitions = []
    for i, p in enumerate(proposal.partitions):
        ops: dict[str, int] = {}
        for label in map(op_label, p.nodes):
            ops[label] = ops.get(label, 0) + 1
        partitions.append(PartitionReport(
            [n.name or "" for n in p.nodes], dict(sorted(ops.items())),
            [v.name or "" for v in p.inputs if not v.is_initializer()], [v.name or "" for v in p.outputs],
            costs[i].as_dict() if costs is not None else None))
    unsupported = [
        NodeReason(n.name or "", op_label(n), _reason(n, proposal.rejected[n]))
        for n in nodes if n in proposal.rejected
    ]
    report = BackendReport(
        backend=backend.name, version=backend.version, options=_options_dict(backend), nodes=proposal.total_nodes,
        supported_nodes=proposal.supported_nodes, partitions=partitions, unsupported=unsupported,
        verdict=proposal.verdict,
    )
    if model is not None:
        nodegraph.attach(report, model)
    return report


def combined_report(proposal: Proposal) -> CombinedReport:
    placement: dict[str, int] = {name: 0 for name in proposal.per_backend}
    placement["cpu"] = 0
    for p in proposal.placements.values():
        placement[p.backend or "cpu"] += 1
    partitions = [{"backend": p.backend, "nodes": p.node_names} for p in proposal.partitions]
    return CombinedReport(list(proposal.per_backend), placement, partitions)


def dynamic_inputs(model: ir.Model) -> list[str]:
    return [v.name or "" for v in model.graph.inputs
            if not v.is_initializer() and (v.shape is None or any(not isinstance(d, int) for d in v.shape))]


def suggestions(before: BackendReport, after: BackendReport | None, dynamic: Sequence[str]) -> list[str]:
    """Hints for the user; *dynamic*: the model's inputs with dynamic shapes (:func:`dynamic_inputs`)."""
    hints = []
    if dynamic and any("dynamic" in u.reason or "static" in u.reason for u in before.unsupported):
        names = ", ".join(dynamic)
        hints.append(f"inputs with dynamic shapes ({names}) keep nodes off the accelerator: fix them with "
                     f"--shape NAME=D1,D2,... or --dim PARAM=VALUE")
    if after is not None and after.rewrites:
        counts: dict[str, int] = {}
        for r in after.rewrites:
            counts[r["rewrite"]] = counts.get(r["rewrite"], 0) + 1
        done = ", ".join(f"{name} x{n}" for name, n in sorted(counts.items()))
        hints.append(f"mobile-ep convert rewrites nodes the backend cannot take: {done}")
    if after is not None and len(after.partitions) < len(before.partitions):
        hints.append(f"mobile-ep convert: {len(before.partitions)} -> {len(after.partitions)} partitions, "
                     f"{before.supported_nodes}/{before.nodes} -> {after.supported_nodes}/{after.nodes} nodes claimed")
    return hints
