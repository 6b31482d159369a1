"""Benchmark: machine instructions per node of partitioning, counted by valgrind (the same count every run).

Wall time on a shared or virtual machine moves by a third from one process to the next, more than most
changes to the partitioner are worth; the number of instructions executed does not move at all.  This
counts them with callgrind for one ``propose`` + cost model (``select_partitions``) per backend on the
generated graphs of ``bench/graphs.py``, and for the stages inside it (the graph index, the node
signatures), so that two commits can be compared exactly: run it on each and compare the tables.

Counting starts after the graph is built and one proposal has warmed the process up, and stops when the
step returns (``callgrind_control -i on/off``); the interpreter runs under valgrind, about 50 times slower
(half a minute per cell at 10k nodes).  Instructions are a proxy for time, not a measure of it (cache
misses and memory traffic are not in them).  Needs ``valgrind`` on the PATH.

    python bench/instructions.py [--nodes 10000] [--kinds chain branches transformer]
                                 [--backends core-only nnapi coreml] [--steps partition index signatures "cost model"]
                                 [--out instructions.md]
"""

from __future__ import annotations

import argparse
import gc
import os
import pathlib
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import graphs  # noqa: E402
from harness import machine, write_result  # noqa: E402

#: What is counted: the whole step, and the stages inside it worth watching.
STEPS = ("partition", "index", "signatures", "cost model")


def child(kind: str, nodes: int, backend_name: str, step: str) -> None:
    """Build the graph, warm up, then run *step* once with callgrind's instrumentation on (run under valgrind)."""
    from scale import CoreOnly

    from mobile_ep.contract.plugins import make_plugins
    from mobile_ep.contract.rules import RuleContext, _ProposalContext
    from mobile_ep.partitioning.cost import select_partitions
    from mobile_ep.partitioning.propose import _GraphIndex, propose

    model = graphs.make(kind, nodes)
    backend = CoreOnly() if backend_name == "core-only" else make_plugins().backend(backend_name)
    proposal = propose(model, [backend])
    partitions = proposal.per_backend[backend.name].partitions
    graph_nodes = list(model.graph)
    gc.collect()

    def instrument(state: str) -> None:
        subprocess.run(["callgrind_control", "-i", state, str(os.getpid())], capture_output=True, check=True)

    if step == "partition":
        instrument("on")
        bp = propose(model, [backend]).per_backend[backend.name]
        select_partitions(bp.partitions, RuleContext(model, backend), backend.cost_params())
    elif step == "index":
        instrument("on")
        _GraphIndex(model.graph)
    elif step == "signatures":
        ctx = _ProposalContext(model, backend)
        instrument("on")
        ctx.signatures(graph_nodes)  # (as propose builds them: compiled where built)
    elif step == "cost model":
        ctx = RuleContext(model, backend)
        params = backend.cost_params()
        instrument("on")
        select_partitions(partitions, ctx, params)
    instrument("off")


def count(kind: str, nodes: int, backend: str, step: str) -> int | None:
    """Instructions of one *step*, or None if valgrind failed."""
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null",
                           sys.executable, __file__, "--child", kind, str(nodes), backend, step],
                          capture_output=True, text=True)
    found = re.search(r"Collected\s*:\s*(\d+)", proc.stderr)
    if proc.returncode or not found:
        print(f"{kind} {backend} {step}: valgrind failed\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return int(found.group(1))


def render(rows: list[dict], nodes: int, steps: Sequence[str] = STEPS) -> str:
    lines = [
        "# Instructions per node of partitioning (callgrind)",
        "",
        f"Machine: {machine()}.",
        "",
        f"Instructions executed for one step on a graph of {nodes:,} nodes, divided by its nodes "
        "(`python bench/instructions.py`): the same on every run to within 0.1%, so two commits compare exactly. "
        "*partition* = `propose` + cost model (what `bench/scale.py` times); *index*, *signatures* (every "
        "node's, as the signature memo builds them) and *cost model* are stages of it (signatures only where a "
        "backend's rules opt in to the memo).",
        "",
        "| family | backend | " + " | ".join(steps) + " |",
        "|---|---|" + "---|" * len(steps),
    ]
    for row in rows:
        cells = [f"{row[s] / row['nodes']:,.0f}" if row.get(s) is not None else "-" for s in steps]
        lines.append(f"| {row['kind']} | {row['backend']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--kinds", nargs="*", default=list(graphs.KINDS))
    parser.add_argument("--backends", nargs="*", default=["core-only", "nnapi", "coreml"])
    parser.add_argument("--steps", nargs="*", default=list(STEPS), choices=STEPS)
    parser.add_argument("--out", default="instructions.md", help="file name under bench/results/")
    parser.add_argument("--child", nargs=4, metavar=("KIND", "NODES", "BACKEND", "STEP"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, nodes, backend, step = args.child
        child(kind, int(nodes), backend, step)
        return 0
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("bench/instructions.py needs valgrind (callgrind) on the PATH", file=sys.stderr)
        return 2
    rows = []
    for kind in args.kinds:
        for backend in args.backends:
            row: dict = {"kind": kind, "backend": backend, "nodes": len(graphs.make(kind, args.nodes).graph)}
            for step in args.steps:
                if step == "signatures" and backend == "core-only":
                    row[step] = None  # (its rule does not opt in to the memo)
                    continue
                row[step] = count(kind, args.nodes, backend, step)
                print(f"{kind} {backend} {step}: {row[step]}", file=sys.stderr, flush=True)
            rows.append(row)
    text = render(rows, args.nodes, args.steps)
    print(text)
    print(f"written: {write_result(args.out, text)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
