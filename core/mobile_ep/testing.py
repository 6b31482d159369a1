"""The test kit for backend authors, and a pytest plugin (entry point ``pytest11``: ``mobile_ep``).

A backend proves itself with the same checks as the built-in ones, with one line in its own tests::

    # tests/test_conformance.py of your plugin
    from mobile_ep.testing import conformance_suite
    from my_npu.backend import MyNpu

    TestMyNpu = conformance_suite(MyNpu)

which collects, for ``MyNpu``:

- ``test_contract``: name, version, layout, options, plugin API, rule docs, the compile contract (all of
  ``compile``/``emulate``/``runtime_adapter`` or none) and the runtime adapter's files;
- ``test_registers_and_checks``: registered through a throwaway plugin, the backend partitions the
  built-in sample model through :func:`mobile_ep.pipeline.check` without a plugin error;
- ``test_node_case[<case>]``: ONNX's own node tests (``onnx.backend.test.case.node``) for every case
  whose ops all have a rule: claim -> compile -> emulate, compared with ONNX's expected outputs.  A
  case the backend declines is skipped with the backend's reason; when it declines because an input
  is not constant (weights), the case is retried with every input but the first as a constant
  initializer.  A backend without the compile contract only has its claims checked;
- ``test_real_model[<model>]``: the built-in sample and the ``light_*`` models of the onnx wheel,
  analysed as ORT sees them: partitions are proposed, and each one is compiled and emulated on the
  values ONNX Runtime computes at its boundary.

Subclass :class:`BackendConformance` instead to tune it (tolerances, which cases, which models, known
failures).  pytest prints a summary of claimed, passed and failed cases per backend, and
``--mobile-ep-report=FILE`` writes it as JSON.

Fixtures: ``mobile_ep_plugins`` (a fresh plugin manager without entry points), ``mobile_ep_register``
(register a backend or plugin for one test; unregistered after it), ``mobile_ep_cli`` (run the
``mobile-ep`` command against that manager).

The node cases take ONNX about 20 s to generate; they are cached, per onnx version, under
``$MOBILE_EP_CACHE_DIR`` (default ``~/.cache/mobile-ep``; ``MOBILE_EP_CACHE_DIR=none`` disables it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import pathlib
import pickle
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Literal

import numpy as np
import onnx_ir as ir

from mobile_ep.contract import Backend, OpRule, RuleContext, Support, op_label
from mobile_ep.contract.compile import (
    CompiledPartition,
    is_compiling,
    missing_compile_methods,
    partition_view,
    runtime_inputs,
)
from mobile_ep.contract.hookspecs import hookimpl
from mobile_ep.partitioning.propose import Proposal, propose
from mobile_ep.partitioning.units import build_node_units

try:  # the kit's helpers work without pytest; only the fixtures and the suite need it
    import pytest
except ImportError:  # pragma: no cover
    pytest = None  # type: ignore[assignment]

__all__ = [
    # helpers for rule tests
    "as_model",
    "node_support",
    "supports_all",
    "proposal",
    "registered",
    # the conformance kit
    "NodeCase",
    "CaseResult",
    "ModelResult",
    "ConformanceReport",
    "onnx_node_cases",
    "candidate_cases",
    "run_case",
    "run_model",
    "run_conformance",
    "smoke_models",
    "BackendConformance",
    "conformance_suite",
    "CACHE_ENV",
]

log = logging.getLogger(__name__)

#: Where the generated ONNX node cases are cached (``none`` to disable).
CACHE_ENV = "MOBILE_EP_CACHE_DIR"


# --------------------------------------------------------------------------------------------------
# Helpers for rule tests
# --------------------------------------------------------------------------------------------------
def as_model(model: Any) -> ir.Model:
    """An IR model with inferred shapes from an ``onnx.ModelProto``, a path, or an IR model."""
    from mobile_ep import model_io as mir

    if isinstance(model, ir.Model):
        return model
    if isinstance(model, (str,)) or hasattr(model, "__fspath__"):
        return mir.load(model)
    return mir.from_proto(model)


def node_support(model: Any, backend: Backend, node: str | int = 0) -> Support:
    """The backend's answer for one node (by name or position), inside its QDQ unit if it has one."""
    m = as_model(model)
    nodes = list(m.graph)
    target = nodes[node] if isinstance(node, int) else next(n for n in nodes if n.name == node)
    ctx = RuleContext(m, backend)
    ctx.units = build_node_units(m.graph, backend.qdq_ops(), nodes)
    return ctx.claims_unit(ctx.unit_of(target))


def supports_all(model: Any, backend: Backend) -> dict[str, Support]:
    m = as_model(model)
    ctx = RuleContext(m, backend)
    ctx.units = build_node_units(m.graph, backend.qdq_ops())
    return {n.name: ctx.claims_unit(ctx.unit_of(n)) for n in m.graph}


def proposal(model: Any, *backends: Backend) -> Proposal:
    return propose(as_model(model), backends)


class _BackendsPlugin:
    """A throwaway plugin registering given backend instances."""

    def __init__(self, backends: Sequence[Backend]) -> None:
        self.backends = tuple(backends)

    @hookimpl
    def mobile_ep_register_backends(self, register: Callable[[Backend], None]) -> None:
        for backend in self.backends:
            register(backend)

    def __repr__(self) -> str:
        return f"<test plugin for {', '.join(b.name for b in self.backends)}>"


@contextlib.contextmanager
def registered(*items: object, plugins: Any = None, name: str | None = None) -> Iterator[Any]:
    """Register backends (or one plugin object) in a plugin manager for the ``with`` block.

    Yields the manager (a fresh one without entry points unless *plugins* is given); everything
    registered is unregistered on exit, whatever happens.
    """
    from mobile_ep.contract.plugins import make_plugins

    manager = plugins if plugins is not None else make_plugins(entry_points=False)
    plugin = _BackendsPlugin(items) if items and all(isinstance(i, Backend) for i in items) else None
    if plugin is None:
        if len(items) != 1:
            raise TypeError("register either Backend instances or a single plugin object")
        plugin = items[0]
    manager.register(plugin, name=name)
    try:
        yield manager
    finally:
        manager.unregister(plugin)


# --------------------------------------------------------------------------------------------------
# ONNX node cases
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class NodeCase:
    """One of ONNX's node tests: a one-node (or expanded function) model and its expected outputs."""

    name: str
    model_bytes: bytes
    #: ``(inputs, expected outputs)`` pairs, in graph input and output order.
    data_sets: tuple[tuple[tuple[Any, ...], tuple[Any, ...]], ...]
    rtol: float
    atol: float
    #: (domain, op_type) of every node, with the domain ``""`` for ai.onnx.
    ops: frozenset[tuple[str, str]]

    @property
    def model(self) -> Any:
        """The case as an ``onnx.ModelProto``."""
        import onnx

        return onnx.load_from_string(self.model_bytes)

    def __repr__(self) -> str:
        return f"NodeCase({self.name})"


_CASES: tuple[NodeCase, ...] | None = None
#: Bumped whenever NodeCase changes, so that an old cache is never read.
_CACHE_SCHEMA = 1


def _cache_file() -> pathlib.Path | None:
    import onnx

    raw = os.environ.get(CACHE_ENV, "").strip()
    if raw.lower() in ("none", "off", "0", "false", "no"):
        return None
    if raw:
        base = pathlib.Path(raw)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
        base = (pathlib.Path(xdg) if xdg else pathlib.Path.home() / ".cache") / "mobile-ep"
    key = f"v{_CACHE_SCHEMA}-onnx-{onnx.__version__}-numpy{np.__version__.split('.')[0]}-py{sys.version_info[0]}{sys.version_info[1]}"
    return base / f"node-cases-{key}.pickle"


def _generate_cases() -> list[NodeCase]:
    import onnx.backend.test.case.node as node_cases

    if getattr(node_cases, "_TargetOpType", None):
        log.warning("ONNX node cases were collected for one op type only before; the list may be partial")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reference implementations overflow on purpose
        collected = node_cases.collect_testcases(None)
    cases = []
    for case in collected:
        if case.model is None:
            continue
        ops = frozenset(("" if n.domain == "ai.onnx" else n.domain, n.op_type) for n in case.model.graph.node)
        data_sets = tuple((tuple(inputs), tuple(outputs)) for inputs, outputs in case.data_sets)
        cases.append(NodeCase(case.name, case.model.SerializeToString(), data_sets, float(case.rtol),
                              float(case.atol), ops))
    return cases


def onnx_node_cases() -> tuple[NodeCase, ...]:
    """Every ONNX node test case (about 1,900), generated once per process and cached on disk."""
    global _CASES
    if _CASES is not None:
        return _CASES
    path = _cache_file()
    cases: list[NodeCase] | None = None
    if path is not None and path.is_file():
        try:
            with path.open("rb") as f:
                loaded = pickle.load(f)
            if isinstance(loaded, list) and all(isinstance(c, NodeCase) for c in loaded):
                cases = loaded
        except Exception as exc:  # a stale or damaged cache is rebuilt
            log.info("ignoring the node-case cache %s: %s", path, exc)
    if cases is None:
        cases = _generate_cases()
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".node-cases-")
                with os.fdopen(fd, "wb") as f:
                    pickle.dump(cases, f, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(tmp, path)
            except OSError as exc:
                log.info("cannot cache the node cases in %s: %s", path, exc)
    _CASES = tuple(cases)
    return _CASES


def candidate_cases(backend: Backend, cases: Iterable[NodeCase] | None = None) -> list[NodeCase]:
    """The cases every op of which has a rule in *backend* (the ones its claims decide)."""
    rules = backend.rules
    return [c for c in (onnx_node_cases() if cases is None else cases) if all(op in rules for op in c.ops)]


# --------------------------------------------------------------------------------------------------
# Running one case
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


def _to_array(value: Any) -> np.ndarray | None:
    """A numpy array for a tensor input or output; ``None`` for sequences, maps, optionals."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    if type(value).__name__ == "TensorProto":
        from onnx import numpy_helper

        return numpy_helper.to_array(value)
    return None


def _load_case(case: NodeCase, constant_inputs: bool) -> ir.Model:
    from mobile_ep import model_io as mir

    model = mir.from_proto(case.model)
    if constant_inputs:
        graph = model.graph
        inputs, _ = case.data_sets[0]
        for value, data in list(zip(list(graph.inputs), inputs, strict=False))[1:]:
            graph.inputs.remove(value)
            value.const_value = ir.tensor(_to_array(data), name=value.name)
            graph.register_initializer(value)
    return model


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
        model = _load_case(case, constant_inputs=False)
    except Exception as exc:
        return CaseResult(case.name, "skipped", f"mobile-ep cannot load the case: {exc}")
    input_names = [v.name for v in model.graph.inputs]
    try:
        answer, ctx = _claim(backend, model)
        variant = ""
        if not answer and len(model.graph.inputs) > 1:
            constant = _load_case(case, constant_inputs=True)
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
        feeds_arrays = [_to_array(v) for v in inputs]
        expected_arrays = [_to_array(v) for v in expected]
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


def _sample_model(directory: pathlib.Path) -> pathlib.Path:
    from mobile_ep.samples import write_sample

    return write_sample(directory)


def run_model(backend: Backend, model_path: str | os.PathLike, *, rtol: float = 1e-3, atol: float = 1e-4,
              seed: int = 0) -> ModelResult:
    """Partition a real model as ORT sees it; compile and emulate every partition on ORT's boundary values."""
    from mobile_ep import model_io as mir
    from mobile_ep import pipeline as api
    from mobile_ep import runtime

    name = pathlib.Path(model_path).name
    with tempfile.TemporaryDirectory(prefix="mobile-ep-conformance-") as tmp:
        model = api.load_for_analysis(model_path, tmp)
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
        if not is_compiling(backend) or not proposed.partitions:
            return report
        # One ORT run of the analysed model with every partition boundary exposed as an output.
        probe = api.load_for_analysis(model_path, tmp)
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
            line = (f"  {m.status:<8} {m.model}: {m.claimed}/{m.nodes} nodes in {m.partitions} partitions, "
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
                    atol: float | None = None) -> ConformanceReport:
    """Every candidate node case (and the given real models) through *backend*, without pytest."""
    report = ConformanceReport(backend.name, backend.version, is_compiling(backend))
    for case in candidate_cases(backend, cases):
        report.cases.append(run_case(backend, case, rtol=rtol, atol=atol))
    for path in models:
        report.models.append(run_model(backend, path))
    return report


# --------------------------------------------------------------------------------------------------
# The pytest suite
# --------------------------------------------------------------------------------------------------
#: Results recorded by the suites of this pytest session, per suite (for the summary and --mobile-ep-report).
_SESSION: dict[str, ConformanceReport] = {}


def _record(suite: type, backend: Backend, result: CaseResult | ModelResult) -> None:
    key = f"{suite.__module__}.{suite.__qualname__}"
    if key not in _SESSION:
        _SESSION[key] = ConformanceReport(backend.name, backend.version, is_compiling(backend), suite=suite.__name__)
    report = _SESSION[key]
    (report.cases if isinstance(result, CaseResult) else report.models).append(result)  # type: ignore[arg-type]


_BACKENDS: dict[type, Backend] = {}


def _rule_doc(rule: OpRule) -> str:
    """The rule's own documentation (its ``check`` docstring or its class docstring, not OpRule's)."""
    for cls in type(rule).__mro__:
        if cls is OpRule or not issubclass(cls, OpRule):
            break
        check = cls.__dict__.get("check")
        doc = (getattr(check, "__doc__", None) or cls.__dict__.get("__doc__") or "").strip()
        if doc:
            return doc
    return ""

SAMPLE = "mobilenet_sample"


class BackendConformance:
    """The conformance suite as a test class: subclass it with ``backend = MyBackend`` (or use
    :func:`conformance_suite`).

    ``backend`` is a Backend class, instance, or a function returning one (to test a configuration:
    ``backend = staticmethod(lambda: MyNpu().configure({"fp16": "true"}))``).
    """

    backend: ClassVar[Any] = None
    #: Which node cases: ``None`` for every case whose ops all have a rule, or a predicate on NodeCase.
    cases: ClassVar[Callable[[NodeCase], bool] | None] = None
    #: Real models: paths, or the names ``"mobilenet_sample"`` and ``"light_*"`` (the default: all of them).
    models: ClassVar[Sequence[str | os.PathLike] | None] = None
    #: Loosen the case tolerances (the larger of the case's and these is used).
    rtol: ClassVar[float | None] = None
    atol: ClassVar[float | None] = None
    #: Cases or models known to fail, with the reason: reported as xfail (strict: a pass is an error).
    known_failures: ClassVar[Mapping[str, str]] = {}

    # -- configuration ----------------------------------------------------------------------------------
    @classmethod
    def make_backend(cls) -> Backend:
        if cls not in _BACKENDS:
            factory = cls.backend
            if factory is None:
                raise TypeError(f"{cls.__name__} must set `backend` to a Backend class, instance or factory")
            backend = factory if isinstance(factory, Backend) else factory()
            if not isinstance(backend, Backend):
                raise TypeError(f"{cls.__name__}.backend gave {backend!r}, not a mobile_ep.Backend")
            _BACKENDS[cls] = backend
        return _BACKENDS[cls]

    @classmethod
    def selected_cases(cls) -> list[NodeCase]:
        chosen = candidate_cases(cls.make_backend())
        return [c for c in chosen if cls.cases(c)] if cls.cases is not None else chosen

    @classmethod
    def selected_models(cls) -> list[str]:
        names = [SAMPLE, *(p.stem for p in smoke_models())] if cls.models is None else [str(m) for m in cls.models]
        return names

    def pytest_generate_tests(self, metafunc: Any) -> None:
        def marks(name: str) -> list[Any]:
            reason = self.known_failures.get(name)
            return [pytest.mark.xfail(reason=reason, strict=True)] if reason else []

        if "node_case" in metafunc.fixturenames:
            cases = self.selected_cases()
            metafunc.parametrize("node_case", [pytest.param(c, id=c.name, marks=marks(c.name)) for c in cases])
        if "real_model" in metafunc.fixturenames:
            models = self.selected_models()
            metafunc.parametrize("real_model", [pytest.param(m, id=pathlib.Path(m).stem,
                                                             marks=marks(pathlib.Path(m).stem)) for m in models])

    # -- tests ------------------------------------------------------------------------------------------
    def test_contract(self) -> None:
        from mobile_ep.contract.plugins import check_plugin_api

        backend = self.make_backend()
        problems = []
        if not isinstance(backend.version, str) or not backend.version:
            problems.append(f"version {backend.version!r} is not a non-empty string")
        if backend.preferred_layout not in ("NCHW", "NHWC"):
            problems.append(f"preferred_layout {backend.preferred_layout!r} is not NCHW or NHWC")
        if not dataclasses.is_dataclass(backend.options):
            problems.append("options is not a dataclass instance")
        else:
            backend.describe_options()
        if not len(backend.rules):
            problems.append("the rule registry is empty")
        for _, op_type, rule in backend.rules:
            if not _rule_doc(rule):
                problems.append(f"{type(rule).__name__} ({op_type}): no docstring for `mobile-ep ops`")
        check_plugin_api(backend)
        missing = missing_compile_methods(backend)
        if 0 < len(missing) < 3:
            problems.append(f"incomplete compile contract: implements some of compile/emulate/runtime_adapter "
                            f"but not {', '.join(missing)}")
        elif not missing:
            files = backend.runtime_adapter()  # type: ignore[attr-defined]
            if not isinstance(files, Mapping) or not files:
                problems.append("runtime_adapter() returned no files")
            else:
                for path, data in files.items():
                    parts = pathlib.PurePosixPath(path).parts if isinstance(path, str) else ("",)
                    if not isinstance(path, str) or path.startswith("/") or ".." in parts:
                        problems.append(f"runtime adapter path {path!r} is not a relative path")
                    if not isinstance(data, bytes):
                        problems.append(f"runtime adapter file {path!r} is {type(data).__name__}, not bytes")
        assert not problems, f"{backend.name}: " + "; ".join(problems)

    def test_registers_and_checks(self, tmp_path: pathlib.Path) -> None:
        from mobile_ep import pipeline as api

        backend = self.make_backend()
        with registered(backend) as plugins:
            assert not plugins.errors, plugins.errors
            assert backend.name in plugins.backends()
            report = api.check(_sample_model(tmp_path), [backend.name], plugins=plugins, strict=True)
        result = report.backends[backend.name]
        assert result.supported_nodes + len(result.unsupported) == result.nodes
        assert all(u.reason for u in result.unsupported)

    def test_node_case(self, node_case: NodeCase) -> None:
        backend = self.make_backend()
        result = run_case(backend, node_case, rtol=self.rtol, atol=self.atol)
        _record(type(self), backend, result)
        if result.status == "failed":
            pytest.fail(f"{backend.name}: {node_case.name}{' (' + result.variant + ')' if result.variant else ''}: "
                        f"{result.detail}", pytrace=False)
        if result.status != "passed":
            pytest.skip(f"{result.status}: {result.detail}")

    def test_real_model(self, real_model: str, tmp_path: pathlib.Path) -> None:
        backend = self.make_backend()
        if real_model == SAMPLE:
            path: pathlib.Path = _sample_model(tmp_path)
        elif os.sep in real_model or "/" in real_model or real_model.endswith(".onnx"):
            path = pathlib.Path(real_model)
        else:
            path = next(p for p in smoke_models() if p.stem == real_model)
        result = run_model(backend, path)
        _record(type(self), backend, result)
        if result.status != "passed":
            pytest.fail(f"{backend.name}: {result.model}: {result.detail}", pytrace=False)


def conformance_suite(backend: Any, **settings: Any) -> type:
    """A :class:`BackendConformance` subclass for *backend*: ``TestMyNpu = conformance_suite(MyNpu)``.

    *settings* set the class attributes (``cases``, ``models``, ``rtol``, ``atol``, ``known_failures``).
    """
    unknown = set(settings) - {"cases", "models", "rtol", "atol", "known_failures"}
    if unknown:
        raise TypeError(f"unknown conformance settings: {', '.join(sorted(unknown))}")
    name = getattr(backend, "name", None) or getattr(backend, "__name__", "Backend")
    if callable(backend) and not isinstance(backend, (type, Backend)):
        backend = staticmethod(backend)
    return type(f"Test{str(name).title().replace('-', '').replace('_', '')}Conformance", (BackendConformance,),
                {"backend": backend, **settings, "__module__": sys._getframe(1).f_globals.get("__name__", __name__)})


# --------------------------------------------------------------------------------------------------
# The pytest plugin: fixtures, an option and the summary
# --------------------------------------------------------------------------------------------------
if pytest is not None:

    @pytest.fixture
    def mobile_ep_plugins() -> Iterator[Any]:
        """A fresh plugin manager with no entry-point plugins; whatever a test registers is gone after it."""
        from mobile_ep.contract.plugins import make_plugins

        manager = make_plugins(entry_points=False)
        try:
            yield manager
        finally:
            for plugin_name in manager.plugin_names():
                manager.unregister(name=plugin_name)

    @pytest.fixture
    def mobile_ep_register(mobile_ep_plugins: Any) -> Callable[..., Any]:
        """``register(backend, ...)`` or ``register(plugin, name=...)``: registered for this test only.

        Returns the plugin manager (the ``mobile_ep_plugins`` fixture), to pass as ``plugins=`` to
        :mod:`mobile_ep.pipeline` functions.
        """

        def register(*items: object, name: str | None = None) -> Any:
            if items and all(isinstance(i, Backend) for i in items):
                plugin: object = _BackendsPlugin(items)  # type: ignore[arg-type]
            elif len(items) == 1:
                plugin = items[0]
            else:
                raise TypeError("register either Backend instances or a single plugin object")
            mobile_ep_plugins.register(plugin, name=name)
            return mobile_ep_plugins

        return register

    @pytest.fixture
    def mobile_ep_cli(mobile_ep_plugins: Any) -> Callable[..., Any]:
        """``run("check", "model.onnx", "--ep", "mynpu")``: the mobile-ep command with this test's plugins.

        Returns click's ``Result`` (``exit_code``, ``stdout``, ``stderr``).
        """
        from click.testing import CliRunner

        from mobile_ep.cli.main import main

        def run(*args: str | os.PathLike) -> Any:
            return CliRunner().invoke(main, [str(a) for a in args], obj=mobile_ep_plugins)

        return run


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("mobile-ep", "mobile-ep backend conformance")
    group.addoption("--mobile-ep-report", metavar="FILE", default=None,
                    help="write the conformance results (claimed, passed, failed cases per backend) as JSON")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    if not _SESSION:
        return
    terminalreporter.section("mobile-ep conformance")
    per_backend: dict[str, int] = {}
    for report in _SESSION.values():
        per_backend[report.backend] = per_backend.get(report.backend, 0) + 1
    for report in _SESSION.values():
        terminalreporter.write_line(report.summary(with_suite=per_backend[report.backend] > 1))
        for case in report.cases:
            if case.status == "failed":
                terminalreporter.write_line(f"  failed {case.case}: {case.detail}")
    path = config.getoption("--mobile-ep-report", default=None)
    if path:
        pathlib.Path(path).write_text(json.dumps([r.as_dict() for r in _SESSION.values()], indent=2) + "\n")
        terminalreporter.write_line(f"conformance report written to {path}")
