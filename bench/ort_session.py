"""Benchmark: how onnxruntime's own session grows with the graph (the part of ``check`` that is not mobile-ep's).

``check`` (like ORT's usability checker) first runs the model through an onnxruntime session at the
basic optimization level, because ORT Mobile's execution providers partition that graph.  For each
family of ``bench/graphs.py`` and each size, in this process: the session exactly as ``check`` runs it
(``mobile_ep.passes.fold_constants.ort_optimized``: basic level, the optimized model written out), and a session with every
optimization turned off and nothing written (what is left is onnxruntime loading the model and getting
ready to run it).  One run each; the growth rate k of time ~ nodes^k between each size and the next.

    python bench/ort_session.py [--kinds transformer chain] [--sizes 25000 50000 100000 200000]
                                [--out ort_session.md]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import graphs  # noqa: E402
from harness import code, fmt_s, machine, reproduce, write_result  # noqa: E402
from scale import exponent, steps  # noqa: E402

from mobile_ep.export import ort_format  # noqa: E402
from mobile_ep.passes import fold_constants  # noqa: E402


def time_sessions(path: pathlib.Path, work: pathlib.Path) -> dict[str, float]:
    import onnxruntime as ort

    start = time.perf_counter()
    fold_constants.ort_optimized(path, work)  # as check runs it
    basic = time.perf_counter() - start
    options = ort_format.lean_session_options(ort.SessionOptions())
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    start = time.perf_counter()
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return {"basic": basic, "disabled": time.perf_counter() - start}


def render(rows: list[dict], description: str, command: str = "python bench/ort_session.py") -> str:
    lines = [
        "# onnxruntime's session as the graph grows",
        "",
        f"Machine: {description}.",
        "",
        f"Code: {code()}.",
        "",
        f"Reproduce: `{command}`",
        "",
        "One run per cell, in this process. *basic, written* = the session `mobile-ep check` runs first "
        "(`mobile_ep.passes.fold_constants.ort_optimized`: basic-level optimization, optimized model written; ORT's "
        "usability checker runs the same optimization); *nothing on* = every optimization off, nothing "
        "written (onnxruntime loading the model and getting ready to run it). k = the exponent of "
        "time ~ nodes^k from the size before (1 = linear, 2 = quadratic).",
        "",
    ]
    for kind in dict.fromkeys(r["kind"] for r in rows):
        mine = [r for r in rows if r["kind"] == kind]
        lines += [f"## {kind}", "", "| nodes | basic, written | k | nothing on | k |", "|---|---|---|---|---|"]
        local = {column: {n2: k for _, n2, k in steps([(r["nodes"], r[column]) for r in mine])}
                 for column in ("basic", "disabled")}
        for r in mine:
            cells = [f"{r['nodes']:,}"]
            for column in ("basic", "disabled"):
                k = local[column].get(r["nodes"])
                cells += [fmt_s(r[column]), "-" if k is None else f"{k:.2f}"]
            lines.append("| " + " | ".join(cells) + " |")
        overall = exponent([(r["nodes"], r["basic"]) for r in mine])
        if overall is not None:
            lines += ["", f"Least-squares k over these sizes (basic, written): {overall:.2f}."]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", nargs="*", default=["transformer", "chain"], choices=graphs.KINDS)
    parser.add_argument("--sizes", nargs="*", type=int, default=[25_000, 50_000, 100_000, 200_000])
    parser.add_argument("--out", default="ort_session.md", help="file under bench/results/ (or an absolute path)")
    args = parser.parse_args(argv)
    description = machine()
    rows = []
    for kind in args.kinds:
        for size in args.sizes:
            with tempfile.TemporaryDirectory(prefix="mobile-ep-ort-") as tmp:
                path = graphs.save(graphs.make(kind, size), pathlib.Path(tmp) / "model.onnx")
                out = pathlib.Path(tmp) / "out"
                out.mkdir()
                row = {"kind": kind, "nodes": size, **time_sessions(path, out)}
            rows.append(row)
            print(f"{kind} {size:,}: basic {row['basic']:.2f} s, nothing on {row['disabled']:.2f} s",
                  file=sys.stderr, flush=True)
    text = render(rows, description, reproduce("ort_session.py", argv))
    target = write_result(args.out, text)
    print(text)
    print(f"written: {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
