"""What the benchmarks share: the machine's description, alternating timed runs, peak memory of a child.

Timings on a shared machine are noisy, so every comparison runs the two sides alternately in one process
(A B A B ...) after one warm-up each, and reports medians; ratios of medians are what the tables compare.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import logging
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

RESULTS = pathlib.Path(__file__).parent / "results"

__all__ = ["RESULTS", "machine", "alternate", "median", "python_pace", "quiet", "child_peak_rss", "write_result",
           "fmt_s"]


def machine() -> str:
    """One line: CPU, cores, memory, OS, Python and library versions, load, date."""
    import onnx
    import onnx_ir
    import onnxruntime

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
    return (f"{cpu}, {os.cpu_count()} cores{memory}, {platform.system()} {platform.machine()}; "
            f"Python {platform.python_version()}, onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}, "
            f"onnx_ir {onnx_ir.__version__}{load}; {datetime.date.today().isoformat()}")


def alternate(runs: dict[str, Callable[[], object]], repeats: int, warmup: int = 1) -> dict[str, list[float]]:
    """Wall-clock seconds of each callable, run in turn (A B A B ...) *repeats* times after *warmup* rounds."""
    for _ in range(warmup):
        for fn in runs.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def median(values: list[float]) -> float:
    return statistics.median(values)


def python_pace() -> int:
    """A fixed piece of pure-Python work (a loop of dict look-ups and integer arithmetic, about 5 ms
    here), to time beside a comparison: how fast the machine runs interpreted code at that moment.

    On a shared virtual machine that speed drifts by up to 2x over minutes, and interpreted code (most of
    what mobile-ep does outside onnxruntime) slows down more than onnxruntime's C++ in the slow phases, so
    a ratio is only comparable with one measured at a similar pace.  It allocates almost nothing, so the
    cycle collector does not run in it.  Returns a checksum (always the same).
    """
    table = {i: i * 7 % 1013 for i in range(1000)}
    total = 0
    for step in range(25):
        for i in range(1000):
            total += table[(i * 31 + step) % 1000] ^ i
    return total


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Swallow what the tools print (ORT's converter prints per model) and their INFO logs."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.WARNING)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        root.setLevel(level)


_MEASURE = """
import json, resource, runpy, sys, time
sys.argv = sys.argv[1:]
start = time.perf_counter()
runpy.run_path(sys.argv[0], run_name="__main__")
seconds = time.perf_counter() - start
usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
peak = max(u.ru_maxrss for u in usage)
written = sum(u.ru_oublock for u in usage) * 512  # blocks of 512 bytes written to files (Linux)
print("@@MEASURED@@" + json.dumps({"seconds": seconds, "peak_rss": peak * 1024, "written": written}))
"""


def child_peak_rss(script: str | pathlib.Path, *args: str, cwd: str | pathlib.Path | None = None,
                   timeout: float = 7200) -> dict:
    """Run ``python SCRIPT ARGS`` in a fresh process: its wall time, peak RSS and bytes written to files
    (``written``; the file system's count, 0 where it keeps none), and what it printed.

    The child's own ``getrusage`` peak is taken at its end, so imports are included (a fresh interpreter
    with onnxruntime, onnx and onnx_ir loaded is about 100 MB); so is the peak of any process it ran and
    waited for (whichever is larger).
    """
    proc = subprocess.run([sys.executable, "-c", _MEASURE, str(script), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)
    measured: dict = {"rc": proc.returncode, "stderr": proc.stderr[-2000:]}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("@@MEASURED@@")]
    if lines:
        measured.update(json.loads(lines[-1][len("@@MEASURED@@"):]))
    measured["stdout"] = "\n".join(line for line in proc.stdout.splitlines() if not line.startswith("@@MEASURED@@"))
    return measured


def write_result(name: str, text: str) -> pathlib.Path:
    """Write ``bench/results/NAME`` (atomically)."""
    from mobile_ep import model_io as mir

    RESULTS.mkdir(parents=True, exist_ok=True)
    target = RESULTS / name
    with mir.atomic_path(target) as tmp:
        tmp.write_text(text)
    return target


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1e3:.0f} ms"
    return f"{seconds:.2f} s"
