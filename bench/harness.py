"""What the benchmarks share: the machine's description, commands timed in fresh processes, result files.

Comparisons are made between commands, as a user runs them: each run is a fresh process (interpreter
start-up and imports included), with byte-code caches warm (``PYTHONDONTWRITEBYTECODE`` is removed from
the commands' environment and one warm-up round runs first).  The commands of one comparison run in turn,
round after round (the order rotates every round), so a slow spell of a shared machine falls on all of
them; the tables give medians and ratios of medians measured in the same run.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import pathlib
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

RESULTS = pathlib.Path(__file__).parent / "results"

__all__ = ["header", "RESULTS", "COMMAND_ENV", "machine", "versions", "code", "mobile_ep_command", "run", "alternate", "median", "ratio",
           "reproduce", "child_peak_rss", "write_result", "fmt_s", "remove"]

#: The environment of the timed commands: as after a normal install, byte-code cached (with
#: ``PYTHONDONTWRITEBYTECODE`` set, every run of an editable install compiles its sources again).
COMMAND_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def versions(python: str = sys.executable) -> str:
    """Python, onnxruntime, onnx, onnx_ir and numpy versions of the interpreter *python* (asked in a child)."""
    code = ("import platform, numpy, onnx, onnx_ir, onnxruntime; print(f'Python {platform.python_version()}, "
            "onnxruntime {onnxruntime.__version__}, onnx {onnx.__version__}, onnx_ir {onnx_ir.__version__}, "
            "numpy {numpy.__version__}')")
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, env=COMMAND_ENV)
    return proc.stdout.strip() or f"(versions unknown: {proc.stderr.strip()[-200:]})"


def code(python: str = sys.executable) -> str:
    """The mobile-ep that *python* runs: the commit of the git checkout it is installed from (editable),
    with "+ uncommitted changes" if the checkout has any; else where it is installed."""
    find = "import importlib.util; print(importlib.util.find_spec('mobile_ep').origin)"
    proc = subprocess.run([python, "-c", find], capture_output=True, text=True, env=COMMAND_ENV)
    if proc.returncode:
        return "(mobile_ep not found)"
    where = pathlib.Path(proc.stdout.strip()).parent
    commit = subprocess.run(["git", "-C", str(where), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if commit.returncode:
        return f"mobile_ep installed in {where}"
    dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return f"commit {commit.stdout.strip()}" + (" + uncommitted changes" if dirty else "")


def machine() -> str:
    """One line: CPU model, cores, memory, OS, the load average now, today's date, and the versions."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(pathlib.Path("/proc/meminfo").read_text().split("\n")[0].split()[1])
        memory = f", {kb / 2**20:.0f} GB RAM"
    load = ""
    with contextlib.suppress(OSError, AttributeError):
        load = f", load average {os.getloadavg()[0]:.1f} at start"
    return (f"{cpu}, {os.cpu_count()} cores{memory}, {platform.system()} {platform.machine()}{load}; "
            f"{datetime.date.today().isoformat()}; {versions()}")


def mobile_ep_command(python: str = sys.executable) -> list[str]:
    """The ``mobile-ep`` command of the interpreter *python*: ``PYTHON -m mobile_ep.cli`` (the code the
    console script runs; the module form needs no installed script, and is the same for every tree)."""
    return [python, "-m", "mobile_ep.cli"]


def run(command: Sequence[str], cwd: str | pathlib.Path | None = None, timeout: float = 7200) -> dict:
    """Run *command* in a fresh process, its output thrown away: ``seconds`` (wall time), ``peak_rss``
    (bytes; the largest of the process and the children it waited for), ``written`` (bytes written to files,
    from the output blocks the kernel counts; 0 where it keeps no count), ``rc`` and the tail of ``stderr``."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(list(command), stdout=subprocess.DEVNULL, stderr=err, cwd=cwd, env=COMMAND_ENV)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)  # (the child's own resource usage)
        finally:
            timer.cancel()
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read()[-3000:].decode(errors="replace")
    return {"seconds": seconds, "peak_rss": usage.ru_maxrss * 1024, "written": usage.ru_oublock * 512,
            "rc": proc.returncode, "stderr": stderr}


def alternate(commands: dict[str, Sequence[str]], repeats: int, warmup: int = 1,
              after: Callable[[], object] | None = None) -> dict[str, list[float]]:
    """Wall-clock seconds of each command, *repeats* rounds after *warmup* untimed ones; within a round the
    commands run one after the other, starting one further along each round (A B C, B C A, C A B, ...).
    *after* runs after each command, untimed (e.g. to remove what it wrote).  A command that fails raises."""
    names = list(commands)
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(warmup + repeats):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            result = run(commands[name])
            if after is not None:
                after()
            if result["rc"] != 0:
                raise RuntimeError(f"{shlex.join(commands[name])} failed ({result['rc']}):\n{result['stderr']}")
            if round_ >= warmup:
                times[name].append(result["seconds"])
    return times


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def reproduce(script: str, argv: Sequence[str] | None) -> str:
    """The command that reproduces a run: ``PYTHON bench/SCRIPT ARGS`` (this interpreter: the mobile-ep it
    has installed is the one measured)."""
    args = sys.argv[1:] if argv is None else list(argv)
    return shlex.join([sys.executable, f"bench/{script}", *args])


_MEASURE = """
import json, resource, runpy, sys, time
sys.argv = sys.argv[1:]
start = time.perf_counter()
runpy.run_path(sys.argv[0], run_name="__main__")
seconds = time.perf_counter() - start
usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
peak = max(u.ru_maxrss for u in usage)
print("@@MEASURED@@" + json.dumps({"seconds": seconds, "peak_rss": peak * 1024}))
"""


def child_peak_rss(script: str | pathlib.Path, *args: str, cwd: str | pathlib.Path | None = None,
                   timeout: float = 7200) -> dict:
    """Run ``python SCRIPT ARGS`` in a fresh process: the script's wall time (without the interpreter's
    start), the process's peak RSS, and what it printed (``stdout``)."""
    import json

    proc = subprocess.run([sys.executable, "-c", _MEASURE, str(script), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env=COMMAND_ENV)
    measured: dict = {"rc": proc.returncode, "stderr": proc.stderr[-2000:]}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("@@MEASURED@@")]
    if lines:
        measured.update(json.loads(lines[-1][len("@@MEASURED@@"):]))
    measured["stdout"] = "\n".join(line for line in proc.stdout.splitlines() if not line.startswith("@@MEASURED@@"))
    return measured


def header(title: str, description: str, command: str, label: str = "this tree",
           baseline_label: str | None = None) -> list[str]:
    """The first lines of a results file: its title, the machine, the code measured (and the baseline's, if
    any) and the command that reproduces it."""
    code_line = f"Code: {label}" + (f"; baseline: {baseline_label}" if baseline_label else "") + "."
    return [f"# {title}", "", f"Machine: {description}.", "", code_line, "", f"Reproduce: `{command}`", ""]


def write_result(name: str | pathlib.Path, text: str) -> pathlib.Path:
    """Write ``bench/results/NAME`` (or NAME, if it is an absolute path), through a temporary file."""
    target = RESULTS / name
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, target)
    return target


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1e3:.0f} ms"
    return f"{seconds:.2f} s"


def remove(*paths: pathlib.Path) -> Callable[[], None]:
    """An ``after`` for :func:`alternate`: remove these files or folders."""
    def clean() -> None:
        for path in paths:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    return clean
