"""Progress of long steps, for people watching a terminal.

The pipeline announces its steps (``with progress.step("load"): ...``) and loops announce their items
(``for case in progress.track(cases, "conformance nnapi"): ...``).  Nothing is shown unless a reporter
is installed with :func:`reporting` — the command line installs a :class:`TerminalProgress` on stderr
when stderr is a terminal and ``--quiet`` is not given — so library code never prints.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Protocol, TypeVar

__all__ = ["Timer", "Reporter", "TerminalProgress", "reporting", "active", "paused", "step", "track", "STEP_LABELS",
           "wants_progress", "listen", "notify"]

T = TypeVar("T")

#: What the pipeline's steps are called on screen.
STEP_LABELS = {
    "read": "reading and checking the model (onnx's checker)",
    "load": "loading and folding (onnxruntime basic optimizations)",
    "partition": "partitioning",
    "after_convert": "after-convert analysis (shape fixes, rewrites)",
    "export_onnx": "writing the EP-aware model (CPU fusion)",
    "export_ort": "writing ORT format",
    "compile": "compiling partitions",
    "verify": "verifying (onnxruntime, original vs converted)",
}


class Reporter(Protocol):
    """Receives progress events; implementations must be cheap and must not raise."""

    def begin(self, label: str, total: int | None = None) -> None:
        """A task starts: a pipeline step (``total`` None) or a loop over ``total`` items."""

    def advance(self, label: str, done: int) -> None:
        """``done`` items of the current loop are finished."""

    def end(self, label: str) -> None:
        """The task is over."""


_REPORTER: contextvars.ContextVar[Reporter | None] = contextvars.ContextVar("mobile_ep_progress", default=None)


@contextlib.contextmanager
def reporting(reporter: Reporter | None) -> Iterator[Reporter | None]:
    """Send the progress events of this context (and its threads' copies of it) to *reporter*."""
    token = _REPORTER.set(reporter)
    try:
        yield reporter
    finally:
        _REPORTER.reset(token)
        close = getattr(reporter, "close", None)
        if close is not None:
            close()


def active() -> bool:
    """Whether a reporter is listening (so that loops worth following may report item by item)."""
    return _REPORTER.get() is not None


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Clear the progress line while printing something else; it is redrawn afterwards."""
    reporter = _REPORTER.get()
    pause = getattr(reporter, "pause", None)
    if pause is None:
        yield
        return
    with pause():
        yield


_LISTENERS: list[Callable[[str, str], None]] = []


def listen(listener: Callable[[str, str], None], *, alone: bool = False) -> None:
    """Call *listener* with ``(kind, value)`` for the rest of the process: ``("model", path)`` when a
    model given by the user is read, ``("step", name)`` when a step starts, ``("stage", folder)`` when an
    output staging folder is made (the command line's crash supervision, :mod:`mobile_ep.cli.crash`).
    *alone*: instead of the listeners so far (a forked job of a batch watches only itself)."""
    if alone:
        _LISTENERS.clear()
    _LISTENERS.append(listener)


def notify(kind: str, value: str) -> None:
    for listener in _LISTENERS:
        listener(kind, value)


@contextlib.contextmanager
def step(name: str) -> Iterator[None]:
    """A pipeline step (``load``, ``partition``, ``verify``, ...)."""
    if _LISTENERS:
        notify("step", name)
    reporter = _REPORTER.get()
    if reporter is None:
        yield
        return
    label = STEP_LABELS.get(name, name.replace("_", " "))
    reporter.begin(label)
    try:
        yield
    finally:
        reporter.end(label)


def track(items: Iterable[T], label: str, total: int | None = None) -> Iterator[T]:
    """Iterate over *items*, reporting each one done."""
    reporter = _REPORTER.get()
    if reporter is None:
        yield from items
        return
    if total is None and isinstance(items, Sequence):
        total = len(items)
    reporter.begin(label, total)
    done = 0
    try:
        for item in items:
            yield item
            done += 1
            reporter.advance(label, done)
    finally:
        reporter.end(label)


def wants_progress(stream: IO[str] | None = None, *, quiet: bool = False) -> bool:
    """Whether to draw progress on *stream* (stderr): only on a terminal, never with --quiet or TERM=dumb."""
    stream = stream if stream is not None else sys.stderr
    if quiet or os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class TerminalProgress:
    """A one-line progress bar redrawn in place on a terminal, cleared when done.

    Steps show a spinner and the elapsed time (a background thread redraws it while a long step runs);
    loops show a bar, ``done/total`` and an estimate of the time left.  ``plan`` names the steps expected,
    so the bar also counts steps (``[3/5]``).
    """

    SPINNER = "|/-\\"

    def __init__(self, stream: IO[str] | None = None, *, plan: Sequence[str] = (), prefix: str = "mobile-ep",
                 interval: float = 0.1) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.plan = [STEP_LABELS.get(s, s) for s in plan]
        self.prefix = prefix
        self.interval = interval
        self._lock = threading.Lock()
        self._stack: list[tuple[str, int | None, int, float]] = []  # label, total, done, started
        self._steps_done = 0
        self._shown = 0
        self._tick = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Extra text after the bar (e.g. the model being worked on in a batch).
        self.note = ""

    # -- Reporter ---------------------------------------------------------------------------------
    def begin(self, label: str, total: int | None = None) -> None:
        with self._lock:
            self._stack.append((label, total, 0, time.monotonic()))
            self._draw()
        self._ensure_thread()

    def advance(self, label: str, done: int) -> None:
        with self._lock:
            if self._stack and self._stack[-1][0] == label:
                name, total, _, started = self._stack[-1]
                self._stack[-1] = (name, total, done, started)
            self._draw()

    def end(self, label: str) -> None:
        with self._lock:
            for i in range(len(self._stack) - 1, -1, -1):
                if self._stack[i][0] == label:
                    if self._stack[i][1] is None:
                        self._steps_done += 1
                    del self._stack[i]
                    break
            self._draw()

    def set_note(self, note: str) -> None:
        with self._lock:
            self.note = note
            self._draw()

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        with self._lock:
            self._clear()
            try:
                yield
            finally:
                self._draw()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1)
        with self._lock:
            self._clear()

    # -- drawing ----------------------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self._thread is None and self.interval > 0:
            self._thread = threading.Thread(target=self._run, name="mobile-ep-progress", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                if self._stack:
                    self._tick += 1
                    self._draw()

    def _width(self) -> int:
        import shutil

        return max(40, shutil.get_terminal_size((80, 24)).columns - 1)

    def line(self) -> str:
        """The text of the progress line as it would be drawn now."""
        if not self._stack:
            return ""
        width = self._width()
        now = time.monotonic()
        parts = [self.prefix + ":"]
        loops = [entry for entry in self._stack if entry[1] is not None]
        steps = [entry for entry in self._stack if entry[1] is None]
        if loops:
            label, total, done, started = loops[0]
            total = max(total or 0, 1)
            bar_width = max(10, min(30, width // 4))
            filled = int(bar_width * min(done, total) / total)
            parts.append(f"[{'#' * filled}{'-' * (bar_width - filled)}] {done}/{total} {label}")
            if 0 < done < total:
                left = (now - started) / done * (total - done)
                parts.append(f"~{_duration(left)} left")
        if steps:
            label, _, _, started = steps[-1]
            count = f"[{min(self._steps_done + 1, len(self.plan))}/{len(self.plan)}] " if self.plan and not loops else ""
            parts.append(f"{self.SPINNER[self._tick % len(self.SPINNER)]} {count}{label} {_duration(now - started)}")
        if self.note:
            parts.append(self.note)
        text = " ".join(parts)
        return text if len(text) <= width else text[: width - 1] + "…"

    def _draw(self) -> None:
        text = self.line()
        if not text:
            self._clear()
            return
        try:
            self.stream.write("\r" + text + " " * max(0, self._shown - len(text)))
            self.stream.flush()
        except (OSError, ValueError):
            return
        self._shown = len(text)

    def _clear(self) -> None:
        if self._shown:
            try:
                self.stream.write("\r" + " " * self._shown + "\r")
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self._shown = 0


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


class Timer:
    """Seconds per stage, for the report; each stage is also a step of the progress display."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            with step(name):
                yield
        finally:
            self.timings[name] = round(self.timings.get(name, 0.0) + time.perf_counter() - start, 4)
