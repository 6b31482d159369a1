"""The conformance kit without pytest: a backend's claims, compiler and emulator against ONNX's node tests
(:func:`run_case`) and real models (:func:`run_model`), collected in a :class:`ConformanceReport`
(:func:`run_conformance`, which ``mobile-ep conformance`` runs).  Part of :mod:`mobile_ep.testing`.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import numpy as np
import onnx_ir as ir

from mobile_ep.contract import Backend, CompiledPartition, RuleContext, Support, op_label
from mobile_ep.contract.compile import is_compiling, missing_compile_methods, partition_view, runtime_inputs
from mobile_ep.partitioning.propose import propose
from mobile_ep.partitioning.units import build_node_units
from mobile_ep.testing.cases import NodeCase, as_array, candidate_cases, load_case

__all__ = [
    "Status",
    "CaseResult",
    "ModelResult",
    "ConformanceReport",
    "run_case",
    "run_model",
    "run_conformance",
    "smoke_models",
]


# --------------------------------------------------------------------------------------------------
# One node case
# --------------------------------------------------------------------------------------------------
Status = Literal["passed", "failed", "claimed", "declined", "skipped"]


@dataclasses.dataclass
class CaseResult:
    """The outcome of one node case.

    ``passed``/``failed``: claimed, compiled, emulated and compared; ``claimed``: claimed by a backend
    that does not compile (nothing more to check); ``declined``: the backend's rules said no (``detail``
    is their reason); ``skipped``: the kit cannot run this case (``detail`` says why).
    """

    case: str
    status: Status
    detail: str = ""
    #: How the case was run: ``""`` as ONNX wrote it, or ``"constant inputs"``.
    variant: str = ""
    max_abs_error: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v not in ("", None)}


def _claim(backend: Backend, model: ir.Model) -> tuple[Support, RuleContext]:
    """All of the model's nodes claimed, or the first refusal (with the node named if there are several)."""
    graph = model.graph
    ctx = RuleContext(model, backend)
    ctx.units = build_node_units(graph, backend.qdq_ops())
    excluded = backend.excluded_nodes(graph, ctx)
    nodes = list(graph)
    for node in nodes:
        if node in excluded:
            answer = Support.no(excluded[node])
        else:
            answer = ctx.claims_unit(ctx.unit_of(node))
        if not isinstance(answer, Support):
            raise TypeError(f"the rule for {op_label(node)} returned {answer!r}, not a Support")
        if not answer:
            if not answer.reason:
                raise TypeError(f"the rule for {op_label(node)} declined without a reason")
            prefix = f"{op_label(node)}: " if len(nodes) > 1 and not answer.reason.startswith(op_label(node)) else ""
            return Support.no(prefix + answer.reason), ctx
    return Support.yes(), ctx


def _compare(name: str, expected: np.ndarray, got: Any, rtol: float, atol: float) -> tuple[str, float]:
    """A description of the mismatch ("" if none) and the max abs error."""
    if not isinstance(got, np.ndarray):
        return f"output {name!r} is {type(got).__name__}, not a numpy array", float("inf")
    if got.dtype != expected.dtype:
        return f"output {name!r} has dtype {got.dtype}, expected {expected.dtype}", float("inf")
    if got.shape != expected.shape:
        return f"output {name!r} has shape {got.shape}, expected {expected.shape}", float("inf")
    if got.size == 0:
        return "", 0.0
    if np.issubdtype(expected.dtype, np.floating) or np.issubdtype(expected.dtype, np.complexfloating):
        g, e = got.astype(np.float64), expected.astype(np.float64)
        close = np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
        finite = np.isfinite(e) & np.isfinite(g)
        error = float(np.max(np.abs(g[finite] - e[finite]))) if finite.any() else 0.0
    else:
        close = got == expected
        error = float(np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64))))
    if close.all():
        return "", error
    bad = int(np.size(close) - np.count_nonzero(close))
    return (f"output {name!r}: {bad} of {close.size} values differ (max abs error {error:.3g}, "
            f"rtol={rtol:g}, atol={atol:g})"), error


def _compile_and_emulate(backend: Any, ctx: RuleContext, feeds: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Compile the whole model as one partition, check the payload, and emulate it from its bytes."""
    view = partition_view(ctx, list(ctx.graph))
    payload = backend.compile(view, ctx)
    if not isinstance(payload, CompiledPartition):
        raise AssertionError(f"{backend.name}.compile returned {type(payload).__name__}, not a CompiledPartition")
    payload.validate()
    expected_in = {v.name for v in runtime_inputs(view, ctx)}
    expected_out = {v.name for v in view.outputs}
    if {s.name for s in payload.inputs} != expected_in:
        raise AssertionError(f"payload inputs {[s.name for s in payload.inputs]} are not the partition's run-time "
                             f"inputs {sorted(expected_in)}")
    if {s.name for s in payload.outputs} != expected_out:
        raise AssertionError(f"payload outputs {[s.name for s in payload.outputs]} are not the partition's "
                             f"outputs {sorted(expected_out)}")
    # Emulate from the serialized payload: nothing but data and metadata may carry over.
    restored = CompiledPartition.from_bytes(payload.to_bytes())
    outputs = backend.emulate(restored, {s.name: feeds[s.name] for s in restored.inputs})
    if not isinstance(outputs, Mapping):
        raise AssertionError(f"{backend.name}.emulate returned {type(outputs).__name__}, not a mapping")
    return dict(outputs)


def run_case(backend: Backend, case: NodeCase, *, rtol: float | None = None,
             atol: float | None = None) -> CaseResult:
    """Claim, compile, emulate and compare one node case.  Exceptions from the backend are failures."""
    rtol = max(case.rtol, rtol or 0.0)
    atol = max(case.atol, atol or 0.0)
    if not case.data_sets:
        return CaseResult(case.name, "skipped", "the case has no data")
    try:
        model = load_case(case, constant_inputs=False)
    except Exception as exc:
        return CaseResult(case.name, "skipped", f"mobile-ep cannot load the case: {exc}")
    input_names = [v.name for v in model.graph.inputs]
    try:
        answer, ctx = _claim(backend, model)
        variant = ""
        if not answer and len(model.graph.inputs) > 1:
            constant = load_case(case, constant_inputs=True)
            answer_c, ctx_c = _claim(backend, constant)
            if answer_c:
                answer, ctx, model, variant = answer_c, ctx_c, constant, "constant inputs"
    except Exception as exc:
        return CaseResult(case.name, "failed", f"claiming raised {type(exc).__name__}: {exc}")
    if not answer:
        return CaseResult(case.name, "declined", answer.reason)
    if not is_compiling(backend):
        missing = missing_compile_methods(backend)
        if len(missing) < 3:
            return CaseResult(case.name, "failed", f"incomplete compile contract: no {', '.join(missing)}", variant)
        return CaseResult(case.name, "claimed", f"{backend.name} does not compile (no compile/emulate/runtime_adapter)"
                          ": claims checked only", variant)
    data_sets = case.data_sets[:1] if variant else case.data_sets
    worst = 0.0
    for index, (inputs, expected) in enumerate(data_sets):
        feeds_arrays = [as_array(v) for v in inputs]
        expected_arrays = [as_array(v) for v in expected]
        if any(a is None for a in [*feeds_arrays, *expected_arrays]):
            return CaseResult(case.name, "skipped", "sequence, map or optional values: not part of the compile "
                              "contract", variant)
        feeds = dict(zip(input_names, feeds_arrays, strict=False))
        try:
            outputs = _compile_and_emulate(backend, ctx, feeds)
        except Exception as exc:
            return CaseResult(case.name, "failed", f"{type(exc).__name__}: {' '.join(str(exc).split())}", variant)
        for value, want in zip(model.graph.outputs, expected_arrays, strict=False):
            if value.name not in outputs:
                return CaseResult(case.name, "failed", f"emulate returned no output {value.name!r}", variant)
            problem, error = _compare(value.name or "", want, outputs[value.name], rtol, atol)  # type: ignore[arg-type]
            worst = max(worst, error)
            if problem:
                where = f"data set {index}: " if len(data_sets) > 1 else ""
                return CaseResult(case.name, "failed", where + problem, variant, error)
    return CaseResult(case.name, "passed", "", variant, worst)


# --------------------------------------------------------------------------------------------------
# Real models
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class ModelResult:
    """A real model through a backend: partitions proposed, and each compiled and emulated."""

    model: str
    status: Literal["passed", "failed"]
    nodes: int = 0
    claimed: int = 0
    partitions: int = 0
    emulated: int = 0
    detail: str = ""
    max_abs_error: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v not in ("", None)}


def smoke_models() -> list[pathlib.Path]:
    """The ``light_*`` architectures shipped in the onnx wheel (weights generated by the graph)."""
    import onnx

    return sorted((pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data" / "light").glob("light_*.onnx"))


def _nothing_claimed(backend: Backend, model: ir.Model, rejected: Mapping[ir.Node, str]) -> str:
    """Why a model has no node to compile: its most common cause, and ``--shape`` when shapes are dynamic."""
    from mobile_ep.reports.model import cause_key, dynamic_inputs, suggest_shapes

    kinds: dict[str, int] = {}
    for node, reason in rejected.items():
        kind = cause_key(op_label(node), reason)[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    if not kinds:
        return "nothing was compiled or emulated: the model has no node"
    text = f"nothing was compiled or emulated: {backend.name} claims none of its nodes"
    dynamic = dynamic_inputs(model)
    if kinds.get("dynamic") and dynamic:
        text += (f" ({kinds['dynamic']} of them have dynamic shapes: give the input sizes with "
                 f"{suggest_shapes(dynamic)})")
    return text


def run_model(backend: Backend, model_path: str | os.PathLike, *, rtol: float = 1e-3, atol: float = 1e-4,
              seed: int = 0, shapes: Mapping[str | None, tuple[int, ...]] | None = None,
              dims: Mapping[str, int] | None = None) -> ModelResult:
    """Partition a real model as ORT sees it; compile and emulate every partition on ORT's boundary values.

    *shapes*/*dims* fix the model's input shapes first (as ``--shape``/``--dim`` do); a model of which the
    backend claims nothing passes with a ``detail`` saying so."""
    from mobile_ep import model_io as mir
    from mobile_ep import runtime
    from mobile_ep.options import Options
    from mobile_ep.passes.load import load_for_analysis

    name = pathlib.Path(model_path).name
    fixes = Options(shapes=dict(shapes or {}), dims=dict(dims or {})) if shapes or dims else None
    with tempfile.TemporaryDirectory(prefix="mobile-ep-conformance-") as tmp:
        model = load_for_analysis(model_path, tmp, fixes, [backend])
        nodes = list(model.graph)
        try:
            result = propose(model, [backend])
        except Exception as exc:
            return ModelResult(name, "failed", len(nodes), detail=f"partitioning raised {type(exc).__name__}: {exc}")
        proposed = result.per_backend[backend.name]
        report = ModelResult(name, "passed", len(nodes), proposed.supported_nodes, len(proposed.partitions))
        empty = [n.name for n, reason in proposed.rejected.items() if not reason]
        if empty:
            return dataclasses.replace(report, status="failed", detail=f"nodes declined without a reason: {empty[:5]}")
        if not proposed.partitions:
            return dataclasses.replace(report, detail=_nothing_claimed(backend, model, proposed.rejected))
        if not is_compiling(backend):
            return report
        # One ORT run of the analysed model with every partition boundary exposed as an output.
        probe = load_for_analysis(model_path, tmp, fixes, [backend])
        by_name = {v.name: v for node in probe.graph for v in node.outputs}
        boundary: dict[str, None] = {}
        for partition in proposed.partitions:
            for value in (*partition.inputs, *partition.outputs):
                if value.name in by_name and by_name[value.name] not in probe.graph.outputs:
                    boundary.setdefault(value.name or "", None)
        for value_name in boundary:
            probe.graph.outputs.append(by_name[value_name])
        probe_path = mir.save(probe, pathlib.Path(tmp) / "probe.onnx")
        feeds = runtime.make_inputs(probe_path, seed=seed)
        values = {**feeds, **runtime.run(probe_path, feeds)}
        ctx = RuleContext(model, backend)
        ctx.units = build_node_units(model.graph, backend.qdq_ops())
        worst = 0.0
        for index, partition in enumerate(proposed.partitions):
            view = partition_view(ctx, partition.nodes)
            where = f"partition {index} ({len(partition.nodes)} nodes from {partition.nodes[0].name!r})"
            try:
                payload = backend.compile(view, ctx)  # type: ignore[attr-defined]
                if not isinstance(payload, CompiledPartition):
                    raise AssertionError(f"compile returned {type(payload).__name__}, not a CompiledPartition")
                restored = CompiledPartition.from_bytes(payload.validate().to_bytes())
                outputs = backend.emulate(restored, {s.name: values[s.name] for s in restored.inputs})  # type: ignore[attr-defined]
            except Exception as exc:
                return dataclasses.replace(report, status="failed", emulated=index,
                                           detail=f"{where}: {type(exc).__name__}: {' '.join(str(exc).split())}")
            for value in view.outputs:
                problem, error = _compare(value.name or "", values[value.name], outputs.get(value.name), rtol, atol)
                worst = max(worst, error)
                if problem:
                    return dataclasses.replace(report, status="failed", emulated=index, detail=f"{where}: {problem}",
                                               max_abs_error=error)
        return dataclasses.replace(report, emulated=len(proposed.partitions), max_abs_error=worst)


# --------------------------------------------------------------------------------------------------
# Whole runs and their report
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class ConformanceReport:
    """The results of one backend (and configuration) on the node cases and real models it was given."""

    backend: str
    version: str
    compiles: bool
    cases: list[CaseResult] = dataclasses.field(default_factory=list)
    models: list[ModelResult] = dataclasses.field(default_factory=list)
    #: The test class that produced it (several suites may test one backend in different configurations).
    suite: str = ""

    def count(self, status: str) -> int:
        return sum(1 for c in self.cases if c.status == status)

    @property
    def claimed(self) -> int:
        return sum(1 for c in self.cases if c.status in ("passed", "failed", "claimed"))

    @property
    def ok(self) -> bool:
        return not self.count("failed") and all(m.status == "passed" for m in self.models)

    def summary(self, *, with_suite: bool = False) -> str:
        parts = [f"{len(self.cases)} ONNX node cases with a rule for every op", f"{self.claimed} claimed"]
        if self.compiles:
            parts += [f"{self.count('passed')} passed", f"{self.count('failed')} failed"]
        else:
            parts.append("not compiled (the backend has no compile contract)")
        parts.append(f"{self.count('declined')} declined")
        if self.count("skipped"):
            parts.append(f"{self.count('skipped')} skipped")
        label = f"{self.backend} {self.version}" + (f" ({self.suite})" if with_suite and self.suite else "")
        text = f"{label}: " + ", ".join(parts)
        if self.models:
            failed = sum(1 for m in self.models if m.status != "passed")
            text += f"; {len(self.models)} real model{'' if len(self.models) == 1 else 's'}, {failed} failed"
        return text

    def text(self, *, verbose: bool = False) -> str:
        lines = [self.summary()]
        for c in self.cases:
            if c.status == "failed" or (verbose and c.status != "passed"):
                lines.append(f"  {c.status:<8} {c.case}: {c.detail}")
        for m in self.models:
            if not m.claimed:
                label = "nothing" if m.status == "passed" else m.status  # (passed: nothing failed, nothing ran)
                lines.append(f"  {label:<8} {m.model}: 0 nodes claimed (of {m.nodes})" + (f"; {m.detail}" if m.detail else ""))
                continue
            line = (f"  {m.status:<8} {m.model}: {m.claimed}/{m.nodes} nodes claimed in {m.partitions} partitions, "
                    f"{m.emulated} emulated")
            lines.append(line + (f": {m.detail}" if m.detail else ""))
        return "\n".join(lines) + "\n"

    def as_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend, "version": self.version, "suite": self.suite, "compiles": self.compiles,
            "summary": {"cases": len(self.cases), "claimed": self.claimed, "passed": self.count("passed"),
                        "failed": self.count("failed"), "declined": self.count("declined"),
                        "skipped": self.count("skipped")},
            "cases": [c.as_dict() for c in self.cases],
            "models": [m.as_dict() for m in self.models],
        }


def run_conformance(backend: Backend, *, cases: Iterable[NodeCase] | None = None,
                    models: Iterable[str | os.PathLike] = (), rtol: float | None = None,
                    atol: float | None = None, shapes: Mapping[str | None, tuple[int, ...]] | None = None,
                    dims: Mapping[str, int] | None = None) -> ConformanceReport:
    """Every candidate node case (and the given real models, their input shapes fixed by *shapes*/*dims*)
    through *backend*, without pytest."""
    report = ConformanceReport(backend.name, backend.version, is_compiling(backend))
    for case in candidate_cases(backend, cases):
        report.cases.append(run_case(backend, case, rtol=rtol, atol=atol))
    for path in models:
        report.models.append(run_model(backend, path, shapes=shapes, dims=dims))
    return report
