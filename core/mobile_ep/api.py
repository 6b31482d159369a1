"""The Python API behind the CLI: ``check`` and ``convert``, returning typed reports."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import pathlib
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

import onnx_ir as ir

from . import export, runtime
from . import ir as mir
from .capability import Backend, NodeUnit, Support, op_label
from .errors import BackendError, UsageError, VerificationError
from .partition import BackendProposal, Proposal, propose
from .plugins import Plugins, make_plugins

__all__ = [
    "NodeReason",
    "PartitionReport",
    "BackendReport",
    "CombinedReport",
    "CheckReport",
    "ConvertReport",
    "load_for_analysis",
    "resolve_backends",
    "check",
    "convert",
]

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------
# Report objects
# --------------------------------------------------------------------------------------------------
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

    @property
    def coverage(self) -> float:
        return self.supported_nodes / self.nodes if self.nodes else 0.0

    def as_dict(self) -> dict:
        return {
            "backend": self.backend,
            "version": self.version,
            "options": self.options,
            "nodes": self.nodes,
            "supported_nodes": self.supported_nodes,
            "partitions": [dataclasses.asdict(p) for p in self.partitions],
            "unsupported": [dataclasses.asdict(u) for u in self.unsupported],
            "verdict": self.verdict,
        }


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
    timings: dict[str, float] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict:
        result: dict = {
            "model": self.model,
            "nodes": self.nodes,
            "backends": {name: b.as_dict() for name, b in self.backends.items()},
        }
        if self.combined is not None:
            result["combined"] = self.combined.as_dict()
        result["timings"] = self.timings
        return result


@dataclasses.dataclass
class ConvertReport:
    model: str
    backend: str
    outputs: dict[str, str]
    check: BackendReport
    verification: list[runtime.Verification]
    timings: dict[str, float] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "model": self.model,
            "backend": self.backend,
            "outputs": self.outputs,
            "partitioning": self.check.as_dict(),
            "verification": [v.as_dict() for v in self.verification],
            "timings": self.timings,
        }


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
            yield
        finally:
            self.timings[step] = round(self.timings.get(step, 0.0) + time.perf_counter() - start, 4)


def load_for_analysis(model_path: str | os.PathLike, workdir: str | os.PathLike) -> ir.Model:
    """Validate the model, then load it as an ORT session sees it after basic-level optimization."""
    path = pathlib.Path(model_path)
    mir.validate(path)
    optimized = mir.ort_optimized(path, workdir, level="basic")
    return mir.load(optimized, check=False)


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
    from .capability import _format_option

    if not dataclasses.is_dataclass(backend.options):
        return {}
    return {f.name: _format_option(getattr(backend.options, f.name)) for f in dataclasses.fields(backend.options)}


def _node_name(node: ir.Node) -> str:
    return node.name or ""


def _reason(node: ir.Node, reason: str) -> str:
    label = op_label(node)
    return reason if reason.startswith(label) else f"{label}: {reason}"


def backend_report(backend: Backend, proposal: BackendProposal, nodes: Sequence[ir.Node]) -> BackendReport:
    partitions = []
    for p in proposal.partitions:
        ops: dict[str, int] = {}
        for n in p.nodes:
            ops[op_label(n)] = ops.get(op_label(n), 0) + 1
        partitions.append(PartitionReport(
            [_node_name(n) for n in p.nodes], dict(sorted(ops.items())),
            [v.name or "" for v in p.inputs if not (v.is_initializer())], [v.name or "" for v in p.outputs]))
    unsupported = [
        NodeReason(_node_name(n), op_label(n), _reason(n, proposal.rejected[n]))
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


def isolate_faults(strict: bool) -> Callable[[Backend, NodeUnit, Exception], Support]:
    """What to do when a backend's code raises: cost it only its own claims, or (strict) stop."""

    def on_error(backend: Backend, unit: NodeUnit, exc: Exception) -> Support:
        where = f"{op_label(unit.target)} node {unit.name!r}"
        message = " ".join(str(exc).split()) or "no message"
        if strict:
            raise BackendError(f"backend {backend.name!r} raised {type(exc).__name__} on {where}: {message}") from exc
        log.warning("backend %s raised %s on %s: %s", backend.name, type(exc).__name__, where, message)
        return Support.no(f"{backend.name} failed on this node ({type(exc).__name__}: {message}); left on CPU")

    return on_error


def analyze(model: ir.Model, backends: Sequence[Backend], *, strict: bool = False
            ) -> tuple[dict[str, BackendReport], CombinedReport | None]:
    on_error = isolate_faults(strict)
    reports = {}
    for backend in backends:
        proposal = propose(model, [backend], on_error=on_error)
        reports[backend.name] = backend_report(backend, proposal.per_backend[backend.name], proposal.nodes)
    combined = _combined(propose(model, backends, on_error=on_error)) if len(backends) > 1 else None
    return reports, combined


# --------------------------------------------------------------------------------------------------
# check
# --------------------------------------------------------------------------------------------------
def check(
    model_path: str | os.PathLike,
    backends: Sequence[str] | None = None,
    *,
    options: Mapping[str, Mapping[str, str]] | None = None,
    plugins: Plugins | None = None,
    strict: bool = False,
) -> CheckReport:
    """What happens when this model is loaded in ORT Mobile with each backend's execution provider."""
    timer = _Timer()
    mir.read_proto(model_path)  # a bad model is reported before anything else
    selected = resolve_backends(backends, options, plugins)
    with tempfile.TemporaryDirectory(prefix="mobile-ep-") as workdir:
        with timer("load"):
            model = load_for_analysis(model_path, workdir)
        with timer("partition"):
            reports, combined = analyze(model, selected, strict=strict)
    return CheckReport(str(model_path), len(list(model.graph)), reports, combined, timer.timings)


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
) -> ConvertReport:
    """Write the EP-aware model (ONNX and ORT format) and ``report.json`` into *output_dir*.

    With *verify* (the default) the original and both outputs run in onnxruntime on the same generated
    inputs; a mismatch raises :class:`VerificationError` (the files and the report are kept for
    inspection).
    """
    import json

    timer = _Timer()
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
            model = load_for_analysis(source, workdir)
        with timer("partition"):
            proposal = propose(model, [selected], on_error=isolate_faults(strict))
            report = backend_report(selected, proposal.per_backend[selected.name], proposal.nodes)
        out_dir.mkdir(parents=True, exist_ok=True)
        with timer("export_onnx"):
            export.write_onnx(model, paths["onnx"])
        with timer("export_ort"):
            export.write_ort(paths["onnx"], paths["ort"])
    verification: list[runtime.Verification] = []
    if verify:
        with timer("verify"):
            verification = runtime.verify(source, [paths["onnx"], paths["ort"]], seed=seed)
    result = ConvertReport(str(source), selected.name, {k: str(v) for k, v in paths.items()}, report,
                           verification, timer.timings)
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
