"""``llm --compile`` for a backend whose compiled partitions can be the functions of one model: the compiled
partitions of the prefill and decode graphs together, the weights they share stored once.

A compiling backend offers this with ``package_functions(payloads, path) -> (written path, {name: payload})``
(:mod:`mobile_ep.contract.compile`; Core ML: one multifunction ``.mlpackage``, iOS 18 / macOS 15).  Each graph's
compiled model (``convert --compile``'s EPContext model, which stays what onnxruntime runs) gives its partitions'
payloads; the function of a graph's only partition is named after the graph (``prefill``), those of a graph with
several after the graph and the partition's place in the model (``prefill_0``, ``prefill_1``), prefixed by the part
of a split model (``part1_prefill``).  The first function is the default one.

Checked: each graph's compiled model runs again with every partition replaced by its function of the package
(the backend's emulator running that function), against onnxruntime's CPU result on the graph, with the tolerances
of ``convert --compile``'s verification; every function must have run.  The report gives the package's size
against the per-graph packages' (each partition's unpacked package in the graphs' app bundles).  Partitions the
backend cannot make functions of (Core ML: NeuralNetwork models) are reported as not packaged, with the backend's
reason; the per-graph compiled models stand.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
from collections.abc import Mapping
from typing import Any

from mobile_ep import runtime
from mobile_ep.contract.compile import CompileError
from mobile_ep.errors import BackendError, ModelError

__all__ = ["FunctionsReport", "package_graphs", "supports_functions"]


def supports_functions(backend: Any) -> bool:
    """Whether *backend* writes several compiled partitions as the functions of one model."""
    return callable(getattr(backend, "package_functions", None))


@dataclasses.dataclass
class FunctionsReport:
    """The functions package of one part's graphs."""

    #: The package, relative to the output folder.
    package: str
    #: Function name -> {"graph", "partition"} (the partition's EPContext node in the graph's compiled model).
    functions: dict[str, dict[str, str]]
    default: str
    #: Bytes of the package, and of the per-graph packages it replaces (summed).
    bytes: int
    separate_bytes: int
    #: Per graph: its compiled model run with the functions, against the graph on the CPU EP.
    verification: dict[str, dict[str, Any]]
    #: Functions no verification ran (none when every graph verified).
    not_run: list[str] = dataclasses.field(default_factory=list)
    #: Why no package was written (the backend's reason), or "".
    error: str = ""

    @property
    def verified(self) -> bool:
        return all(v["verified"] for v in self.verification.values()) and not self.not_run

    def as_dict(self) -> dict:
        if self.error:
            return {"package": None, "functions": self.functions, "error": self.error}
        return {"package": self.package, "functions": self.functions, "default": self.default, "bytes": self.bytes,
                "separate_bytes": self.separate_bytes, "ratio": round(self.bytes / max(self.separate_bytes, 1), 4),
                "verified": self.verified, "verification": self.verification, "not_run": self.not_run}

    def text(self) -> str:
        if self.error:
            return f"no functions package: {self.error}"
        worst = max((v["max_abs_error"] for v in self.verification.values()), default=0.0)
        return (f"{self.package}: {len(self.functions)} function(s) ({', '.join(self.functions)}), "
                f"{self.bytes / 2**20:.2f} MB against {self.separate_bytes / 2**20:.2f} MB as per-graph packages "
                f"({self.bytes / max(self.separate_bytes, 1):.2f}x); "
                + (f"each function emulated, verified within {worst:.2g}" if self.verified
                   else "NOT verified: " + "; ".join(_failures(self))))


def _failures(report: FunctionsReport) -> list[str]:
    found = [f"{graph}: {v['detail']}" for graph, v in report.verification.items() if not v["verified"]]
    if report.not_run:
        found.append(f"functions never run: {', '.join(report.not_run)}")
    return found


class _Functions:
    """The backend, each payload of the graphs' compiled models run as its function of the package."""

    def __init__(self, backend: Any, by_payload: Mapping[bytes, list[tuple[str, Any]]]) -> None:
        self.name = backend.name
        self._backend = backend
        self._by_payload = by_payload
        self.ran: set[str] = set()

    def emulate(self, payload: Any, inputs: Mapping[str, Any]) -> dict[str, Any]:
        key = hashlib.sha256(payload.data).digest()
        if key not in self._by_payload:
            raise BackendError(f"{self.name}: a compiled partition that is no function of the package")
        same = self._by_payload[key]  # (byte-identical partitions: functions computing the same)
        self.ran.update(name for name, _ in same)
        return self._backend.emulate(same[0][1], inputs)


def _tree_bytes(path: pathlib.Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def package_graphs(backend: Any, graphs: Mapping[str, tuple[pathlib.Path, pathlib.Path, list[dict]]],
                   target: pathlib.Path, root: pathlib.Path, prefix: str = "") -> FunctionsReport:
    """Write the compiled partitions of *graphs* (name -> (the graph, its compiled model, the rewrites ``convert``
    applied to it)) as the functions of one package at *target* (the backend adds its suffix), check each
    function against the graph on the CPU EP, and report (paths relative to the output folder *root*;
    *prefix*: that of the function names, a split model's part)."""
    from mobile_ep.passes import to_epcontext
    from mobile_ep.passes.verify import reference_of

    payloads: dict[str, Any] = {}
    origin: dict[str, dict[str, str]] = {}
    separate = 0
    for graph, (_, compiled, _) in graphs.items():
        steps = [s for s in runtime.plan_compiled(compiled) if s.kind == "partition"]
        plan = json.loads((to_epcontext.bundle_path(compiled) / "plan.json").read_text())
        separate += sum(_tree_bytes(to_epcontext.bundle_path(compiled) / step["file"]) for step in plan["steps"]
                        if step["kind"] == "partition")
        for k, step in enumerate(steps):
            name = f"{prefix}{graph}" + (f"_{k}" if len(steps) > 1 else "")
            payloads[name] = step.payload
            origin[name] = {"graph": graph, "partition": step.node.name}
    if not payloads:
        return FunctionsReport("", origin, "", 0, 0, {}, error="the graphs' compiled models hold no partition")
    try:
        written, functions = backend.package_functions(payloads, target)
    except CompileError as exc:
        return FunctionsReport("", origin, "", 0, separate, {}, error=str(exc))
    by_payload: dict[bytes, list[tuple[str, Any]]] = {}
    for name in payloads:
        by_payload.setdefault(hashlib.sha256(payloads[name].data).digest(), []).append((name, functions[name]))
    runner = _Functions(backend, by_payload)
    verification = {}
    for graph, (source, compiled, applied) in graphs.items():
        level, why = reference_of(backend, applied)
        try:
            checked = runtime.verify(source, [compiled], backends={backend.name: runner}, reference_level=level,
                                     reference_why=why)[0]
        except (CompileError, ModelError) as exc:  # (a function the emulator cannot run: not verified)
            verification[graph] = {"verified": False, "max_abs_error": float("inf"), "detail": str(exc)}
            continue
        worst = max(checked.outputs, key=lambda o: o.max_abs, default=None)
        bad = [o for o in checked.outputs if not o.ok]
        verification[graph] = {
            "verified": checked.ok, "max_abs_error": worst.max_abs if worst is not None else 0.0,
            "detail": (f"output {bad[0].name!r} max abs error {bad[0].max_abs:.3g}" if bad else "")}
    return FunctionsReport(pathlib.Path(written).relative_to(root).as_posix(), origin, next(iter(payloads)),
                           _tree_bytes(pathlib.Path(written)), separate, verification,
                           sorted(set(payloads) - runner.ran))
