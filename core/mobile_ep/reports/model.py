"""What ``check`` and ``convert`` report, built from the passes' results: per backend, all together, as JSON.

The text, HTML and JSON forms are all made from these objects (:mod:`mobile_ep.reports.text`,
:mod:`mobile_ep.reports.html`, ``as_dict``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import onnx_ir as ir

from mobile_ep.contract import Backend, op_label
from mobile_ep.partitioning.cost import PartitionCost
from mobile_ep.partitioning.platforms import platform_of
from mobile_ep.partitioning.propose import BackendProposal, Proposal
from mobile_ep.passes.function_ops import Whole
from mobile_ep.passes.load import REFUSED_WHOLE
from mobile_ep.reports import nodegraph

if TYPE_CHECKING:
    from mobile_ep import runtime
    from mobile_ep.passes.fuse_cpu import CpuFusion
    from mobile_ep.passes.to_epcontext import CompileResult
    from mobile_ep.reports.interface import InterfaceChange

__all__ = ["NodeReason", "PartitionReport", "BackendReport", "CombinedReport", "CheckReport", "ConvertReport",
           "Cause", "causes", "backend_report", "combined_report", "suggestions", "dynamic_inputs", "suggest_shapes", "name_formulas",
           "still_dynamic"]


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
    #: ONNX function nodes (GroupNormalization, HardSwish, ...) offered whole and refused by a rule of the
    #: backend, with its reason: they are judged as the nodes of their bodies, which onnxruntime inlines.
    inlined: list[NodeReason] = dataclasses.field(default_factory=list)
    #: The ``--shape`` arguments that would fix the model's dynamic inputs (``--shape x=1,3,H,W``), with
    #: placeholders for the sizes only the user knows; empty when no input is dynamic.
    shape_fix: str = ""
    #: ``--const NAME=VALUE`` hints: scalar inputs whose branches or integer math stay on the CPU
    #: (:mod:`mobile_ep.reports.const_hints`); also among the suggestions.
    const_fix: list[str] = dataclasses.field(default_factory=list)
    #: The platform of the backend (``android``, ``ios`` or ``any``: :attr:`mobile_ep.Backend.platform`).
    platform: str = "any"
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
            "platform": self.platform,
        }
        if self.rewrites:
            result["rewrites"] = self.rewrites
        if self.suggestions:
            result["suggestions"] = self.suggestions
        if self.inlined:
            result["inlined"] = [dataclasses.asdict(u) for u in self.inlined]
        if self.unsupported:
            result["causes"] = [c.as_dict() for c in causes(self)]
        return result


@dataclasses.dataclass
class CombinedReport:
    """All backends registered together, in priority order (as ORT does with several EPs)."""

    order: list[str]
    placement: dict[str, int]  # backend name (or "cpu") -> number of nodes
    partitions: list[dict]
    #: The platform of these backends (``android``, ``ios``; ``any`` when none names one).
    platform: str = "any"

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
    #: The backends of each further platform together (``combined`` is the first platform's).
    other_platforms: list[CombinedReport] = dataclasses.field(default_factory=list)
    #: ``against_ep``: each rule backend against the real EP it predicts (:mod:`mobile_ep.reports.against`).
    against_ep: list = dataclasses.field(default_factory=list)

    def as_dict(self) -> dict:
        result: dict = {
            "model": self.model,
            "nodes": self.nodes,
            "backends": {name: b.as_dict() for name, b in self.backends.items()},
        }
        if self.combined is not None:
            result["combined"] = self.combined.as_dict()
        if self.other_platforms:
            result["combined_other_platforms"] = [c.as_dict() for c in self.other_platforms]
        if self.after_convert:
            result["after_convert"] = {name: b.as_dict() for name, b in self.after_convert.items()}
        if self.shape_changes:
            result["shape_changes"] = self.shape_changes
        if self.against_ep:
            result["against_ep"] = [c.as_dict() for c in self.against_ep]
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
    #: What changed in the inputs and outputs the app feeds and reads (:mod:`mobile_ep.reports.interface`).
    interface: list[InterfaceChange] = dataclasses.field(default_factory=list)
    #: The written model's inputs, as the app feeds them (``input float32 [1,512], ...``).
    app_inputs: str = ""

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
        result["interface_changes"] = [c.as_dict() for c in self.interface]
        if self.app_inputs:
            result["app_inputs"] = self.app_inputs
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
    reason = name_formulas(reason)
    return reason if reason.startswith(label) else f"{label}: {reason}"


_BRACKETS = re.compile(r"\[([^\[\]]*)\]")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FUNCTIONS = frozenset({"floor", "ceil", "min", "max", "mod", "abs", "sqrt", "int", "float", "Mod", "Max", "Min",
                        "FloorDiv", "CeilDiv", "Floor", "Ceiling"})


def name_formulas(text: str) -> str:
    """Shapes in *text* with each computed dim (``floor(floor(height/2 - 1/2)/2) + 1``) named by the input dims
    it derives from (``f(height)``): a shape stays one short line however deep the arithmetic."""

    def dims(match: re.Match) -> str:
        parts, depth, start, inner = [], 0, 0, match.group(1)
        for i, char in enumerate(inner):
            depth += char == "("
            depth -= char == ")"
            if char == "," and depth == 0:
                parts.append(inner[start:i])
                start = i + 1
        parts.append(inner[start:])
        named = []
        for part in parts:
            dim = part.strip()
            if _IDENTIFIER.fullmatch(dim) or dim.lstrip("-").isdigit() or dim in ("?", ""):
                named.append(dim)
                continue
            sources = list(dict.fromkeys(n for n in _IDENTIFIER.findall(dim) if n not in _FUNCTIONS))
            named.append(f"f({','.join(sources)})" if sources else "?")
        return "[" + ",".join(named) + "]"

    return _BRACKETS.sub(dims, text) if "[" in text else text


def backend_report(backend: Backend, proposal: BackendProposal, nodes: Sequence[ir.Node],
                   costs: Sequence[PartitionCost] | None = None, model: ir.Model | None = None,
                   whole: Whole | None = None) -> BackendReport:
    """The report of one backend's proposal on *model* (whose graph is attached while recording for HTML);
    *whole*: what was decided about its function nodes (:class:`mobile_ep.passes.load.View`), when it was."""
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
    report.platform = platform_of(backend)
    if model is not None:
        nodegraph.attach(report, model)
        refused = whole.refused if whole is not None else model.meta.get(REFUSED_WHOLE, {})
        report.inlined = [NodeReason(name, op, reasons[backend.name]) for name, op, reasons in refused.values()
                          if backend.name in reasons]
    return report


def combined_report(proposal: Proposal, backends: Sequence[Backend] = ()) -> CombinedReport:
    """The backends of *proposal* together; *backends*: those objects, for their platform."""
    placement: dict[str, int] = {name: 0 for name in proposal.per_backend}
    placement["cpu"] = 0
    for p in proposal.placements.values():
        placement[p.backend or "cpu"] += 1
    partitions = [{"backend": p.backend, "nodes": p.node_names} for p in proposal.partitions]
    named = sorted({platform_of(b) for b in backends if b.name in proposal.per_backend} - {"any"})
    return CombinedReport(list(proposal.per_backend), placement, partitions, named[0] if named else "any")


def dynamic_inputs(model: ir.Model) -> dict[str, list[int | str | None] | None]:
    """The model's inputs with a dynamic shape: name -> dims (an int, a dim parameter's name, or ``None``; the
    dims are ``None`` when the rank is unknown too).  Iterates as the names."""
    result: dict[str, list[int | str | None] | None] = {}
    for v in model.graph.inputs:
        if v.is_initializer() or (v.shape is not None and all(isinstance(d, int) for d in v.shape)):
            continue
        result[v.name or ""] = None if v.shape is None else [
            d if isinstance(d, int) else (d.value if isinstance(d, ir.SymbolicDim) else None) for d in v.shape]
    return result


_PLACEHOLDER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,11}")


def _suggest_dims(dims: Sequence[int | str | None]) -> list[str]:
    """Sizes to try for one input: its static dims as they are, 1 for the batch, and placeholders (``H``,
    ``W``, the dim's own name or ``D<i>``) for the sizes only the user knows."""
    rank = len(dims)
    image = rank == 4 and isinstance(dims[1], int) and dims[1] <= 4
    nhwc = rank == 4 and not image and isinstance(dims[3], int) and dims[3] <= 4
    result = []
    for i, d in enumerate(dims):
        if isinstance(d, int):
            result.append(str(d))
        elif i == 0:
            result.append("1")
        elif image and i in (2, 3):
            result.append("HW"[i - 2])
        elif nhwc and i in (1, 2):
            result.append("HW"[i - 1])
        elif isinstance(d, str) and _PLACEHOLDER.fullmatch(d) and not d.startswith("unk__"):
            result.append(d)
        else:
            result.append(f"D{i}")
    return result


def suggest_shapes(dynamic: Mapping[str, Sequence[int | str | None] | None] | Sequence[str]) -> str:
    """``--shape`` arguments for the dynamic inputs of :func:`dynamic_inputs` (``--shape x=1,3,H,W``).  A dim
    parameter gets one value across inputs: ``batch`` given 1 as one input's first dim is 1 in the others."""
    if not isinstance(dynamic, Mapping):
        return " ".join(f"--shape {name}=D1,D2,..." for name in dynamic)
    suggested = {name: _suggest_dims(dims) for name, dims in dynamic.items() if dims is not None}
    chosen: dict[str, str] = {}  # dim parameter -> the size suggested for it where it was made a number
    for name, sizes in suggested.items():
        for d, size in zip(dynamic[name] or (), sizes, strict=True):
            if isinstance(d, str) and size.isdigit():
                chosen.setdefault(d, size)
    parts = []
    for name, dims in dynamic.items():
        sizes = ",".join(chosen.get(d, s) if isinstance(d, str) else s
                         for d, s in zip(dims, suggested[name], strict=True)) if dims is not None else "D1,D2,..."
        parts.append(f"--shape {name + '=' if len(dynamic) > 1 or name else ''}{sizes}")
    return " ".join(parts)


def still_dynamic(dynamic: Mapping[str, Sequence[int | str | None] | None], shapes: Mapping[str | None, object],
                  dims: Mapping[str, int], consts: Mapping[str, object] = {}
                  ) -> dict[str, Sequence[int | str | None] | None]:
    """The inputs of *dynamic* (:func:`dynamic_inputs`) the user's ``--shape`` (*shapes*), ``--dim`` (*dims*)
    and ``--const`` (*consts*) leave dynamic: hints never ask for what was given."""
    left = {}
    for name, sizes in dynamic.items():
        if name in shapes or name in consts or (None in shapes and len(dynamic) == 1):
            continue
        if sizes is not None and all(isinstance(d, int) or (isinstance(d, str) and d in dims) for d in sizes):
            continue
        left[name] = sizes
    return left


# --------------------------------------------------------------------------------------------------
# Causes: the reasons nodes stay on the CPU, grouped by what would fix them
# --------------------------------------------------------------------------------------------------
_DYNAMIC = re.compile(r"dynamic|unknown shape|no known shape|no shape information|static shape|is not static",
                      re.IGNORECASE)
_NO_RULE = re.compile(r"has no rule for (\S+)")
_SHAPE_TEXT = re.compile(r"\[[^\]]*\]|\([^()]*\?[^()]*\)")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


@dataclasses.dataclass
class Cause:
    """One reason nodes stay on the CPU, however many nodes it applies to.

    ``kind`` is ``"dynamic"`` (dynamic or unknown shapes: fixed with ``--shape``/``--dim``), ``"no_rule"`` (the
    backend has no rule for the op) or ``"rule"`` (a rule's condition, e.g. a dtype, an attribute or a rank).
    Reasons are grouped on their text with shapes and quoted names left out, so one cause is one line whatever
    the symbolic shapes in each node's reason.
    """

    kind: str
    #: The reason in words (the first node's, for a rule's condition).
    text: str
    #: op -> how many nodes of it, most first.
    ops: dict[str, int]
    nodes: list[str]

    def as_dict(self) -> dict:
        return {"kind": self.kind, "text": self.text, "ops": self.ops, "count": len(self.nodes)}


def cause_key(op: str, reason: str) -> tuple[str, str]:
    """(kind, key) of one node's *reason*: nodes with the same key share a cause."""
    text = reason[len(op) + 2:] if reason.startswith(op + ": ") else reason
    if _DYNAMIC.search(text):
        return "dynamic", ""
    if _NO_RULE.search(text):
        return "no_rule", ""
    return "rule", _QUOTED.sub("'…'", _SHAPE_TEXT.sub("[…]", text))


def causes(report: BackendReport) -> list[Cause]:
    """The nodes *report* leaves on the CPU, grouped by cause (most nodes first)."""
    grouped: dict[tuple[str, str], Cause] = {}
    for item in report.unsupported:
        kind, key = cause_key(item.op, item.reason)
        cause = grouped.get((kind, key))
        if cause is None:
            text = item.reason[len(item.op) + 2:] if item.reason.startswith(item.op + ": ") else item.reason
            if kind == "dynamic":
                text = "dynamic input shapes (the sizes are not known before the model runs)"
            elif kind == "no_rule":
                text = f"{report.backend} has no rule for these ops"
            cause = grouped[(kind, key)] = Cause(kind, text, {}, [])
        cause.ops[item.op] = cause.ops.get(item.op, 0) + 1
        cause.nodes.append(item.node)
    for cause in grouped.values():
        cause.ops = dict(sorted(cause.ops.items(), key=lambda kv: (-kv[1], kv[0])))
    return sorted(grouped.values(), key=lambda c: (-len(c.nodes), c.kind, c.text))


def suggestions(before: BackendReport, after: BackendReport | None,
                dynamic: Mapping[str, Sequence[int | str | None] | None] | Sequence[str], *,
                beside: BackendReport | None = None) -> list[str]:
    """Hints for the user; *dynamic*: the model's inputs with dynamic shapes the user left so
    (:func:`still_dynamic`); *beside*: the result the hints are shown with (default: *after*, else *before*).

    Also sets ``before.shape_fix`` (and ``after.shape_fix``) to the suggested ``--shape`` arguments."""
    hints = []
    if dynamic:
        before.shape_fix = suggest_shapes(dynamic)
        if after is not None:
            after.shape_fix = before.shape_fix
    beside = beside or (after if after is not None else before)
    if dynamic and any(cause_key(u.op, u.reason)[0] == "dynamic" for u in beside.unsupported):
        names = ", ".join(dynamic)
        hints.append(f"inputs with dynamic shapes ({names}) keep nodes off the accelerator: fix them with "
                     f"{before.shape_fix} (your sizes for the letters) or --dim PARAM=VALUE")
    if after is not None and after.rewrites:
        counts: dict[str, int] = {}
        for r in after.rewrites:
            counts[r["rewrite"]] = counts.get(r["rewrite"], 0) + 1
        done = ", ".join(f"{name} x{n}" for name, n in sorted(counts.items()))
        hints.append(f"mobile-ep convert rewrites nodes the backend cannot take: {done}")
    for op, reason in dict.fromkeys((u.op, u.reason) for u in before.inlined):
        hints.append(f"{op} is offered whole and refused ({reason}): judged, and written by convert, as its body")
    if after is not None and len(after.partitions) < len(before.partitions):
        hints.append(f"mobile-ep convert: {len(before.partitions)} -> {len(after.partitions)} partitions, "
                     f"{before.supported_nodes}/{before.nodes} -> {after.supported_nodes}/{after.nodes} nodes claimed")
    return hints
