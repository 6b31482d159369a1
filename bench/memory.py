"""Benchmark: peak memory of check and convert on models with large external weights, as commands.

The models are chains of MatMuls whose float32 weights live in one external file (the generator of
``tests/test_large.py``: one chunk written over and over, nothing of the model's size allocated).  Each
command runs in a fresh process; its wall time, peak RSS and the bytes it wrote to files come from the
kernel's account of that process (``wait4``), the same for the tools a user would otherwise run.  Weights
are memory-mapped and never copied, so mobile-ep's peak stays far below the weights' size; ORT format files
(flatbuffers) cannot hold 2 GB, so the 2 GB model gets no ``.ort`` (from mobile-ep, and ORT's converter is
not run on it).

Below 2 GB convert also writes the ``.ort``: onnxruntime builds that file in memory from the weights (ORT
format holds them inline), so that command's peak is onnxruntime's own converter's, about 4x the weights.

    python bench/memory.py [--sizes-mb 512 2048] [--repeats 1] [--out memory.md]
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).parent))
sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "tests"))

from harness import code, fmt_s, machine, mobile_ep_command, reproduce, run, write_result  # noqa: E402
from test_large import write_large_model  # noqa: E402

#: Target: checking a 2 GB-weights model peaks under this.
CHECK_PEAK_TARGET = 500 * 2**20


def commands(model: pathlib.Path, out: pathlib.Path) -> dict[str, list[str]]:
    ours = mobile_ep_command()
    return {
        "mobile-ep check": [*ours, "check", str(model)],
        "mobile-ep convert --no-verify": [*ours, "convert", str(model), "--ep", "nnapi", "--no-verify", "-o", str(out)],
        "mobile-ep convert": [*ours, "convert", str(model), "--ep", "nnapi", "-o", str(out)],
        "ORT usability checker": [sys.executable, "-m", "onnxruntime.tools.check_onnx_model_mobile_usability",
                                  str(model)],
        "ORT converter (Runtime)": [sys.executable, "-m", "onnxruntime.tools.convert_onnx_models_to_ort", str(model),
                                    "--output_dir", str(out), "--optimization_style", "Runtime",
                                    "--target_platform", "arm"],
    }


def measure(size_mb: int, work: pathlib.Path, repeats: int = 1, k: int = 4096) -> list[dict]:
    layer_bytes = k * k * 4
    layers = max(1, size_mb * 2**20 // layer_bytes)
    model, weights = write_large_model(work / "model", layers, k)
    out = work / "out"
    rows = []
    for name, command in commands(model, out).items():
        if name.startswith("ORT converter") and weights > 1_800_000_000:
            continue  # an ORT format file cannot hold 2 GB: it would only fail, after using ~4x the weights
        runs = []
        outputs: list[str] = []
        for _ in range(max(1, repeats)):
            result = run(command, cwd=work)
            outputs = sorted(p.name for p in out.iterdir()) if out.exists() else []
            shutil.rmtree(out, ignore_errors=True)
            runs.append(result)
            if result["rc"]:
                break
        result = runs[-1]
        rows.append({"size_mb": weights // 2**20, "tool": name, "seconds": statistics.median(r["seconds"] for r in runs),
                     "peak_rss": max(r["peak_rss"] for r in runs), "runs": len(runs), "ok": result["rc"] == 0,
                     "written": max(r["written"] for r in runs),
                     "error": (result["stderr"].strip().splitlines() or [""])[-1][:160] if result["rc"] else "",
                     "outputs": outputs})
        print(rows[-1], file=sys.stderr, flush=True)
    shutil.rmtree(work / "model")
    return rows


def render(rows: list[dict], description: str, command: str = "python bench/memory.py") -> str:
    lines = [
        "# Memory: large external weights, as commands",
        "",
        f"Machine: {description}.",
        "",
        f"Code: {code()}.",
        "",
        f"Reproduce: `{command}`",
        "",
        "A chain of MatMuls, float32 weights in one external file; each command in a fresh process (`mobile-ep` = "
        "`python -m mobile_ep.cli`), one after the other; its time, peak RSS and bytes written to files (outputs "
        "and temporary files alike) from the kernel's account of the process (`wait4`; the interpreter and "
        "libraries alone: about 100 MB). With repeats: the median time and the largest peak. ORT format cannot "
        "hold 2 GB, so ORT's converter is not run on the 2 GB model.",
        "",
        "| weights | command | time | peak RSS | peak / weights | written | outputs |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        peak = r["peak_rss"]
        ratio = f"{peak / (r['size_mb'] * 2**20):.2f}" if peak else "-"
        outputs = ", ".join(r["outputs"]) if r["ok"] else f"failed: {r['error']}"
        size = r.get("written")
        written = "-" if size is None else f"{size / 2**20:.0f} MB" if size >= 2**20 else f"{size / 2**10:.0f} KB"
        lines.append(f"| {r['size_mb']} MB | {r['tool']} | {fmt_s(r['seconds'])} | "
                     f"{peak / 2**20 if peak else 0:.0f} MB | {ratio} | {written} | {outputs} |")
    checks = [r for r in rows if r["tool"] == "mobile-ep check" and r["size_mb"] >= 2000 and r["peak_rss"]]
    for r in checks:
        verdict = "met" if r["peak_rss"] < CHECK_PEAK_TARGET else "NOT met"
        lines += ["", f"Target (check of a 2 GB-weights model under {CHECK_PEAK_TARGET // 2**20} MB): "
                      f"{r['peak_rss'] / 2**20:.0f} MB, {verdict}."]
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-mb", nargs="*", type=int, default=[512, 2048])
    parser.add_argument("--repeats", type=int, default=1, help="runs per command (median time, largest peak)")
    parser.add_argument("--out", default="memory.md", help="file under bench/results/ (or an absolute path)")
    args = parser.parse_args(argv)
    description = machine()
    rows = []
    with tempfile.TemporaryDirectory(prefix="mobile-ep-memory-") as tmp:
        for size in args.sizes_mb:
            rows += measure(size, pathlib.Path(tmp), args.repeats)
            write_result(args.out, render(rows, description, reproduce("memory.py", argv)))
    text = render(rows, description, reproduce("memory.py", argv))
    target = write_result(args.out, text)
    print(text)
    print(f"written: {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
