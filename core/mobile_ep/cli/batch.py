"""Many models in one command: folders and globs, parallel jobs, one summary line per model.

``mobile-ep check models/`` (or ``'models/**/*.onnx'``, or several paths) runs the command on each
model, ``--jobs N`` at a time, continues past a model that fails, and ends with a table: nodes,
partitions, share of nodes claimed and verdict per backend, or the error.  When a model failed the exit
code is :data:`EXIT_SOME_FAILED`.

Jobs are processes (forked, so they share the loaded plugins; one per model, so that a native crash is
that model's failure alone) where the platform can fork, threads elsewhere.  Each job returns a
:class:`ModelResult` — plain data, never the model.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import glob
import multiprocessing
import os
import pathlib
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence

from mobile_ep import progress
from mobile_ep.cli import crash
from mobile_ep.errors import EXIT_FAILURE, MobileEpError, ModelError

__all__ = [
    "EXIT_SOME_FAILED",
    "SomeModelsFailed",
    "ModelResult",
    "is_batch",
    "expand_models",
    "unique_stems",
    "run_many",
    "check_row",
    "convert_row",
    "summary_table",
    "batch_json",
]

#: Exit code of a batch in which at least one model failed (each failure is in the summary).
EXIT_SOME_FAILED = 6
_GLOB = frozenset("*?[")


class SomeModelsFailed(MobileEpError):
    """Several models were given and at least one of them failed."""

    exit_code = EXIT_SOME_FAILED


@dataclasses.dataclass
class ModelResult:
    model: str
    ok: bool
    #: The failure's exit code (as if the model had been given alone) and its one-line message.
    exit_code: int = 0
    error: str = ""
    #: The numbers of the summary line (see :func:`check_row`, :func:`convert_row`).
    row: dict = dataclasses.field(default_factory=dict)
    #: The full report as JSON-ready data, when asked for (``--json``).
    report: dict | None = None
    #: The text report, when asked for (``-v``).
    text: str = ""
    #: The HTML report written for this model, if any.
    html: str | None = None
    seconds: float = 0.0

    def as_dict(self) -> dict:
        result: dict = {"model": self.model, "ok": self.ok}
        if not self.ok:
            result.update(exit_code=self.exit_code, error=self.error)
        if self.html:
            result["html"] = self.html
        if self.report is not None:
            result["report"] = self.report
        result["seconds"] = round(self.seconds, 3)
        return result


# --------------------------------------------------------------------------------------------------
# Which models
# --------------------------------------------------------------------------------------------------
def _is_glob(text: str) -> bool:
    return any(c in _GLOB for c in text) and not os.path.exists(text)


def _models_in(folder: str) -> list[str]:
    return sorted(str(p) for p in pathlib.Path(folder).glob("*.onnx") if p.is_file())


def is_batch(arguments: Sequence[str | os.PathLike]) -> bool:
    """Several models, a folder of models or a glob: the batch form (one file keeps the one-model form)."""
    return len(arguments) > 1 or any(_is_glob(os.fspath(a)) or (os.path.isdir(a) and _models_in(os.fspath(a)))
                                     for a in arguments)


def expand_models(arguments: Sequence[str | os.PathLike]) -> list[pathlib.Path]:
    """Files as given; folders as their ``*.onnx`` files; globs (``**`` recurses) expanded; in order, once each.

    A glob matching nothing is an error (exit 3) before anything runs; a missing file, or a folder with
    no ``*.onnx`` in it, is left for its own run to report.
    """
    result: list[pathlib.Path] = []
    seen: set[str] = set()
    for argument in arguments:
        text = os.fspath(argument)
        if _is_glob(text):
            matches = sorted(m for m in glob.glob(text, recursive=True) if os.path.isfile(m))
            if not matches:
                raise ModelError(f"{text}: no such file (no model matches this pattern)")
        elif os.path.isdir(text) and _models_in(text):
            matches = _models_in(text)
        else:
            matches = [text]
        for match in matches:
            key = os.path.abspath(match)
            if key not in seen:
                seen.add(key)
                result.append(pathlib.Path(match))
    return result


def unique_stems(paths: Sequence[pathlib.Path]) -> list[str]:
    """A file-name stem per model (``resnet50``), made unique with ``-2``, ``-3``... where names repeat."""
    stems = []
    used: dict[str, int] = {}
    for path in paths:
        stem = path.name[:-5] if path.name.endswith(".onnx") else path.stem or "model"
        count = used.get(stem, 0) + 1
        used[stem] = count
        stems.append(stem if count == 1 else f"{stem}-{count}")
    return stems


# --------------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------------
def _guarded(work: Callable[[int], ModelResult], index: int, name: str, debug: bool) -> ModelResult:
    start = time.perf_counter()
    try:
        result = work(index)
    except MobileEpError as exc:
        result = ModelResult(name, False, exc.exit_code, str(exc))
    except Exception as exc:
        message = " ".join(str(exc).split()) or "no message"
        detail = ("\n" + traceback.format_exc().rstrip()) if debug else " (rerun with --debug for the traceback)"
        result = ModelResult(name, False, EXIT_FAILURE, f"internal error: {type(exc).__name__}: {message}{detail}")
    result.seconds = time.perf_counter() - start
    return result


def _fork_possible() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


class _Job:
    """One model in a forked process of its own: its result comes back through a pipe; a native crash
    (:data:`~mobile_ep.cli.crash.CRASH_SIGNALS`) is this model's failure, with the line and exit code a
    lone model gets (:mod:`mobile_ep.cli.crash`)."""

    def __init__(self, index: int, name: str, work: Callable[[int], ModelResult], debug: bool):
        import mmap

        self.index, self.name = index, name
        self.shared = mmap.mmap(-1, crash.SHARED_BYTES)
        self.trace = tempfile.TemporaryFile(prefix="mobile-ep-crash-")
        self.start = time.perf_counter()
        context = multiprocessing.get_context("fork")
        self.reader, writer = context.Pipe(duplex=False)
        self.process = context.Process(target=self._run, args=(work, debug, writer), daemon=True)
        self.process.start()
        writer.close()

    def _run(self, work: Callable[[int], ModelResult], debug: bool, writer) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # (Ctrl-C: the batch stops and kills its jobs)
        crash.watch(self.shared, self.trace, self.name, alone=True)
        with progress.reporting(None):  # never draw from a job
            result = _guarded(work, self.index, self.name, debug)
        writer.send(result)
        writer.close()

    def result(self) -> ModelResult:
        """Once :attr:`reader` is ready: the job's result, or its failure if the process died."""
        try:
            result = self.reader.recv()
        except (EOFError, OSError):
            result = None
        self.process.join()
        self.reader.close()
        if result is None:
            code = self.process.exitcode or 0
            if -code in crash.CRASH_SIGNALS:
                line = crash.died(-code, self.shared, self.trace)
                result = ModelResult(self.name, False, crash.EXIT_CRASH, line.removeprefix("mobile-ep: error: "))
            else:
                how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
                result = ModelResult(self.name, False, EXIT_FAILURE,
                                     f"internal error: the job running this model died ({how})")
            result.seconds = time.perf_counter() - self.start
        self.shared.close()
        self.trace.close()
        return result


def _run_forked(paths: Sequence[pathlib.Path], work: Callable[[int], ModelResult], jobs: int, debug: bool,
                on_result: Callable[[ModelResult], None] | None, label: str) -> list[ModelResult]:
    from multiprocessing.connection import wait

    results: list[ModelResult | None] = [None] * len(paths)
    waiting = list(range(len(paths)))
    running: dict[object, _Job] = {}
    tracker = progress.track(range(len(paths)), label, total=len(paths))
    next(tracker, None)  # (begins the bar; each result done advances it)
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                i = waiting.pop(0)
                job = _Job(i, str(paths[i]), work, debug)
                running[job.reader] = job
            for reader in wait(list(running)):
                job = running.pop(reader)
                results[job.index] = result = job.result()
                next(tracker, None)
                if on_result is not None:
                    on_result(result)
    finally:
        for job in running.values():  # (interrupted)
            job.process.kill()
            job.process.join()
        tracker.close()
    return results  # type: ignore[return-value]


def run_many(paths: Sequence[pathlib.Path], work: Callable[[int], ModelResult], *, jobs: int = 1,
             debug: bool = False, on_result: Callable[[ModelResult], None] | None = None,
             label: str = "models") -> list[ModelResult]:
    """``work(i)`` for each model (``paths[i]``), *jobs* at a time; results in input order.

    ``work`` may raise: a :class:`MobileEpError` becomes a failed result with its exit code, anything
    else a failed result with exit code 1.  Where the platform can fork, each model of several runs in a
    forked process of its own, so that a native crash on one model is that model's failure (exit code
    :data:`~mobile_ep.cli.crash.EXIT_CRASH`) and the others go on.  ``on_result`` sees each result as it
    comes in.
    """
    jobs = max(1, jobs)
    if len(paths) >= 2 and _fork_possible():
        return _run_forked(paths, work, jobs, debug, on_result, label)
    results: list[ModelResult | None] = [None] * len(paths)
    if jobs == 1 or len(paths) < 2:
        for i in progress.track(range(len(paths)), label, total=len(paths)):
            results[i] = _guarded(work, i, str(paths[i]), debug)
            if on_result is not None:
                on_result(results[i])  # type: ignore[arg-type]
        return results  # type: ignore[return-value]
    with concurrent.futures.ThreadPoolExecutor(min(jobs, len(paths))) as executor:
        futures = {executor.submit(_threaded, work, i, str(p), debug): i for i, p in enumerate(paths)}
        for future in progress.track(concurrent.futures.as_completed(futures), label, total=len(paths)):
            results[futures[future]] = future.result()
            if on_result is not None:
                on_result(results[futures[future]])  # type: ignore[arg-type]
    return results  # type: ignore[return-value]


def _threaded(work: Callable[[int], ModelResult], index: int, name: str, debug: bool) -> ModelResult:
    with progress.reporting(None):  # never draw from a worker
        return _guarded(work, index, name, debug)


# --------------------------------------------------------------------------------------------------
# Summary lines
# --------------------------------------------------------------------------------------------------
def _numbers(report) -> dict:
    return {"nodes": report.nodes, "claimed": report.supported_nodes, "partitions": len(report.partitions),
            "verdict": report.verdict}


def check_row(report) -> dict:
    """The summary numbers of a :class:`~mobile_ep.pipeline.CheckReport`."""
    backends = {}
    for name, b in report.backends.items():
        entry = _numbers(b)
        after = report.after_convert.get(name)
        if after is not None:
            entry["after"] = _numbers(after)
        backends[name] = entry
    return {"nodes": report.nodes, "backends": backends}


def convert_row(report) -> dict:
    """The summary numbers of a :class:`~mobile_ep.pipeline.ConvertReport`."""
    entry = _numbers(report.check)
    if report.before is not None:
        entry["before"] = _numbers(report.before)
    verified = None if not report.verification else all(v.ok for v in report.verification)
    nodes = report.before.nodes if report.before is not None else report.check.nodes
    return {"nodes": nodes, "backends": {report.backend: entry}, "verified": verified,
            "output": os.path.dirname(report.outputs.get("report", "")) or "."}


def _pct(entry: dict) -> str:
    return f"{100.0 * entry['claimed'] / entry['nodes']:.1f}%" if entry.get("nodes") else "-"


def _clip_left(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[len(text) - width + 1:]


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _display_names(models: Sequence[str]) -> list[str]:
    """Model paths relative to the folder they all share (the whole path for a lone model)."""
    if len(models) < 2:
        return list(models)
    try:
        prefix = os.path.commonpath([os.path.abspath(m) for m in models])
    except ValueError:  # different drives
        return list(models)
    if not os.path.isdir(prefix):
        prefix = os.path.dirname(prefix)
    return [os.path.relpath(os.path.abspath(m), prefix) for m in models]


def summary_table(results: Sequence[ModelResult], kind: str, *, width: int | None = None) -> str:
    """One line per model, fitted to *width* (by default the terminal's; nothing is cut when stdout is not a
    terminal).

    Per backend: partitions, share of nodes claimed, verdict, and the after-convert (check) or
    before-mobile-ep (convert) partitions and verdict.  To fit, model names are shortened from the left
    (to 18 characters at least), then the extra columns go, then each backend's columns merge into one.
    """
    if width is None:
        width = max(60, min(shutil.get_terminal_size((120, 24)).columns, 200)) if sys.stdout.isatty() else 100_000
    backends: list[str] = []
    for r in results:
        for name in r.row.get("backends", {}):
            if name not in backends:
                backends.append(name)
    names = _display_names([r.model for r in results])
    extra_key = "after" if kind == "check" else "before"
    extra_title = "after convert" if kind == "check" else "before"

    def cells_for(r: ModelResult, with_extra: bool, compact: bool) -> list[str]:
        cells = [str(r.row.get("nodes", ""))]
        for name in backends:
            e = r.row.get("backends", {}).get(name)
            x = e.get(extra_key) if e is not None else None
            extra = (f"{x['partitions']}p {x['verdict']}" if x else "-") if with_extra else ""
            if compact:
                cell = "-" if e is None else f"{e['partitions']}p {_pct(e)} {e['verdict']}"
                cells.append(cell + (f" > {extra}" if with_extra and e is not None else ""))
                continue
            cells += ["-", "-", "-"] if e is None else [str(e["partitions"]), _pct(e), e["verdict"]]
            if with_extra:
                cells.append(extra)
        if kind == "convert":
            verified = r.row.get("verified")
            cells.append("-" if verified is None else ("ok" if verified else "DIFFERS"))
        return cells

    def render(with_extra: bool, compact: bool, force: bool = False) -> list[str] | None:
        titles = ["nodes"]
        groups = []
        for name in backends:
            if compact:
                titles.append(name + (f" (> {extra_title})" if with_extra else ""))
                continue
            group = ["parts", "claimed", "verdict"] + ([extra_title] if with_extra else [])
            groups.append((name, len(titles), len(group)))
            titles += group
        if kind == "convert":
            titles.append("verify")
        widths = [len(t) for t in titles]
        for r in results:
            if r.ok:
                widths = [max(w, len(c)) for w, c in zip(widths, cells_for(r, with_extra, compact), strict=True)]
        rest = sum(widths) + 2 * len(widths)
        model_width = max(5, max((len(n) for n in names), default=5))
        if model_width + rest > width:
            model_width = max(min(model_width, 18), width - rest)
            if model_width + rest > width and not force:
                return None
        lines = []
        header2 = "model".ljust(model_width) + "".join("  " + t.rjust(w) for t, w in zip(titles, widths, strict=True))
        if groups:
            header1 = [" "] * len(header2)
            for name, first, count in groups:
                offset = model_width + sum(widths[:first]) + 2 * first + 2
                span = sum(widths[first:first + count]) + 2 * (count - 1)
                label = _clip(f"{name} " + "-" * max(0, span - len(name) - 1), span)
                header1[offset:offset + len(label)] = list(label)
            lines.append("".join(header1).rstrip())
        lines.append(header2)
        for r, name in zip(results, names, strict=True):
            model = _clip_left(name, model_width).ljust(model_width)
            if r.ok:
                cells = cells_for(r, with_extra, compact)
                lines.append(model + "".join("  " + c.rjust(w) for c, w in zip(cells, widths, strict=True)))
            else:
                message = r.error.splitlines()[0] if r.error else "failed"
                for prefix in (f"{r.model}: ", f"{os.path.abspath(r.model)}: "):
                    message = message[len(prefix):] if message.startswith(prefix) else message
                lines.append(model + "  " + _clip(f"FAILED (exit {r.exit_code}): {message}",
                                                  max(20, width - model_width - 2)))
        return lines

    lines = (render(True, False) or render(False, False) or render(True, True) or render(False, True)
             or render(False, True, force=True) or [])
    prefix = os.path.commonpath([os.path.abspath(r.model) for r in results]) if len(results) > 1 else ""
    if prefix and os.path.isdir(prefix):
        lines.insert(0, _clip_left(f"in {prefix}:", width))
    failed = sum(1 for r in results if not r.ok)
    total = sum(r.seconds for r in results)
    lines.append("")
    lines.append(f"{len(results)} model{'s' if len(results) != 1 else ''}: {len(results) - failed} ok, "
                 f"{failed} failed ({total:.1f} s of work)")
    return "\n".join(lines) + "\n"


def batch_json(results: Sequence[ModelResult]) -> dict:
    failed = sum(1 for r in results if not r.ok)
    return {"models": [r.as_dict() for r in results],
            "summary": {"models": len(results), "ok": len(results) - failed, "failed": failed}}
