"""A native crash while a command runs — a segmentation fault (SIGSEGV), an abort (SIGABRT), a bus error
(SIGBUS), an illegal instruction (SIGILL) or an arithmetic fault (SIGFPE) in onnxruntime, onnx or another
compiled library — ends the command with one line naming the model and the step, exit code 8
(:data:`EXIT_CRASH`), and no partial output.

As the program on Linux (``mobile-ep``, ``python -m mobile_ep.cli``), :func:`supervise` forks once the
command line is parsed: the child runs the command, the parent only waits for it.  The child tells the
parent, through a page of shared memory, which model it works on, which step it is in (the pipeline's
``timer`` stages, through :func:`mobile_ep.progress.listen`) and which staging folders it made
(:mod:`mobile_ep.writes`); :mod:`faulthandler` writes the Python stack of a crash to a temporary file, whose
innermost frame names the library.  When the child dies of one of those signals the parent prints the line
and removes the child's staging folders (the output folder keeps its previous complete set, as after any
error).

Signals: Ctrl-C at the terminal reaches both processes; the parent ignores it (the child handles it and
exits 130, which the parent passes on).  A signal sent to the parent alone (``kill -INT``, ``kill -TERM``)
is passed on to the child.  The child is killed with the parent (SIGKILL of the parent leaves no orphan).
Elsewhere (no ``fork``, ``sigwaitinfo`` or ``prctl``: macOS, Windows) the command runs unsupervised.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import re
import shutil
import signal
import struct
import sys
import tempfile

__all__ = ["EXIT_CRASH", "CRASH_SIGNALS", "SHARED_BYTES", "supervise", "watch", "died", "crash_message"]

#: The exit code of a command whose process died of a native crash.
EXIT_CRASH = 8
#: The signals that are a crash of native code.
CRASH_SIGNALS = (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE)
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
SHARED_BYTES = 1 << 16
_PR_SET_PDEATHSIG = 1
#: The innermost Python frame of the crashing thread, in these packages, names the library that crashed.
_LIBRARIES = ("onnxruntime", "onnx", "onnx_ir", "coremltools", "numpy", "google")
_SUPERVISED = "MOBILE_EP_SUPERVISED"


def supervise() -> None:
    """As the program, on a platform that allows it: fork; the child returns and runs the command, the
    parent never returns (it exits as the child did, see the module's doc)."""
    from mobile_ep import _startup

    if not _startup.PROGRAM or os.environ.get(_SUPERVISED) or not _possible():
        return
    shared = mmap.mmap(-1, SHARED_BYTES)  # (anonymous and shared with the child)
    trace = tempfile.TemporaryFile(prefix="mobile-ep-crash-")
    watched = {signal.SIGCHLD, *_FORWARDED}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, watched)  # (before the fork: no signal is lost)
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.environ[_SUPERVISED] = "1"
        _child(shared, trace, parent)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return
    code = _wait(pid, watched)
    _exit_as(code, shared, trace)


def _possible() -> bool:
    return (hasattr(os, "fork") and hasattr(signal, "sigwaitinfo") and hasattr(signal, "pthread_sigmask")
            and sys.platform.startswith("linux"))


# -- the child -------------------------------------------------------------------------------------
def _child(shared: mmap.mmap, trace, parent: int) -> None:
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # (the parent died before prctl)
        os._exit(1)
    watch(shared, trace)


def watch(shared: mmap.mmap, trace, model: str | None = None, *, alone: bool = False) -> None:
    """In the process that may crash: :mod:`faulthandler` writes to *trace*, the model and step go to
    *shared* (an anonymous shared page of :data:`SHARED_BYTES`), starting with *model* if given; *alone*:
    this process's page replaces those it inherited (a forked job of a batch)."""
    import faulthandler

    from mobile_ep import progress

    faulthandler.enable(file=trace, all_threads=True)
    state: dict[str, object] = {"model": model, "step": None, "stages": []}

    def heard(kind: str, value: str) -> None:
        if kind == "stage":
            state["stages"] = [*state["stages"], value][-64:]
        else:
            state[kind] = value
            if kind == "model":
                state["step"] = "read"
        data = json.dumps(state).encode()[:SHARED_BYTES - 4]
        shared[4:4 + len(data)] = data
        shared[:4] = struct.pack("<I", len(data))

    progress.listen(heard, alone=alone)
    if model is not None:
        heard("model", model)


def died(signum: int, shared: mmap.mmap, trace) -> str:
    """After a process watched by :func:`watch` died of *signum*: its staging folders are removed and the
    one line (:func:`crash_message`) returned."""
    state = _state(shared)
    for stage in state.get("stages") or []:
        if isinstance(stage, str):
            shutil.rmtree(stage, ignore_errors=True)
    return crash_message(signum, state, _library(trace))


# -- the parent ------------------------------------------------------------------------------------
def _wait(pid: int, watched: set[int]) -> int:
    """The child's wait status; signals sent to the parent alone are passed on to the child."""
    while True:
        info = signal.sigwaitinfo(watched)
        if info.si_signo == signal.SIGCHLD:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return status
            continue
        if info.si_code <= 0:  # sent by a process (kill, raise): the child has not seen it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, info.si_signo)
        # else from the kernel (the terminal's Ctrl-C, Ctrl-\\, a hang-up): the child's group got it too


def _exit_as(status: int, shared: mmap.mmap, trace) -> None:
    if os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    signum = os.WTERMSIG(status)
    state = _state(shared)
    for stage in state.get("stages") or []:
        if isinstance(stage, str):
            shutil.rmtree(stage, ignore_errors=True)
    if signum == signal.SIGINT:
        _say("mobile-ep: interrupted")
        os._exit(130)
    if signum not in CRASH_SIGNALS:  # (SIGKILL, SIGTERM ...): die the same way
        sys.stderr.flush()
        signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)
    _say(crash_message(signum, state, _library(trace)))
    os._exit(EXIT_CRASH)


def crash_message(signum: int, state: dict, library: str | None) -> str:
    """The one line for a child that died of *signum* in *state* (model, step) inside *library*."""
    from mobile_ep.progress import STEP_LABELS
    from mobile_ep.textsafe import escape

    name = signal.Signals(signum).name
    what = f"{library} crashed" if library else "a native library crashed"
    model = state.get("model")
    step = state.get("step")
    where = f' at step "{STEP_LABELS.get(step, str(step).replace("_", " "))}"' if step else ""
    head = f"mobile-ep: error: {model}: " if model else "mobile-ep: error: "
    line = (f"{head}{what} ({name}){where}: a bug of that library on this model, not reported as an "
            "exception; nothing was written (the output folder keeps its previous set)")
    return escape(line, one_line=True)


def _state(shared: mmap.mmap) -> dict:
    try:
        (size,) = struct.unpack("<I", shared[:4])
        state = json.loads(shared[4:4 + size].decode()) if 0 < size <= SHARED_BYTES - 4 else {}
    except (ValueError, struct.error):
        return {}
    return state if isinstance(state, dict) else {}


def _library(trace) -> str | None:
    """The library of the crash, from faulthandler's report: the package of the innermost Python frame of the
    crashing thread, or, when the crash is in a thread with no Python frames (a native worker of the
    library), of the innermost frame of a thread that is inside a known library (waiting in its call)."""
    try:
        trace.seek(0)
        text = trace.read(1 << 20).decode(errors="replace")
    except OSError:
        return None
    blocks = re.split(r"\n\s*\n", text)
    blocks.sort(key=lambda block: not block.lstrip().startswith("Current thread"))
    for block in blocks:
        frames = re.findall(r'File "([^"]+)"', block)
        if frames:
            package = _package(frames[0])
            if package is not None:
                return package
    return None


def _package(path: str) -> str | None:
    parts = re.split(r"[\\/]", path)
    roots = [i for i, p in enumerate(parts) if p in ("site-packages", "dist-packages")]
    if not roots or roots[-1] + 1 >= len(parts):
        return None
    package = parts[roots[-1] + 1]
    if package not in _LIBRARIES:
        return None
    return "protobuf" if package == "google" else package


def _say(line: str) -> None:
    with contextlib.suppress(OSError):
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
