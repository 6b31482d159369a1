"""Benchmark: how long ``mobile-ep --help`` and ``mobile-ep --version`` take, against ``import onnxruntime``.

A command that does nothing but answer should cost less than loading onnxruntime, which every real
command of mobile-ep (and every tool of onnxruntime) pays.  Commands, a fresh process each, taking turns
round after round after one warm-up round (byte-code cached):

- ``mobile-ep --help`` and ``mobile-ep --version`` (``python -m mobile_ep.cli``);
- ``python -c "import onnxruntime"`` (the reference: ratios are mobile-ep / this);
- ``python -c pass`` (the interpreter alone, for scale).

``--baseline-python PY`` adds ``--help`` and ``--version`` run by another interpreter (an earlier commit
installed there; see ``bench/vs_ort.py``).

    python bench/startup.py [--repeats 15] [--warmup 1] [--baseline-python PY] [--baseline-label TEXT]
                            [--out startup.md]
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from harness import (  # noqa: E402
    alternate,
    code,
    fmt_s,
    header,
    machine,
    median,
    mobile_ep_command,
    ratio,
    reproduce,
    versions,
    write_result,
)

#: Target: ``--help`` and ``--version`` at most this fraction of ``import onnxruntime``.
STARTUP_RATIO_TARGET = 0.6


def measure(repeats: int, warmup: int, baseline: str | None = None) -> dict[str, float]:
    python = sys.executable
    commands = {
        "mobile-ep --help": [*mobile_ep_command(), "--help"],
        "mobile-ep --version": [*mobile_ep_command(), "--version"],
        "python -c \"import onnxruntime\"": [python, "-c", "import onnxruntime"],
        "python -c pass": [python, "-c", "pass"],
    }
    if baseline:
        commands["baseline: mobile-ep --help"] = [*mobile_ep_command(baseline), "--help"]
        commands["baseline: mobile-ep --version"] = [*mobile_ep_command(baseline), "--version"]
    return {name: median(runs) for name, runs in alternate(commands, repeats, warmup).items()}


REFERENCE = "python -c \"import onnxruntime\""


def render(times: dict[str, float], repeats: int, warmup: int, description: str, command: str,
           baseline: str | None = None, baseline_label: str = "the baseline", baseline_versions: str = "",
           label: str = "this tree") -> str:
    reference = times[REFERENCE]
    lines = [
        *header("Start-up: `mobile-ep --help` / `--version` vs `import onnxruntime`", description, command, label, baseline_label if baseline else None),
        f"Each run is a fresh process (byte-code cached); the commands take turns, {repeats} timed rounds after "
        f"{warmup} warm-up round(s); medians. `mobile-ep` = `python -m mobile_ep.cli`. Ratio = command / "
        "`python -c \"import onnxruntime\"`.",
    ]
    if baseline:
        lines += ["", f"Baseline: the same commands run by `{baseline}` ({baseline_label}; {baseline_versions})."]
    lines += ["", "| command | median | ratio |", "|---|---|---|"]
    for name, seconds in times.items():
        lines.append(f"| `{name}` | {fmt_s(seconds)} | {ratio(seconds / reference)} |")
    help_, version = times["mobile-ep --help"] / reference, times["mobile-ep --version"] / reference
    met = max(help_, version) <= STARTUP_RATIO_TARGET
    lines += ["", f"**--help {ratio(help_)}, --version {ratio(version)} of `import onnxruntime`** (target: at most "
                  f"{STARTUP_RATIO_TARGET}: {'met' if met else 'NOT met'}).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed rounds (default 15)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    parser.add_argument("--baseline-python", metavar="PY", help="also time --help/--version with this interpreter")
    parser.add_argument("--baseline-label", help="what the baseline is (default: its commit, if installed from a "
                        "git checkout, else where it is installed)")
    parser.add_argument("--label", help="what the measured mobile-ep is (default: the commit of the checkout this "
                        "interpreter's mobile_ep is installed from, else where it is installed)")
    parser.add_argument("--out", default="startup.md", help="file under bench/results/ (or an absolute path)")
    args = parser.parse_args(argv)
    description = machine()
    label = args.label or code()
    baseline_label = args.baseline_label or (code(args.baseline_python) if args.baseline_python else "")
    times = measure(args.repeats, args.warmup, args.baseline_python)
    text = render(times, args.repeats, args.warmup, description, reproduce("startup.py", argv), args.baseline_python,
                  baseline_label, versions(args.baseline_python) if args.baseline_python else "", label)
    target = write_result(args.out, text)
    print(text)
    print(f"written: {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
