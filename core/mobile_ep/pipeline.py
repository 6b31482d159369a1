"""The Python API behind the CLI: ``check`` and ``convert``, returning typed reports.

The pipeline behind both:

1. validate the model (one-line errors);
2. fix shapes (``--shape`` / ``--dim``), if asked;
3. onnxruntime's basic-level optimizations — the graph every ORT session partitions; with static
   shapes its constant folding also removes Shape/Range/Expand sub-graphs;
4. per backend: legalizing rewrites where the backend then claims the result;
5. partitioning (ORT's algorithm) and the cost model (which partitions are worth their copies);
   rewrites that only created partitions the cost model rejects are undone;
6. export (EP-aware ONNX, ORT format with CPU fusions recorded for CPU nodes) and verification.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import pathlib
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

import onnx_ir as ir

from mobile_ep import model_io as mir
from mobile_ep import runtime
from mobile_ep.cli import progress
from mobile_ep.contract.plugins import Plugins, make_plugins
from mobile_ep.contract.rules import Backend, NodeUnit, RuleContext, Support, op_label
from mobile_ep.errors import BackendError, UsageError, VerificationError
from mobile_ep.export import ort_format as export
from mobile_ep.partitioning.cost import PartitionCost, select_partitions
from mobile_ep.partitioning.propose import BackendProposal, Proposal, graph_index, propose
from mobile_ep.passes import FixShapesPass, LegalizePass
from mobile_ep.passes import to_epcontext as compiled_models
from mobile_ep.reports import nodegraph

__all__ = [
    "NodeReason",
    "PartitionReport",
    "BackendReport",
    "CombinedReport",
    "CheckReport",
    "ConvertReport",
    "PipelineOptions",
    "load_for_analysis",
    "resolve_backends",
    "check",
    "convert",
]

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------
# Options and report objects
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PipelineOptions:
    """What ``convert`` (and ``check``'s "after convert" view) does beyond ORT's own optimizations."""

    #: Input shapes by input name (``None``: the model's only input).
    shapes: Mapping[str | None, Sequence[int]] = dataclasses.field(default_factory=dict)
    #: Values of named symbolic dims.
    dims: Mapping[str, int] = dataclasses.field(default_factory=dict)
    #: Apply the backend's legalizing rewrites.
    legalize: bool = True
    #: Judge partitions with the cost model.
    cost_model: bool = True
    #: Keep at most this many partitions (by estimated saving), as TFLite's delegates do.
    max_partitions: int | None = None
    #: Drop partitions with fewer nodes.
    min_nodes: int | None = None
    #: Apply onnxruntime's full optimizations (fusions) to the nodes no partition keeps.
    fuse_cpu: bool = True

    @property
    def fixes_shapes(self) -> bool:
        return bool(self.shapes or self.dims)


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
    cpu_fusion: export.CpuFusion | None = None
    #: ``convert --compile``: the compiled partitions (:class:`mobile_ep.passes.to_epcontext.CompileResult`).
    compiled: compiled_models.CompileResult | None = None

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


# --------------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------------
class _Timer:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, step: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            with progress.step(step):
                yield
        finally:
            self.timings[step] = round(self.timings.get(step, 0.0) + time.perf_counter() - start, 4)


def _without_cycle_collection(func: Callable) -> Callable:
    """Run *func* with Python's cycle collector paused (resumed after it, as it was).

    check and convert build a few IR models and drop them at the end; meanwhile every full collection
    would walk all of them again (15-30% of a check's time on the light_* models).  What they leave as
    garbage is collected after they return.
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with mir._gc_paused():
            return func(*args, **kwargs)

    return wrapper


def _optimized_path(model_path: str | os.PathLike, workdir: str | os.PathLike, options: PipelineOptions | None,
                    proto: object | None = None, *, weights: bool = True) -> tuple[pathlib.Path, dict[str, list[str]]]:
    """Validate, fix shapes if asked, and write the basic-optimized model into *workdir*.

    *proto*: the file as :func:`mobile_ep.model_io.read_proto` just returned it (not parsed again).  *weights*
    False: the large weights are not written (:func:`mobile_ep.model_io.ort_optimized`); :func:`mobile_ep.model_io.load`
    reads them on demand.
    """
    path = pathlib.Path(model_path)
    mir.validate(path, proto)
    changes: dict[str, list[str]] = {}
    source = path
    if options is not None and options.fixes_shapes:
        model = mir.load(path, check=False)
        fix = FixShapesPass(options.shapes, options.dims)
        fix(model)
        changes = {name: list(change) for name, change in fix.changes.items()}
        fixed_dir = pathlib.Path(workdir) / "fixed"
        fixed_dir.mkdir(exist_ok=True)
        source = mir.save(model, fixed_dir / "fixed.onnx")
    out_dir = pathlib.Path(workdir) / ("shaped" if source != path else "asis")
    out_dir.mkdir(exist_ok=True)
    return mir.ort_optimized(source, out_dir, level="basic", inspected=source == path, weights=weights), changes


def load_for_analysis(model_path: str | os.PathLike, workdir: str | os.PathLike,
                      options: PipelineOptions | None = None) -> ir.Model:
    """Validate the model, then load it as an ORT session sees it after basic-level optimization.

    Weights under 1 MB are read into memory; larger ones stay memory-mapped from *workdir*, which must
    outlive any reading of their values.
    """
    optimized, _ = _optimized_path(model_path, workdir, options)
    return mir.inline_small_weights(mir.load(optimized, check=False))


def resolve_backends(
    names: Sequence[str] | None,
    options: Mapping[str, Mapping[str, str]] | None = None,
    plugins: Plugins | None = None,
) -> list[Backend]:
    """Backends by name (all installed ones if *names* is empty), configured with per-backend options."""
    plugins = plugins or make_plugins()
    available = plugins.backends()
    if not names:
        if not available:
            raise BackendError("no backends are installed (install mobile-ep-nnapi or mobile-ep-coreml)")
        names = list(available)
    options = dict(options or {})
    unknown_targets = set(options) - set(names)
    if unknown_targets:
        raise UsageError(f"options given for backend(s) not selected: {', '.join(sorted(unknown_targets))}")
    backends = []
    seen = set()
    for name in names:
        if name in seen:
            raise UsageError(f"backend {name!r} given twice")
        seen.add(name)
        backends.append(plugins.backend(name).configure(options.get(name, {})))
    return backends


def _options_dict(backend: Backend) -> dict[str, str]:
    from mobile_ep.contract.rules import _format_option

    if not dataclasses.is_dataclass(backend.options):
        return {}
    return {f.name: _format_option(getattr(backend.options, f.name)) for f in dataclasses.fields(backend.options)}


def _reason(node: ir.Node, reason: str) -> str:
    label = op_label(node)
    return reason if reason.startswith(label) else f"{label}: {reason}"


def backend_report(backend: Backend, proposal: BackendProposal, nodes: Sequence[ir.Node],
                   costs: Sequence[PartitionCost] | None = None) -> BackendReport:
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
    return BackendReport(
        backend=backend.name, version=backend.version, options=_options_dict(backend), nodes=proposal.total_nodes,
        supported_nodes=proposal.supported_nodes, partitions=partitions, unsupported=unsupported,
        verdict=proposal.verdict,
    )


def _combined(proposal: Proposal) -> CombinedReport:
    placement: dict[str, int] = {name: 0 for name in proposal.per_backend}
    placement["cpu"] = 0
    for p in proposal.placements.values():
        placement[p.backend or "cpu"] += 1
    partitions = [{"backend": p.backend, "nodes": p.node_names} for p in proposal.partitions]
    return CombinedReport(list(proposal.per_backend), placement, partitions)


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


def analyze(model: ir.Model, backends: Sequence[Backend], *, strict: bool = False,
            proposals: dict[str, Proposal] | None = None,
            signatures: dict | None = None) -> tuple[dict[str, BackendReport], CombinedReport | None]:
    """Each backend alone on *model*, and all of them together in priority order.

    *proposals*, if given, receives each backend's own proposal (for :func:`_plan` to reuse); *signatures*:
    answers by node signature to share with later proposals (:func:`mobile_ep.partitioning.propose.propose`).
    """
    on_error = isolate_faults(strict)
    reports = {}
    singles = []
    index = graph_index(model)  # (the model does not change here: one index for every proposal, dropped after)
    for backend in backends:
        proposal = propose(model, [backend], on_error=on_error, signatures=signatures, index=index)
        singles.append(proposal)
        if proposals is not None:
            proposals[backend.name] = proposal
        bp = proposal.per_backend[backend.name]
        costs = select_partitions(bp.partitions, RuleContext(model, backend), backend.cost_params())
        reports[backend.name] = backend_report(backend, bp, proposal.nodes, costs)
    combined = None
    if len(backends) > 1:  # the rules' answers are those of the runs above: only the partitioning is redone
        combined = _combined(propose(model, backends, on_error=on_error, answers={
            name: answer for p in singles for name, answer in p.answers.items()}, first=singles[0], index=index))
    return reports, combined


def _dynamic_inputs(model: ir.Model) -> list[str]:
    return [v.name or "" for v in model.graph.inputs
            if not v.is_initializer() and (v.shape is None or any(not isinstance(d, int) for d in v.shape))]


def _suggestions(before: BackendReport, after: BackendReport | None, dynamic: Sequence[str]) -> list[str]:
    """Hints for the user; *dynamic*: the model's inputs with dynamic shapes (:func:`_dynamic_inputs`)."""
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


@dataclasses.dataclass
class _Plan:
    model: ir.Model
    report: BackendReport


def _fresh_copy(optimized: pathlib.Path, source: ir.Model | None) -> ir.Model:
    """A model to rewrite: a copy of *source* (the model loaded from *optimized*), or the file read again."""
    if source is not None:
        try:
            with mir._gc_paused():  # a new model, no garbage: the collector would only walk it
                return source.clone()  # weights are shared, never copied
        except Exception as exc:  # e.g. nodes out of topological order: read the file again
            log.debug("cannot copy the loaded model (%s); reading %s again", exc, optimized)
    return mir.load(optimized, check=False)


def _plan(optimized: pathlib.Path, backend: Backend, options: PipelineOptions, strict: bool,
          source: ir.Model | None = None, reuse: Proposal | None = None, share: bool = False,
          consume: bool = False, defer: bool = False, has_work: bool = False,
          signatures: dict | None = None) -> _Plan | None:
    """Legalize for *backend*, partition, judge partitions; undo rewrites that only made bad partitions.

    *source*: the model already loaded from *optimized* and not changed since; each attempt then works on a
    copy of it instead of reading and shape-inferring the file again.  *reuse*: *source*'s proposal for
    *backend* alone, taken as it is when no rewrite applies (the model is then unchanged).  *share*: the
    caller will not change the returned model, so *source* itself is used when no rewrite can apply.
    *consume*: the caller no longer needs *source*: the first attempt rewrites it in place (no copy).
    *defer*: return None instead of copying *source* (the caller plans it later, maybe consuming it).
    *has_work*: a deferred call just found that legalizing *source* changes it (the first attempt does not
    ask again).  *signatures*: rule answers by node signature, shared with earlier proposals (of *source*).
    """
    on_error = isolate_faults(strict)
    skip: set[str] = set()
    for attempt in range(2):
        legal = LegalizePass(backend, skip=skip) if options.legalize else None
        if share and source is not None and not (has_work and attempt == 0) and (
                legal is None or not legal.has_work(source)):
            model = source  # nothing will change it
        elif defer and not consume and source is not None:
            return None
        elif consume and source is not None:
            model, source, reuse = source, None, None  # changed in place: later attempts read the file again
        else:
            model = _fresh_copy(optimized, source)
        if legal is not None and model is not source:
            legal(model)
        if reuse is not None and source is not None and not (legal is not None and legal.applied):
            proposal = reuse
        else:
            proposal = propose(model, [backend], on_error=on_error, signatures=signatures)
        bp = proposal.per_backend[backend.name]
        ctx = RuleContext(model, backend)
        costs = select_partitions(bp.partitions, ctx, backend.cost_params(), max_partitions=options.max_partitions,
                                  min_nodes=options.min_nodes, use_cost=options.cost_model)
        produced = {n.name: a.node for a in (legal.applied if legal else []) for n in a.nodes}
        undo: set[str] = set()
        for p, c in zip(bp.partitions, costs, strict=True):  # rejected partitions made only by rewrites
            if not c.kept and all(n.name in produced for n in p.nodes):
                undo.update(produced[n.name] for n in p.nodes)
        if not undo or undo <= skip:
            break
        skip |= undo
    report = backend_report(backend, bp, proposal.nodes, costs)
    if legal is not None:
        report.rewrites = [a.as_dict() for a in legal.applied]
    nodegraph.attach(report, model)
    return _Plan(model, report)


# --------------------------------------------------------------------------------------------------
# check
# --------------------------------------------------------------------------------------------------
@_without_cycle_collection
def check(
    model_path: str | os.PathLike,
    backends: Sequence[str] | None = None,
    *,
    options: Mapping[str, Mapping[str, str]] | None = None,
    plugins: Plugins | None = None,
    strict: bool = False,
    pipeline: PipelineOptions | None = None,
    after_convert: bool = True,
) -> CheckReport:
    """What ORT Mobile does with the model today, per backend, and what it would do after ``convert``."""
    timer = _Timer()
    pipeline = pipeline or PipelineOptions()
    proto = mir.read_proto(model_path)  # a bad model is reported before anything else
    selected = resolve_backends(backends, options, plugins)
    with tempfile.TemporaryDirectory(prefix="mobile-ep-") as workdir:
        with timer("load"):
            as_is_path, _ = _optimized_path(model_path, workdir, None, proto, weights=False)
            if not pipeline.fixes_shapes:
                del proto  # the optimized model is what is read from now on
                proto = None
            model = mir.load(as_is_path, check=False)
            node_count = len(model.graph)
        proposals: dict[str, Proposal] = {}
        signatures: dict = {}  # rewritten models are asked again: most of their nodes are as they were
        with timer("partition"):
            reports, combined = analyze(model, selected, strict=strict, proposals=proposals, signatures=signatures)
        for backend_name in reports:
            nodegraph.attach(reports[backend_name], model)
        after: dict[str, BackendReport] = {}
        changes: dict[str, list[str]] = {}
        if after_convert:
            with timer("after_convert"):
                if pipeline.fixes_shapes:
                    optimized, changes = _optimized_path(model_path, workdir, pipeline, proto, weights=False)
                    for backend in selected:
                        after[backend.name] = _plan(optimized, backend, pipeline, strict,
                                                    signatures=signatures).report
                else:  # the same graph as the analysis above: start from it instead of loading it again
                    dynamic = _dynamic_inputs(model)  # all that is read of *model* once a plan may change it
                    plans: dict[str, _Plan | None] = {}
                    for backend in selected:  # those that leave *model* as it is first ...
                        plans[backend.name] = _plan(as_is_path, backend, pipeline, strict, source=model,
                                                    reuse=proposals[backend.name], share=True, defer=True,
                                                    signatures=signatures)
                    rewriting = [backend for backend in selected if plans[backend.name] is None]
                    for i, backend in enumerate(rewriting):  # ... then those that rewrite it: the last in place
                        plans[backend.name] = _plan(as_is_path, backend, pipeline, strict, source=model,
                                                    reuse=proposals[backend.name], share=True,
                                                    consume=i == len(rewriting) - 1, has_work=True,
                                                    signatures=signatures)
                    after = {name: plan.report for name, plan in plans.items() if plan is not None}
        if pipeline.fixes_shapes or not after_convert:
            dynamic = _dynamic_inputs(model)
        for backend in selected:
            reports[backend.name].suggestions = _suggestions(reports[backend.name], after.get(backend.name), dynamic)
    return CheckReport(str(model_path), node_count, reports, combined, after, changes, timer.timings)


# --------------------------------------------------------------------------------------------------
# convert
# --------------------------------------------------------------------------------------------------
def _output_paths(model_path: pathlib.Path, backend: str, out_dir: pathlib.Path) -> dict[str, pathlib.Path]:
    stem = model_path.name[:-5] if model_path.name.endswith(".onnx") else model_path.stem
    return {
        "onnx": out_dir / f"{stem}.{backend}.onnx",
        "ort": out_dir / f"{stem}.{backend}.ort",
        "report": out_dir / "report.json",
    }


@_without_cycle_collection
def convert(
    model_path: str | os.PathLike,
    backend: str,
    output_dir: str | os.PathLike = "out",
    *,
    options: Mapping[str, Mapping[str, str]] | None = None,
    plugins: Plugins | None = None,
    verify: bool = True,
    seed: int = 0,
    strict: bool = False,
    pipeline: PipelineOptions | None = None,
    compile: bool = False,
) -> ConvertReport:
    """Write the EP-aware model (ONNX and ORT format) and ``report.json`` into *output_dir*.

    With *verify* (the default) the original and both outputs run in onnxruntime on the same generated
    inputs; a mismatch raises :class:`VerificationError` (the files and the report are kept for
    inspection).

    With *compile* the backend (which must implement the compile contract) also lowers the partitions
    of the written model: ``<model>.<ep>.compiled.onnx`` (EPContext nodes, :mod:`mobile_ep.passes.to_epcontext`), the
    same split for an app in ``<model>.<ep>.compiled/`` and the runtime adapter's sources in ``adapter/``;
    verification then also runs the compiled model (onnxruntime + the backend's emulator).
    """
    timer = _Timer()
    pipeline = pipeline or PipelineOptions()
    source = pathlib.Path(model_path)
    mir.read_proto(source)
    (selected,) = resolve_backends([backend], options, plugins)
    out_dir = pathlib.Path(output_dir)
    paths = _output_paths(source, selected.name, out_dir)
    resolved_source = source.resolve() if source.exists() else source
    for p in paths.values():
        if p.exists() and p.resolve() == resolved_source:
            raise UsageError(f"output {p} would overwrite the input model; choose another --output folder")
    with tempfile.TemporaryDirectory(prefix="mobile-ep-") as workdir:
        with timer("load"):
            as_is, _ = _optimized_path(source, workdir, None)
            optimized, changes = _optimized_path(source, workdir, pipeline) if pipeline.fixes_shapes else (as_is, {})
        with timer("partition"):
            before_model = mir.load(as_is, check=False)
            before_proposal = propose(before_model, [selected], on_error=isolate_faults(strict))
            before = backend_report(selected, before_proposal.per_backend[selected.name], list(before_model.graph))
            nodegraph.attach(before, before_model)
            dynamic = _dynamic_inputs(before_model)
            named_shapes = _named_shapes(pipeline, before_model)
            if pipeline.fixes_shapes:
                plan = _plan(optimized, selected, pipeline, strict)
            else:  # the same graph as "before": start from it (and rewrite it in place) instead of reading it again
                plan = _plan(optimized, selected, pipeline, strict, source=before_model, reuse=before_proposal,
                             share=True, consume=True)
                del before_model
        out_dir.mkdir(parents=True, exist_ok=True)
        ort_job = _Background()

        def start_ort(onnx_path: pathlib.Path) -> None:
            """The .onnx is final: onnxruntime converts it to ORT format while we analyze it (2 cores)."""
            if mir.ort_format_fits(onnx_path):
                ort_job.start(export.write_ort, onnx_path, paths["ort"])

        try:
            with timer("export_onnx"):
                fusion, written = _export_onnx(plan, selected, pipeline, paths["onnx"], pathlib.Path(workdir),
                                               strict, on_final=start_ort)
            compile_result = None
            if compile:
                with timer("compile"):
                    compile_result = _compile(source, selected, paths, out_dir, pathlib.Path(workdir), pipeline,
                                              strict)
            with timer("export_ort"):
                if ort_job.started:
                    ort_job.result()
                else:  # flatbuffers cannot hold 2 GB: the .onnx (with external data) is the deliverable
                    log.warning("%s: weights too large for ORT format (2 GB limit); no .ort written", source)
                    del paths["ort"]
        finally:
            ort_job.wait()
    report = written
    report.rewrites = plan.report.rewrites
    report.suggestions = _suggestions(before, report, dynamic)
    verification: list[runtime.Verification] = []
    if verify:
        with timer("verify"):
            verification = runtime.verify(source, [p for k, p in paths.items() if k in ("onnx", "ort", "compiled")],
                                          backends={selected.name: selected}, seed=seed,
                                          dims=pipeline.dims, shapes=named_shapes)
    result = ConvertReport(str(source), selected.name, {k: str(v) for k, v in paths.items()}, report,
                           verification, before, changes, timer.timings, fusion,
                           compiled=compile_result)
    with mir.atomic_path(paths["report"]) as tmp:
        tmp.write_text(json.dumps(result.as_dict(), indent=2) + "\n")
    failed = [v for v in verification if not v.ok]
    if failed:
        worst = max((o for v in failed for o in v.outputs if not o.ok), key=lambda o: o.max_abs)
        raise VerificationError(
            f"{failed[0].candidate} differs from the original: output {worst.name!r} max abs error "
            f"{worst.max_abs:.3g}{' (' + worst.note + ')' if worst.note else ''}; see {paths['report']}"
        )
    return result


class _Background:
    """One function run on a thread (onnxruntime releases the GIL while it builds a session)."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._outcome: tuple[bool, object] | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self, func: Callable, *args) -> None:
        def run() -> None:
            try:
                self._outcome = (True, func(*args))
            except BaseException as exc:  # handed to the caller by result()
                self._outcome = (False, exc)

        self._thread = threading.Thread(target=run, name="mobile-ep-background", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def result(self) -> object:
        self.wait()
        assert self._outcome is not None
        ok, value = self._outcome
        if not ok:
            raise value  # type: ignore[misc]
        return value


def _export_onnx(plan: _Plan, backend: Backend, pipeline: PipelineOptions, target: pathlib.Path,
                 workdir: pathlib.Path, strict: bool, on_final: Callable[[pathlib.Path], None] = lambda path: None
                 ) -> tuple[export.CpuFusion | None, BackendReport]:
    """Write the EP-aware model and predict what the EP does with it, as written.

    With ``fuse_cpu``, the CPU part gets onnxruntime's full optimizations.  First try: every node outside
    the partitions the cost model keeps (fusing a rejected partition's nodes can make them unclaimable,
    which realizes the cost model's decision on ORT's EP).  If that would cost a kept partition a node or
    add partitions, second try: only the nodes no partition holds.  Else the model is written unfused.
    The returned report always describes the model actually written.  *on_final* is called with *target*
    as soon as its content is final.
    """
    all_claimed = {name for r in plan.report.partitions for name in r.nodes}
    kept = {name for r in plan.report.partitions if r.estimate is None or r.estimate.get("kept", True)
            for name in r.nodes}
    total = len(list(plan.model.graph))
    if not pipeline.fuse_cpu or len(all_claimed) == total:
        export.write_onnx(plan.model, target)
        on_final(target)
        return None, _written_report(target, backend, workdir / "written", strict)
    unfused = workdir / "unfused.onnx"
    export.write_onnx(plan.model, unfused)
    attempts = [kept, all_claimed] if kept != all_claimed else [all_claimed]
    for attempt, keep in enumerate(attempts):
        fusion = export.fuse_cpu_nodes(unfused, keep, target, workdir)
        if fusion is None:
            continue
        written = _written_report(target, backend, workdir / f"fused{attempt}", strict)
        claimed = {n for p in written.partitions for n in p.nodes}
        if keep <= claimed and len(written.partitions) <= len(plan.report.partitions):
            on_final(target)
            return fusion, written
        log.info("CPU fusion of %d nodes would change what %s takes; trying less", total - len(keep), backend.name)
    export.write_onnx(mir.load(unfused, check=False), target)
    on_final(target)
    return None, _written_report(target, backend, workdir / "written", strict)


def _written_report(path: pathlib.Path, backend: Backend, workdir: pathlib.Path, strict: bool) -> BackendReport:
    """The backend's view of a written model, after the basic optimizations every ORT session applies
    (whose weights are not written again: analysis seldom reads them, see :func:`mobile_ep.model_io.ort_optimized`)."""
    workdir.mkdir(parents=True, exist_ok=True)
    model = mir.load(mir.ort_optimized(path, workdir, inspected=True, weights=False), check=False)  # our own file
    proposal = propose(model, [backend], on_error=isolate_faults(strict))
    bp = proposal.per_backend[backend.name]
    costs = select_partitions(bp.partitions, RuleContext(model, backend), backend.cost_params())
    report = backend_report(backend, bp, proposal.nodes, costs)
    nodegraph.attach(report, model)
    return report


def _compile(source: pathlib.Path, backend: Backend, paths: dict[str, pathlib.Path], out_dir: pathlib.Path,
             workdir: pathlib.Path, pipeline: PipelineOptions, strict: bool) -> compiled_models.CompileResult:
    """``convert --compile``: the compiled-partition model, its app bundle and the runtime adapter."""
    from mobile_ep.contract.compile import is_compiling

    if not is_compiling(backend):
        raise UsageError(f"backend {backend.name!r} does not compile partitions: --compile needs a backend with "
                         "compile/emulate/runtime_adapter")
    target = compiled_models.compiled_path(source, backend.name, out_dir)
    result = compiled_models.compile_model(paths["onnx"], backend, target, workdir / "compile", strict=strict,
                                           use_cost=pipeline.cost_model, max_partitions=pipeline.max_partitions,
                                           min_nodes=pipeline.min_nodes)
    result.bundle = str(compiled_models.write_bundle(target))
    result.adapter = str(compiled_models.write_adapter(backend, out_dir / "adapter"))
    paths["compiled"] = target
    return result


def _named_shapes(pipeline: PipelineOptions, model: ir.Model) -> dict[str, Sequence[int]]:
    shapes = dict(pipeline.shapes)
    if None in shapes:
        inputs = [v.name for v in model.graph.inputs if not v.is_initializer()]
        shapes[inputs[0] if inputs else ""] = shapes.pop(None)
    return shapes  # type: ignore[return-value]
