"""Benchmark: ``check`` on a chain of a million ``Identity`` nodes (a 30 MB file), against onnxruntime's own
basic-level session on the same file, as commands.

Each command runs in a fresh process; wall time and peak RSS come from the kernel's account of it (``wait4``).
Goal: ``check`` at most 2x the session's time and 1.3x its peak memory (both are linear in the nodes).

    python bench/hostile.py [--nodes 1000000] [--out hostile.md]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from harness import code, fmt_s, header, machine, mobile_ep_command, reproduce, run, write_result  # noqa: E402

_SESSION = """
import sys, onnxruntime as ort
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
"""


def write_chain(path: pathlib.Path, nodes: int) -> pathlib.Path:
    import onnx
    from onnx import TensorProto, helper

    names = ["x", *(f"v{i}" for i in range(nodes - 1)), "y"]
    graph = helper.make_graph([helper.make_node("Identity", [names[i]], [names[i + 1]]) for i in range(nodes)], "chain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10), path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--out", default="hostile.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        model = write_chain(pathlib.Path(work) / "chain.onnx", args.nodes)
        size = model.stat().st_size
        session = run([sys.executable, "-c", _SESSION, str(model)])
        check = run([*mobile_ep_command(), "-q", "check", str(model), "--ep", "nnapi"])
    for name, result in (("session", session), ("check", check)):
        if result["rc"] != 0:
            raise SystemExit(f"{name} failed ({result['rc']}): {result['stderr']}")
    lines = header(f"check on {args.nodes:,} Identity nodes vs an onnxruntime basic-level session", machine(),
                   reproduce("hostile.py", argv), label=code())
    lines += [f"Model: {size / 2**20:.1f} MB.", "",
              "| command | time | peak RSS |", "|---|---|---|",
              f"| onnxruntime session (basic level) | {fmt_s(session['seconds'])} | {session['peak_rss'] / 2**20:.0f} MB |",
              f"| mobile-ep check --ep nnapi | {fmt_s(check['seconds'])} | {check['peak_rss'] / 2**20:.0f} MB |",
              f"| ratio (goal: time <= 2, memory <= 1.3) | {check['seconds'] / session['seconds']:.2f} | "
              f"{check['peak_rss'] / session['peak_rss']:.2f} |", ""]
    print(write_result(args.out, "\n".join(lines)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
