"""Benchmark: the CPU part of a converted model versus onnxruntime's fully optimized ("all") version of it.

For each model and backend, `mobile-ep convert` decides which nodes the backend's EP takes; the rest is the
CPU part.  Reference: that CPU part cut from the model *before* mobile-ep's CPU fusion and optimized by
onnxruntime at level "all" (what `convert_onnx_models_to_ort --optimization_style Fixed` would run).
Ours: the CPU part cut from the model mobile-ep wrote, run as written.  Both run in this process,
alternating, on the same inputs; the table gives medians and the ratio ours / reference (1.00 = as fast).

This times the converted model's inference (onnxruntime sessions in this process), not mobile-ep itself.

    python bench/cpu_part.py [--repeats 30] [--out cpu_part.md]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx
import onnx.utils
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from harness import code, machine, reproduce, write_result  # noqa: E402

from mobile_ep import pipeline as api
from mobile_ep.contract.plugins import make_plugins
from mobile_ep.options import Options


def _mlp_gelu(path: pathlib.Path, d: int = 64, rows: int = 8) -> pathlib.Path:
    """A small MLP with an exporter-style GELU: too small for an accelerator, all of it is CPU part."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Div", ["h", "sqrt2"], ["q"]),
             helper.make_node("Erf", ["q"], ["e"]), helper.make_node("Add", ["e", "one"], ["a"]),
             helper.make_node("Mul", ["h", "a"], ["m"]), helper.make_node("Mul", ["m", "half"], ["g"]),
             helper.make_node("MatMul", ["g", "w2"], ["y"])]
    inits = [numpy_helper.from_array((rng.standard_normal((d, d)) * 0.05).astype(np.float32), n) for n in ("w1", "w2")]
    inits += [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("sqrt2", 2 ** 0.5), ("one", 1.0),
                                                                              ("half", 0.5))]
    graph = helper.make_graph(nodes, "mlp_gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, d])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, d])], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def _attention(path: pathlib.Path, seq: int = 64, d: int = 128) -> pathlib.Path:
    """A transformer block: projections (claimable), scores from two activations (not claimable by NNAPI:
    MatMul B is not constant), softmax, a LayerNorm written out in primitives, and a GELU MLP."""
    rng = np.random.default_rng(1)

    def w(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32), name)

    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]), helper.make_node("MatMul", ["x", "wk"], ["k"]),
        helper.make_node("MatMul", ["x", "wv"], ["v"]), helper.make_node("Transpose", ["k"], ["kt"], perm=[1, 0]),
        helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Mul", ["s", "scale"], ["ss"]),
        helper.make_node("Softmax", ["ss"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["o"]),
        helper.make_node("Add", ["o", "x"], ["r"]),
        # LayerNorm as exporters write it
        helper.make_node("ReduceMean", ["r"], ["mu"], axes=[-1]), helper.make_node("Sub", ["r", "mu"], ["c"]),
        helper.make_node("Pow", ["c", "two"], ["c2"]), helper.make_node("ReduceMean", ["c2"], ["var"], axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["sd"]),
        helper.make_node("Div", ["c", "sd"], ["n"]), helper.make_node("Mul", ["n", "gamma"], ["ng"]),
        helper.make_node("Add", ["ng", "beta"], ["ln"]),
        # GELU MLP
        helper.make_node("MatMul", ["ln", "w1"], ["h"]), helper.make_node("Div", ["h", "sqrt2"], ["hq"]),
        helper.make_node("Erf", ["hq"], ["he"]), helper.make_node("Add", ["he", "one"], ["ha"]),
        helper.make_node("Mul", ["h", "ha"], ["hm"]), helper.make_node("Mul", ["hm", "half"], ["g"]),
        helper.make_node("MatMul", ["g", "w2"], ["y"]),
    ]
    scalars = {"scale": 1 / np.sqrt(d), "two": 2.0, "eps": 1e-5, "sqrt2": 2 ** 0.5, "one": 1.0, "half": 0.5}
    inits = [w("wq", (d, d)), w("wk", (d, d)), w("wv", (d, d)), w("w1", (d, 4 * d)), w("w2", (4 * d, d)),
             numpy_helper.from_array(np.ones(d, np.float32), "gamma"), numpy_helper.from_array(np.zeros(d, np.float32), "beta")]
    inits += [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in scalars.items()]
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, d])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [seq, d])], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def _region(model_path: pathlib.Path, keep: set[str], out: pathlib.Path) -> pathlib.Path | None:
    """The sub-model of the nodes not in *keep* (the CPU part), or None if there is none."""
    proto = onnx.load(str(model_path))
    region = [n for n in proto.graph.node if n.name not in keep]
    if not region:
        return None
    produced = {o for n in region for o in n.output}
    inits = {t.name for t in proto.graph.initializer}
    outside = {i for n in proto.graph.node if n.name in keep for i in n.input} | {o.name for o in proto.graph.output}
    inputs = list(dict.fromkeys(i for n in region for i in n.input if i and i not in produced and i not in inits))
    outputs = [o for n in region for o in n.output if o in outside]
    onnx.save(onnx.utils.Extractor(proto).extract_model(inputs, outputs), str(out))
    return out


def _session(path: pathlib.Path, level: ort.GraphOptimizationLevel) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"],
                                disabled_optimizers=["NchwcTransformer"])


def _feeds(session: ort.InferenceSession) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)
            for i in session.get_inputs()}


def measure(model: pathlib.Path, backend: str, repeats: int, work: pathlib.Path) -> dict:
    out = work / f"{model.stem}.{backend}"
    # The plan without CPU fusion: its CPU part, optimized by onnxruntime at level "all", is the reference.
    plain = api.convert(model, backend, out / "plain", options=Options(fuse_cpu=False), verify=False)
    ours = api.convert(model, backend, out / "ours", verify=False)
    # The CPU part: what the EP does not take (it takes every partition, kept by the cost model or not).
    keep_plain = {n for p in plain.check.partitions for n in p.nodes}
    keep_ours = {n for p in ours.check.partitions for n in p.nodes}
    ref_region = _region(pathlib.Path(plain.outputs["onnx"]), keep_plain, work / f"{model.stem}.{backend}.ref.onnx")
    our_region = _region(pathlib.Path(ours.outputs["onnx"]), keep_ours, work / f"{model.stem}.{backend}.ours.onnx")
    row = {"model": model.stem, "backend": backend, "cpu_nodes_before": 0, "cpu_nodes_after": 0,
           "reference_ms": None, "ours_ms": None, "ratio": None}
    if ref_region is None or our_region is None:
        return row
    reference = _session(ref_region, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    candidate = _session(our_region, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC)
    # The two CPU parts may have different boundaries (fusion renames values): each gets its own inputs.
    runs = {"ref": (reference, _feeds(reference)), "ours": (candidate, _feeds(candidate))}
    for session, feeds in runs.values():
        for _ in range(3):
            session.run(None, feeds)
    times: dict[str, list[float]] = {"ref": [], "ours": []}
    for _ in range(repeats):
        for key, (session, feeds) in runs.items():
            start = time.perf_counter()
            session.run(None, feeds)
            times[key].append(time.perf_counter() - start)
    ref_ms, ours_ms = 1e3 * statistics.median(times["ref"]), 1e3 * statistics.median(times["ours"])
    row.update(cpu_nodes_before=len(onnx.load(ref_region).graph.node),
               cpu_nodes_after=len(onnx.load(our_region).graph.node),
               reference_ms=round(ref_ms, 4), ours_ms=round(ours_ms, 4), ratio=round(ours_ms / ref_ms, 3))
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--out", default="cpu_part.md", help="file under bench/results/ (or an absolute path)")
    args = parser.parse_args(argv)
    backends = [b for b in ("nnapi", "coreml") if b in make_plugins().backends()]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        models = [_mlp_gelu(work / "mlp_gelu.onnx"), _attention(work / "attention.onnx")]
        for model in models:
            for backend in backends:
                rows.append(measure(model, backend, args.repeats, work))
                print(rows[-1], file=sys.stderr)
    lines = [
        "# CPU part: mobile-ep convert vs onnxruntime level 'all'",
        "",
        f"Machine: {machine()}.",
        "",
        f"Code: {code()}.",
        "",
        f"Reproduce: `{reproduce('cpu_part.py', argv)}`",
        "",
        f"1 intra-op thread; medians of {args.repeats} alternating runs in one process.",
        "",
        "| model | backend | CPU nodes (before fusion) | CPU nodes (written) | ORT 'all' ms | mobile-ep ms | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["ratio"] is None:
            lines.append(f"| {r['model']} | {r['backend']} | 0 | 0 | - | - | no CPU part |")
        else:
            lines.append(f"| {r['model']} | {r['backend']} | {r['cpu_nodes_before']} | {r['cpu_nodes_after']} | "
                         f"{r['reference_ms']} | {r['ours_ms']} | {r['ratio']} |")
    target = write_result(args.out, "\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"written: {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
