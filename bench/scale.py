"""Benchmark: time and peak memory of partitioning and of ``check`` on generated graphs (1k to 100k nodes
by default; 1M with ``--sizes``).

For each family of ``bench/graphs.py`` (chain, branches, transformer) and each size, in a fresh process:

- **partition**: ``propose`` + the cost model (``select_partitions``) for one backend, on the graph as
  built in memory: a backend whose single rule takes every op but ``Sign`` (the partitioner's own cost),
  then the real NNAPI and Core ML backends (their rules' cost added).  Wall time (the median of
  ``--repeats`` runs, the first one included), and the memory the step adds on top of the model (peak RSS
  during the first run minus RSS before it);
- **check**: ``mobile-ep check`` (``api.check`` with every installed backend + the text report) on the
  model saved to a file, in a fresh process: wall time, its stages (``CheckReport.timings``) and the
  process's peak RSS.  Up to ``--check-max`` nodes for every family, at every size for the families of
  ``--check-all-sizes`` (a check of 1M nodes takes many minutes, most of them in onnxruntime's session).

The growth rate is the exponent k of time ~ nodes^k (1.0 = linear): fitted over all sizes, and between each
size and the next (a quadratic step shows as k near 2 there).  ``--profile KIND:NODES`` adds the top of a
``cProfile`` of partitioning that graph for NNAPI.

The default run (1k, 10k, 100k nodes; check up to 10k) takes about 3 minutes; ``--sizes 1000 10000 100000
1000000 --check-max 100000`` is the long one (about 2 hours, 10 GB of RAM).

    python bench/scale.py [--sizes 1000 10000 100000] [--kinds chain branches transformer]
                          [--repeats 3] [--check-max 10000] [--check-all-sizes chain] [--no-check]
                          [--profile chain:100000] [--out scale.md]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import math
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import graphs  # noqa: E402
from harness import child_peak_rss, code, fmt_s, machine, reproduce, write_result  # noqa: E402

import mobile_ep  # noqa: E402

#: Target: partitioning (propose + cost model, one backend) of this many nodes in at most so many seconds.
PARTITION_TARGETS = {100_000: 3.0}


class CoreOnly(mobile_ep.Backend):
    """Takes every op of the generated graphs but Sign: what partitioning costs without rule work."""

    name = "core-only"
    version = "1"

    def build_rules(self) -> mobile_ep.RuleRegistry:
        class Any(mobile_ep.OpRule):
            op_types = tuple(sorted({"Conv", "Relu", "Add", "Mul", "Sigmoid", "MaxPool", "Concat", "MatMul",
                                     "Transpose", "Softmax", "ReduceMean", "Sub", "Pow", "Sqrt", "Div", "Erf"}))

        return mobile_ep.RuleRegistry([Any()])


def _rss() -> tuple[int, int]:
    """(current RSS, peak RSS) of this process in bytes, from /proc (0, 0 where unavailable)."""
    current = peak = 0
    try:
        for line in pathlib.Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                current = int(line.split()[1]) * 1024
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1]) * 1024
    except OSError:
        pass
    return current, peak


def _reset_peak() -> bool:
    """Reset this process's peak RSS (Linux: ``/proc/self/clear_refs`` 5)."""
    try:
        pathlib.Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def child_partition(kind: str, nodes: int, save_to: str | None, repeats: int = 1) -> dict:
    """Build the graph, optionally save it, then time propose + cost model per backend (run in a child)."""
    from mobile_ep.contract import RuleContext
    from mobile_ep.contract.plugins import make_plugins
    from mobile_ep.partitioning.cost import select_partitions
    from mobile_ep.partitioning.propose import propose

    plugins = make_plugins()
    backends = [CoreOnly()] + [plugins.backend(name) for name in ("nnapi", "coreml") if name in plugins.backends()]
    start = time.perf_counter()
    model = graphs.make(kind, nodes)
    result: dict = {"kind": kind, "nodes": len(model.graph), "initializers": len(model.graph.initializers),
                    "build_s": time.perf_counter() - start}
    if save_to:
        graphs.save(model, save_to)
    gc.collect()  # what building the graph left for the collector is not the partitioner's
    result["model_rss"] = _rss()[0]
    times: dict[str, list[float]] = {backend.name: [] for backend in backends}
    for run in range(max(1, repeats)):
        for backend in backends:  # (alternating: a slow spell of the machine is shared by all)
            before = _rss()[0]
            resettable = _reset_peak()
            start = time.perf_counter()
            proposal = propose(model, [backend])
            bp = proposal.per_backend[backend.name]
            costs = select_partitions(bp.partitions, RuleContext(model, backend), backend.cost_params())
            times[backend.name].append(time.perf_counter() - start)
            peak = _rss()[1]
            if run == 0:
                result[backend.name] = {"partitions": len(bp.partitions), "kept": sum(c.kept for c in costs),
                                        "supported": bp.supported_nodes,
                                        "extra_rss": max(0, peak - before) if resettable else None}
            del proposal, bp, costs
            gc.collect()
    for name, runs in times.items():
        result[name].update(seconds=statistics.median(runs), runs=runs)
    return result


def child_profile(kind: str, nodes: int, top: int = 25) -> str:
    """The top of a cProfile of partitioning (propose + cost model) a *kind* graph of *nodes* for NNAPI."""
    import cProfile
    import io
    import pstats

    from mobile_ep.contract import RuleContext
    from mobile_ep.contract.plugins import make_plugins
    from mobile_ep.partitioning.cost import select_partitions
    from mobile_ep.partitioning.propose import propose

    plugins = make_plugins()
    backend = plugins.backend("nnapi") if "nnapi" in plugins.backends() else CoreOnly()
    model = graphs.make(kind, nodes)
    gc.collect()
    profile = cProfile.Profile()
    profile.enable()
    bp = propose(model, [backend]).per_backend[backend.name]
    select_partitions(bp.partitions, RuleContext(model, backend), backend.cost_params())
    profile.disable()
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    text = out.getvalue()
    root = str(pathlib.Path(__file__).parents[1]) + "/"
    return text.replace(root, "").replace(sys.prefix + "/", "")


CHECK_SCRIPT = """
import json, sys, time
from mobile_ep import pipeline as api
from mobile_ep.reports import text as report
start = time.perf_counter()
result = api.check(sys.argv[1])
middle = time.perf_counter()
report.check_text(result)
end = time.perf_counter()
print("@@CHECK@@" + json.dumps({"seconds": end - start, "stages": dict(result.timings, report=end - middle)}))
"""


def steps(points: list[tuple[int, float]]) -> list[tuple[int, int, float]]:
    """(n1, n2, k) for each size and the next: the local exponent of time ~ nodes^k."""
    points = sorted((n, t) for n, t in points if t and t > 0)
    return [(n1, n2, math.log(t2 / t1) / math.log(n2 / n1)) for (n1, t1), (n2, t2) in itertools.pairwise(points)
            if n2 > n1]


def _size(n: int) -> str:
    for unit, value in (("M", 1_000_000), ("k", 1_000)):
        if n >= value:
            return f"{n / value:.0f}{unit}"
    return str(n)


def exponent(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of log(time) over log(nodes)."""
    points = [(n, t) for n, t in points if t and t > 0]
    if len(points) < 2:
        return None
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else None


def _mb(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:.0f} MB"


def render(results: list[dict], description: str, backends: list[str], repeats: int,
           profile: tuple[str, str] | None = None, command: str = "python bench/scale.py") -> str:
    lines = [
        "# Scale: partitioning and check on generated graphs",
        "",
        f"Machine: {description}.",
        "",
        f"Code: {code()}.",
        "",
        f"Reproduce: `{command}`",
        "",
        "Graphs from `bench/graphs.py` (every block with its own weights); one fresh process per size. Partition = `propose` + cost model for one backend, on the graph in memory; "
        f"the median of {repeats} runs (the first, cold one included; the backends alternate). `core-only` is a "
        "backend whose one rule takes every op but `Sign` (the partitioner alone), nnapi and coreml add their "
        "rules. Extra memory = peak RSS during the first run minus RSS before it. Check = `mobile-ep check` "
        "with every installed backend (ORT's basic-level optimization, the backends as is and after convert, the "
        "combined placement, the text report) in its own process, one run; its time excludes the interpreter's "
        "start and imports, its peak RSS includes them (about 100 MB). Its stages: load = validation, "
        "onnxruntime's session writing the basic-optimized model, reading it into the IR; partition = the "
        "backends alone and together, with the cost model; after convert = legalization and partitioning "
        "per backend.",
        "",
    ]
    for kind in dict.fromkeys(r["kind"] for r in results):
        rows = [r for r in results if r["kind"] == kind]
        header = ("| nodes | initializers | " + " | ".join(f"partition {b}" for b in backends) +
                  " | partition extra memory (nnapi) | check | check: load / partition / after convert "
                  "| check peak RSS |")
        lines += [f"## {kind}", "", header, "|" + "---|" * (header.count("|") - 1)]
        for r in rows:
            cells = [f"{r['nodes']:,}", f"{r['initializers']:,}"]
            cells += [fmt_s(r[b]["seconds"]) if b in r else "-" for b in backends]
            main = r.get("nnapi") or r.get(backends[0])
            cells.append(_mb(main.get("extra_rss")) if main else "-")
            check = r.get("check") or {}
            stages = check.get("stages") or {}
            cells.append(fmt_s(check.get("seconds")) if check.get("seconds") else
                         ("failed" if check.get("rc") else "not run"))
            cells.append(" / ".join(fmt_s(stages.get(k)) for k in ("load", "partition", "after_convert"))
                         if stages else "-")
            cells.append(_mb(check.get("peak_rss")) if check.get("seconds") else "-")
            lines.append("| " + " | ".join(cells) + " |")
        growth = []
        series = [(f"partition {b}", [(r["nodes"], r[b]["seconds"]) for r in rows if b in r]) for b in backends]
        series.append(("check", [(r["nodes"], (r.get("check") or {}).get("seconds")) for r in rows]))
        for stage in ("load", "partition", "after_convert"):
            series.append((f"check's {stage.replace('_', ' ')}",
                           [(r["nodes"], ((r.get("check") or {}).get("stages") or {}).get(stage)) for r in rows]))
        for label, points in series:
            k = exponent(points)
            if k is None:
                continue
            local = ", ".join(f"{_size(a)}→{_size(b)} {kk:.2f}" for a, b, kk in steps(points))
            growth.append(f"- {label}: k = {k:.2f} ({local})")
        lines += ["", "Growth, time ~ nodes^k (least squares over the sizes above; then each step):", "", *growth, ""]
    lines += ["## Target: partitioning 100k nodes (one backend) in at most 3 s", ""]
    for size, target in PARTITION_TARGETS.items():
        for r in results:
            if abs(r["nodes"] - size) / size < 0.05:
                times = ", ".join(f"{b} {fmt_s(r[b]['seconds'])}" for b in backends if b in r)
                worst = max(r[b]["seconds"] for b in backends if b in r)
                verdict = "met" if worst <= target else "NOT met"
                lines.append(f"- {r['kind']}, {r['nodes']:,} nodes (target {target:.0f} s): {times}: {verdict}")
    lines.append("")
    if profile:
        where, text = profile
        lines += [f"## Profile: partitioning {where} for nnapi", "",
                  "`cProfile`, sorted by own time (the profiler slows the many small calls most):", "",
                  "```", text.strip("\n"), "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="*", type=int, default=[1_000, 10_000, 100_000])
    parser.add_argument("--kinds", nargs="*", default=list(graphs.KINDS))
    parser.add_argument("--repeats", type=int, default=3, help="partition runs per backend (the median is shown)")
    parser.add_argument("--no-check", dest="check", action="store_false")
    parser.add_argument("--check-max", type=int, default=10_000, help="largest size to run check on")
    parser.add_argument("--check-all-sizes", nargs="*", default=[], metavar="KIND",
                        help="families checked at every size, beyond --check-max")
    parser.add_argument("--profile", metavar="KIND:NODES", help="add a profile of partitioning that graph")
    parser.add_argument("--out", default="scale.md", help="file under bench/results/ (or an absolute path)")
    parser.add_argument("--child", nargs=4, metavar=("KIND", "NODES", "SAVE_TO", "REPEATS"), help=argparse.SUPPRESS)
    parser.add_argument("--child-profile", nargs=2, metavar=("KIND", "NODES"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, nodes, save_to, repeats = args.child
        print("@@RESULT@@" + json.dumps(child_partition(kind, int(nodes), save_to if save_to != "-" else None,
                                                        int(repeats))))
        return 0
    if args.child_profile:
        print(child_profile(args.child_profile[0], int(args.child_profile[1])))
        return 0
    description = machine()
    results: list[dict] = []
    profile = None
    command = reproduce("scale.py", argv)

    def write() -> tuple[str, pathlib.Path]:
        text = render(results, description, _backends(results), args.repeats, profile, command)
        return text, write_result(args.out, text)

    with tempfile.TemporaryDirectory(prefix="mobile-ep-scale-") as tmp:
        for kind in args.kinds:
            for size in args.sizes:
                model_path = pathlib.Path(tmp) / f"{kind}{size}.onnx"
                do_check = args.check and (size <= args.check_max or kind in args.check_all_sizes)
                proc = subprocess.run([sys.executable, __file__, "--child", kind, str(size),
                                       str(model_path) if do_check else "-", str(args.repeats)],
                                      capture_output=True, text=True)
                lines = [line for line in proc.stdout.splitlines() if line.startswith("@@RESULT@@")]
                if proc.returncode or not lines:
                    print(f"{kind} {size}: partition run failed\n{proc.stderr[-3000:]}", file=sys.stderr)
                    continue
                row = json.loads(lines[-1][len("@@RESULT@@"):])
                if do_check:
                    script = pathlib.Path(tmp) / "check.py"
                    script.write_text(CHECK_SCRIPT)
                    row["check"] = child_peak_rss(script, str(model_path))
                    timed = [line for line in row["check"]["stdout"].splitlines() if line.startswith("@@CHECK@@")]
                    if timed:  # the check itself, without the interpreter's start and imports
                        row["check"].update(json.loads(timed[-1][len("@@CHECK@@"):]))
                    if row["check"].get("rc"):
                        print(f"{kind} {size}: check failed\n{row['check']['stderr']}", file=sys.stderr)
                    model_path.unlink(missing_ok=True)
                if "check" in row:
                    row["check"] = {k: row["check"].get(k) for k in ("seconds", "stages", "peak_rss", "rc")}
                results.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "check"} | {
                    "check": {k: row.get("check", {}).get(k) for k in ("seconds", "stages", "peak_rss")}}),
                    file=sys.stderr, flush=True)
                write()
    if args.profile:
        kind, nodes = args.profile.split(":")
        proc = subprocess.run([sys.executable, __file__, "--child-profile", kind, nodes], capture_output=True,
                              text=True)
        profile = (f"{kind}, {int(nodes):,} nodes", proc.stdout if proc.returncode == 0 else proc.stderr[-3000:])
    text, target = write()
    print(text)
    print(f"written: {target}", file=sys.stderr)
    return 0


def _backends(results: list[dict]) -> list[str]:
    names = ["core-only", "nnapi", "coreml"]
    return [b for b in names if any(b in r for r in results)]


if __name__ == "__main__":
    sys.exit(main())
