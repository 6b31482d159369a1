"""Benchmark: ``mobile-ep check`` of a decoder of phone-model size against onnxruntime's basic-level session.

The decoder has the Qwen2.5-0.5B shape (``Qwen2ForCausalLM``: 24 layers, hidden 896, vocabulary 151,936, random
weights from the config, nothing downloaded), exported by ``torch.onnx`` (TorchScript) with its KV cache, 2.4 GB
of weights in external data files (``tests/llm_scale``'s export).  Each command runs in a fresh process,
alternating, after a warm-up round:

- **onnxruntime session**: ``onnxruntime.InferenceSession`` of the export at the basic level, on the CPU EP
  (what a user's app or tool does first with the file);
- **onnxruntime floor**: the same session writing the optimized model (``bench/ort_floor.py``);
- ``mobile-ep check --ep qnn``, and with the decode step's shapes (``--dim seq=1 --dim past=511 --dim total=512``).

The goal of ``check`` is at most 2x the session (issue "On-device LLMs", item 8).  Needs torch and transformers
(``tox -e llm-scale`` runs it); ``--model`` times an export made before instead.

    python bench/llm_check.py [--model decoder.onnx] [--repeats 3] [--no-decode-shapes] [--out llm_check.md]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).parent))
sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "tests" / "llm_scale"))

import harness  # noqa: E402

_SESSION = ("import sys, onnxruntime as ort; so = ort.SessionOptions(); "
            "so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC; "
            "ort.InferenceSession(sys.argv[1], so, providers=['CPUExecutionProvider'])")
#: The decode step's shapes, as docs/llm.md checks them.
DECODE_DIMS = ["--dim", "seq=1", "--dim", "past=511", "--dim", "total=512"]


def export(folder: pathlib.Path) -> pathlib.Path:
    import torch
    import transformers
    from test_llm_scale import QWEN2_05B

    from mobile_ep.llm.torch_export import export_decoder

    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**QWEN2_05B)).eval()
    return export_decoder(model, folder / "decoder.onnx", dynamo=False)


def measure(model: pathlib.Path, repeats: int, decode_shapes: bool = True) -> dict[str, list[float]]:
    ours = harness.mobile_ep_command()
    commands = {
        "onnxruntime session (basic)": [sys.executable, "-c", _SESSION, str(model)],
        "onnxruntime floor (basic, writes the optimized model)": [sys.executable,
                                                                  str(pathlib.Path(__file__).with_name("ort_floor.py")),
                                                                  str(model)],
        "mobile-ep check --ep qnn": [*ours, "check", str(model), "--ep", "qnn"],
    }
    if decode_shapes:
        commands["mobile-ep check --ep qnn (decode shapes)"] = [*ours, "check", str(model), "--ep", "qnn", *DECODE_DIMS]
    return harness.alternate(commands, repeats)


def report(times: dict[str, list[float]], model: str, argv) -> str:
    session = harness.median(times["onnxruntime session (basic)"])
    lines = harness.header("check of a 0.5B-parameter decoder against onnxruntime's session", harness.machine(),
                           harness.reproduce("llm_check.py", argv), harness.code())
    lines += [f"Model: {model} (the Qwen2.5-0.5B shape, TorchScript export, 2.4 GB of external weights). Each "
              "command in a fresh process, alternating; medians.", "",
              "| command | median | runs | / onnxruntime session |", "|---|---|---|---|"]
    for name, values in times.items():
        runs = ", ".join(harness.fmt_s(v) for v in values)
        lines.append(f"| {name} | {harness.fmt_s(harness.median(values))} | {runs} | "
                     f"{harness.median(values) / session:.2f}x |")
    check = harness.median(times["mobile-ep check --ep qnn"]) / session
    lines += ["", f"Goal (check at most 2x the session): {check:.2f}x, {'met' if check <= 2 else 'not met'}.", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=pathlib.Path, help="an export to time (default: export one)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="llm_check.md")
    parser.add_argument("--no-decode-shapes", dest="decode_shapes", action="store_false",
                        help="do not time check with the decode step's shapes (a model without those dims)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mobile-ep-bench-llm-") as tmp:
        model = args.model or export(pathlib.Path(tmp))
        times = measure(model, args.repeats, args.decode_shapes)
        text = report(times, "an export given with --model" if args.model else "exported by the script", argv)
    print(text)
    print(f"written: {harness.write_result(args.out, text)}")


if __name__ == "__main__":
    main()
