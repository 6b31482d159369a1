"""A decoder's prefill and decode graphs compiled by the backend's real EP into EPContext models whose context
binaries share weights.

The EP compiles the graphs one after the other in ONE child process (:func:`mobile_ep.ep_libraries.compile_shared`:
an EP that crashes ends the child, not the run) with onnxruntime's session config ``ep.share_ep_contexts=1``
(``ep.stop_share_ep_contexts=1`` on the last graph) and ``ep.context_embed_mode=0``: the EP keeps one context
across the compiles and writes every graph into the first graph's context file, which both EPContext models
point to.  The QNN EP shares the graphs' weights in that context (QNN's HTP weight sharing, done offline, here
on x86-64; the provider option ``enable_htp_weight_sharing=1`` is given too, though onnxruntime-qnn 2.7 wrote the
same binary without it): prefill and decode together take about what one graph alone takes.

Checked here:

- **sharing**: every EPContext node of both models points to one context file, and the file names each
  node's graph (its ``partition_name``);
- **size**: each graph is also compiled alone (its own context file): the report gives every file's size
  and the ratio of the shared file to the largest single one (the goal: at most :data:`GOAL_RATIO`);
- **numerics**: a context that holds several graphs cannot be reloaded by the HTP simulator on x86-64
  (onnxruntime-qnn skips that case on x86 in its own tests; loading one crashes the process), so each graph's
  single compile is what runs on the simulator, against onnxruntime's CPU result on the graph before
  compiling, with the tolerance of the EP's arithmetic (the caller's *compare*, e.g. the qnn plugin's
  ``mobile_ep_qnn.compile.compare``: fp16 for float graphs, a share of each output's range for QDQ ones).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from mobile_ep import ep_libraries, sessions
from mobile_ep.errors import BackendError, UsageError

__all__ = ["GOAL_RATIO", "SHARING_OPTIONS", "CompiledGraph", "SharedCompileReport", "compile_shared_graphs",
           "context_files", "real_ep"]

#: prefill + decode in one context: at most this times the largest graph's context alone.
GOAL_RATIO = 1.15
#: Provider options that make an EP's shared context share weights, by EP name.
SHARING_OPTIONS: Mapping[str, Mapping[str, str]] = {"QNNExecutionProvider": {"enable_htp_weight_sharing": "1"}}

#: compare(reference outputs, EP outputs) -> (largest absolute error, within the tolerance)
Compare = Callable[[dict[str, np.ndarray], dict[str, np.ndarray]], tuple[float, bool]]


@dataclasses.dataclass
class CompiledGraph:
    """One graph: its EPContext model, the context files it points to, what compiling it alone gave, and its
    run on the EP against the CPU (of the single compile)."""

    role: str
    source: str
    model: str
    contexts: list[str]
    epcontext_nodes: int
    alone_bytes: int
    max_abs_error: float | None = None
    within_tolerance: bool | None = None
    #: the logits of the real tokens on the EP against the CPU: SQNR (dB) and top-1 agreement
    logits_sqnr_db: float | None = None
    top1: float | None = None

    def as_dict(self) -> dict:
        return {"graph": self.role, "source": self.source, "model": self.model, "contexts": self.contexts,
                "epcontext_nodes": self.epcontext_nodes, "alone_bytes": self.alone_bytes,
                "max_abs_error": self.max_abs_error, "within_tolerance": self.within_tolerance,
                "logits_sqnr_db": self.logits_sqnr_db, "top1_agreement": self.top1}


@dataclasses.dataclass
class SharedCompileReport:
    ep: str
    options: dict[str, str]
    graphs: list[CompiledGraph]
    #: each context file of the shared compile and its size in bytes
    files: dict[str, int]
    #: whether one context file holds every graph (each EPContext node's graph named in it)
    shared: bool
    tolerance: str = ""

    @property
    def shared_bytes(self) -> int:
        return sum(self.files.values())

    @property
    def ratio(self) -> float:
        alone = max((g.alone_bytes for g in self.graphs), default=0)
        return self.shared_bytes / alone if alone else float("inf")

    def as_dict(self) -> dict:
        return {"ep": self.ep, "options": self.options, "shared": self.shared, "files": self.files,
                "shared_bytes": self.shared_bytes, "ratio_to_largest_alone": round(self.ratio, 3),
                "goal_ratio": GOAL_RATIO, "tolerance": self.tolerance,
                "graphs": [g.as_dict() for g in self.graphs]}

    def text(self) -> str:
        lines = [f"compiled by {self.ep} ({', '.join(f'{k}={v}' for k, v in self.options.items())}), "
                 f"{'one shared context' if self.shared else 'contexts NOT shared'}:"]
        for name, size in self.files.items():
            lines.append(f"  {name}: {size / 1e6:.3f} MB")
        for g in self.graphs:
            lines.append(f"  {g.role}: {pathlib.Path(g.model).name} -> {', '.join(g.contexts)}; alone "
                         f"{g.alone_bytes / 1e6:.3f} MB")
        lines.append(f"  shared / largest alone: {self.ratio:.3f}x (goal <= {GOAL_RATIO}x)")
        for g in self.graphs:
            if g.max_abs_error is not None:
                verdict = "within" if g.within_tolerance else "BEYOND"
                lines.append(f"  {g.role} alone on the EP against the CPU: max abs error {g.max_abs_error:.3g}, "
                             f"{verdict} the tolerance{f' ({self.tolerance})' if self.tolerance else ''}; logits "
                             f"SQNR {g.logits_sqnr_db:.1f} dB, top-1 agreement {g.top1:.1%}")
        return "\n".join(lines) + "\n"


def real_ep(backend: Any) -> tuple[ep_libraries.EpLibrary, dict[str, str]]:
    """The plugin EP library and provider options of *backend*'s real EP (``backend.real_ep()``; the qnn
    backend: onnxruntime-qnn's QNN EP, ``backend_type`` and ``soc_model`` from its options), to compile with; a
    one-line :class:`UsageError` when the backend names none or its library is not installed or does not load."""
    real = backend.real_ep()
    if real is None:
        raise UsageError(f"{backend.name}: no ONNX Runtime plugin EP to compile context binaries with")
    name, options = real
    found = [lib for lib in ep_libraries.installed_libraries() if lib.ep_name == name]
    if not found:
        raise UsageError(f"{backend.name}: compiling needs the {name} library, which no installed package provides "
                         f"(known: {', '.join(ep_libraries.KNOWN_PACKAGES)})")
    probe = ep_libraries.probe(found[0])
    if not probe.usable:
        raise UsageError(f"{backend.name}: {probe.problem}")
    return found[0], dict(options)


def context_files(model: str | os.PathLike) -> tuple[list[str], list[tuple[str, str]]]:
    """The context files an EPContext model's nodes point to (relative to it), and each EPContext node's
    (partition name, context file of its main node)."""
    import onnx_ir as ir

    def text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    files: list[str] = []
    nodes: list[tuple[str, str]] = []
    for node in ir.load(str(model)).graph:
        if node.op_type != "EPContext":
            continue
        name = text(node.attributes["partition_name"].value) if "partition_name" in node.attributes else node.name
        if "ep_cache_context" in node.attributes:
            file = text(node.attributes["ep_cache_context"].value)
            if file not in files:
                files.append(file)
        nodes.append((name or "", files[-1] if files else ""))
    return files, nodes


def _names_in(path: pathlib.Path, names: list[str]) -> bool:
    data = path.read_bytes() if path.is_file() else b""
    return bool(names) and all(name.encode() in data for name in names)


def compile_shared_graphs(graphs: Mapping[str, str | os.PathLike], folder: str | os.PathLike,
                          library: ep_libraries.EpLibrary, options: Mapping[str, str], *,
                          feeds: Mapping[str, Mapping[str, np.ndarray]] | None = None,
                          compare: Compare | None = None, tolerance: str = "") -> SharedCompileReport:
    """Compile *graphs* (role -> ONNX file, in order: prefill, then decode) with the EP of *library* and
    provider *options* into ``<folder>/<stem>_ctx.onnx`` each, sharing one context (and weights, with
    :data:`SHARING_OPTIONS`); compile each alone too, for its size; with *feeds* (role -> inputs) and
    *compare*, run each single compile on the EP and compare it with onnxruntime's CPU result."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    sharing = {**options, **SHARING_OPTIONS.get(library.ep_name, {})}
    targets = {role: folder / f"{pathlib.Path(path).stem}_ctx.onnx" for role, path in graphs.items()}
    try:
        written = ep_libraries.compile_shared([(graphs[r], targets[r]) for r in graphs], library, sharing)
    except ep_libraries.EpFailure as exc:
        raise BackendError(f"{library.ep_name} could not compile {', '.join(map(str, graphs.values()))} "
                           f"sharing one context: {exc}") from None
    missing = [str(graphs[r]) for r, w in zip(graphs, written, strict=True) if not w]
    if missing:
        raise BackendError(f"{', '.join(missing)}: {library.ep_name} took no node of it (nothing to compile)")
    results = []
    every_file: dict[str, int] = {}
    nodes_by_file: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="mobile-ep-alone-") as work:
        for role, source in graphs.items():
            files, nodes = context_files(targets[role])
            for name, file in nodes:
                nodes_by_file.setdefault(file, []).append(name)
            for file in files:
                every_file[file] = (folder / file).stat().st_size
            alone = pathlib.Path(work) / targets[role].name
            try:
                ep_libraries.compile_model(source, alone, library, options)
            except ep_libraries.EpFailure as exc:
                raise BackendError(f"{source}: {library.ep_name} could not compile it alone: {exc}") from None
            alone_files, _ = context_files(alone)
            result = CompiledGraph(role, str(source), str(targets[role]), files, len(nodes),
                                   sum((alone.parent / f).stat().st_size for f in alone_files))
            if feeds is not None and compare is not None:
                (result.max_abs_error, result.within_tolerance, result.logits_sqnr_db,
                 result.top1) = _check(source, alone, library, options, feeds[role], compare)
            results.append(result)
    shared = len(every_file) == 1 and all(_names_in(folder / f, names) for f, names in nodes_by_file.items())
    return SharedCompileReport(library.ep_name, dict(sharing), results, every_file, shared, tolerance)


def _check(source: Any, compiled: pathlib.Path, library: ep_libraries.EpLibrary, options: Mapping[str, str],
           feeds: Mapping[str, np.ndarray], compare: Compare) -> tuple[float, bool, float, float]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    session = sessions.open_session(source, so)
    names = [o.name for o in session.get_outputs()]
    reference = dict(zip(names, session.run(names, dict(feeds)), strict=True))
    try:
        got = ep_libraries.run_outputs(compiled, library, options, feeds)
    except ep_libraries.EpFailure as exc:
        raise BackendError(f"{compiled}: {library.ep_name} could not run it: {exc}") from None
    reference, got = (_real_positions(outputs, feeds) for outputs in (reference, got))
    worst, ok = compare(reference, got)
    logits = next(iter(reference))  # (a decoder's first output)
    ref, out = (np.asarray(o[logits], np.float64).reshape(-1, reference[logits].shape[-1]) for o in (reference, got))
    noise = float(np.sum((ref - out) ** 2))
    sqnr = float("inf") if noise == 0 else 10 * float(np.log10(float(np.sum(ref ** 2)) / noise))
    return worst, ok, sqnr, float(np.mean(ref.argmax(-1) == out.argmax(-1)))


def _real_positions(outputs: Mapping[str, np.ndarray], feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """*outputs* at the positions of real tokens only (``attention_mask`` 1, its last entries being the window's):
    the logits' rows and the presents' slots (the whole context, or the window's only).  A padding position's
    values are never read (the mask hides it), so they are not compared."""
    mask = np.asarray(feeds.get("attention_mask", np.zeros((1, 0))))[0].astype(bool)
    kept = {}
    for name, value in outputs.items():
        value = np.asarray(value)
        if value.ndim == 4 and 0 < value.shape[2] <= mask.size:  # (a present: batch, heads, slots, head size)
            value = value[:, :, mask[mask.size - value.shape[2]:], :]
        elif value.ndim == 3 and 0 < value.shape[1] <= mask.size:  # (logits: batch, window, vocabulary)
            value = value[:, mask[mask.size - value.shape[1]:], :]
        kept[name] = value
    return kept
