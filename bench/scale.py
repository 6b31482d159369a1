"""Benchmark: time and peak memory of partitioning and of ``check`` on generated graphs of 1k to 1M nodes.

For each family of ``bench/graphs.py`` (chain, branches, transformer) and each size, in a fresh process:

- **partition**: ``propose`` + the cost model (``select_partitions``) for one backend, on the graph as
  built in memory: a backend whose single rule takes every op but ``Sign`` (the partitioner's own cost),
  then the real NNAPI and Core ML backends (their rules' cost added).  Wall time, and the memory the
  step adds on top of the model (peak RSS during the step minus RSS before it);
- **check**: ``mobile-ep check`` (``api.check`` with every installed backend + the text report) on the
  model saved to a file, in a fresh process: wall time and the process's peak RSS.

The growth rate between sizes is the exponent k of time ~ nodes^k (1.0 = linear).

    python bench/scale.py [--sizes 1000 10000 100000 1000000] [--kinds chain branches transformer]
                          [--no-check] [--out bench/results/scale.md]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import pathlib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import graphs  # noqa: E402
from harness import child_peak_rss, fmt_s, machine, write_result  # noqa: E402

import mobile_ep  # noqa: E402

#: Targets of issue 9 (partitioning, seconds).
PARTITION_TARGETS = {100_000: 2.0, 1_000_000: 30.0}


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


def child_partition(kind: str, nodes: int, save_to: str | None) -> dict:
    """Build the graph, optionally save it, then time propose + cost model per backend (run in a child)."""
    from mobile_ep.capability import RuleContext
    from mobile_ep.cost import select_partitions
    from mobile_ep.partition import propose
    from mobile_ep.plugins import make_plugins

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
    for backend in backends:
        before = _rss()[0]
        resettable = _reset_peak()
        start = time.perf_counter()
        proposal = propose(model, [backend])
        bp = proposal.per_backend[backend.name]
        costs = select_partitions(bp.partitions, RuleContext(model, backend), backend.cost_params())
        seconds = time.perf_counter() - start
        peak = _rss()[1]
        result[backend.name] = {"seconds": seconds, "partitions": len(bp.partitions),
                                "kept": sum(c.kept for c in costs), "supported": bp.supported_nodes,
                                "extra_rss": max(0, peak - before) if resettable else None}
        del proposal, bp, costs
        gc.collect()
    return result


CHECK_SCRIPT = """
import json, sys, time
from mobile_ep import api, report
start = time.perf_counter()
report.check_text(api.check(sys.argv[1]))
print("@@CHECK@@" + json.dumps(time.perf_counter() - start))
"""


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


def render(results: list[dict], description: str, backends: list[str]) -> str:
    lines = [
        "# Scale: partitioning and check on generated graphs",
        "",
        f"Machine: {description}.",
        "Graphs from `bench/graphs.py` (every block with its own weights); one fresh process per size "
        "(`python bench/scale.py`). Partition = `propose` + cost model for one backend; `core-only` is a "
        "backend whose one rule takes every op but `Sign` (the partitioner alone), nnapi and coreml add "
        "their rules. Extra memory = peak RSS during the step minus RSS before it. Check = `mobile-ep check` "
        "with both backends (ORT's basic-level optimization, both backends as is and after convert, the "
        "combined placement, the text report) in its own process; its time excludes the interpreter's start "
        "and imports, its peak RSS includes them (about 100 MB).",
        "",
    ]
    for kind in dict.fromkeys(r["kind"] for r in results):
        rows = [r for r in results if r["kind"] == kind]
        header = "| nodes | initializers | " + " | ".join(f"partition {b}" for b in backends) + \
                 " | partition extra memory (nnapi) | check | check peak RSS |"
        lines += [f"## {kind}", "", header, "|" + "---|" * (header.count("|") - 1)]
        for r in rows:
            cells = [f"{r['nodes']:,}", f"{r['initializers']:,}"]
            cells += [fmt_s(r[b]["seconds"]) if b in r else "-" for b in backends]
            main = r.get("nnapi") or r.get(backends[0])
            cells.append(_mb(main.get("extra_rss")) if main else "-")
            check = r.get("check") or {}
            cells += [fmt_s(check.get("seconds")), _mb(check.get("peak_rss"))]
            lines.append("| " + " | ".join(cells) + " |")
        growth = []
        for b in backends:
            k = exponent([(r["nodes"], r[b]["seconds"]) for r in rows if b in r])
            if k is not None:
                growth.append(f"partition {b} ~ n^{k:.2f}")
        k = exponent([(r["nodes"], (r.get("check") or {}).get("seconds")) for r in rows])
        if k is not None:
            growth.append(f"check ~ n^{k:.2f}")
        k = exponent([(r["nodes"], (r.get("check") or {}).get("peak_rss")) for r in rows if r["nodes"] >= 10_000])
        if k is not None:
            growth.append(f"check peak RSS ~ n^{k:.2f} (from 10k nodes)")
        lines += ["", "Growth (least squares over the sizes above): " + "; ".join(growth) + ".", ""]
    lines += ["## Targets", ""]
    for size, target in PARTITION_TARGETS.items():
        for r in results:
            if abs(r["nodes"] - size) / size < 0.05:
                times = ", ".join(f"{b} {fmt_s(r[b]['seconds'])}" for b in backends if b in r)
                lines.append(f"- {r['kind']}, {r['nodes']:,} nodes (target {target:.0f} s): {times}")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="*", type=int, default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--kinds", nargs="*", default=list(graphs.KINDS))
    parser.add_argument("--no-check", dest="check", action="store_false")
    parser.add_argument("--check-max", type=int, default=1_000_000, help="largest size to run check on")
    parser.add_argument("--out", default="scale.md", help="file name under bench/results/")
    parser.add_argument("--child", nargs=3, metavar=("KIND", "NODES", "SAVE_TO"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, nodes, save_to = args.child
        print("@@RESULT@@" + json.dumps(child_partition(kind, int(nodes), save_to if save_to != "-" else None)))
        return 0
    description = machine()
    results = []
    with tempfile.TemporaryDirectory(prefix="mobile-ep-scale-") as tmp:
        for kind in args.kinds:
            for size in args.sizes:
                model_path = pathlib.Path(tmp) / f"{kind}{size}.onnx"
                do_check = args.check and size <= args.check_max
                proc = subprocess.run([sys.executable, __file__, "--child", kind, str(size),
                                       str(model_path) if do_check else "-"], capture_output=True, text=True)
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
                        row["check"]["seconds"] = json.loads(timed[-1][len("@@CHECK@@"):])
                    if row["check"].get("rc"):
                        print(f"{kind} {size}: check failed\n{row['check']['stderr']}", file=sys.stderr)
                    model_path.unlink(missing_ok=True)
                results.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "check"} | {
                    "check": {k: row.get("check", {}).get(k) for k in ("seconds", "peak_rss")}}), file=sys.stderr,
                    flush=True)
                write_result(args.out, render(results, description, _backends(results)))
    text = render(results, description, _backends(results))
    target = write_result(args.out, text)
    print(text)
    print(f"written: {target}", file=sys.stderr)
    return 0


def _backends(results: list[dict]) -> list[str]:
    names = ["core-only", "nnapi", "coreml"]
    return [b for b in names if any(b in r for r in results)]


if __name__ == "__main__":
    sys.exit(main())
