"""Benchmark: mobile-ep against the tools a user would otherwise run, in one process, alternating.

For each ``light_*`` model of the onnx wheel (or the models given):

- **check**: ``mobile-ep check`` (``api.check`` with every installed backend, the "after convert" view
  included, and the text report) against ``python -m onnxruntime.tools.check_onnx_model_mobile_usability``
  (its ``usability_checker.analyze_model``, which also optimizes the model at ORT's basic level first);
- **convert**: ``mobile-ep convert --ep nnapi`` (without ``--compile``; with ``--no-verify`` and with the
  default verification) against ``python -m onnxruntime.tools.convert_onnx_models_to_ort
  --optimization_style Runtime --target_platform arm`` (``convert_onnx_models_to_ort``);
- **load + save**: through mobile-ep's IR (``mobile_ep.model_io.load``, which inspects, validates and infers
  shapes, then ``mobile_ep.model_io.save``) against plain ``onnx.load`` + ``onnx.save`` (the floor).

Each pair runs alternately after a warm-up; the table gives medians and their ratios.

    python bench/vs_ort.py [--repeats 5] [--models PATH ...] [--no-convert] [--out bench/results/vs_ort.md]
"""

from __future__ import annotations

import argparse
import logging
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable

import onnx

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from harness import alternate, fmt_s, machine, median, python_pace, quiet, write_result  # noqa: E402

from mobile_ep import model_io as mir  # noqa: E402
from mobile_ep import pipeline as api
from mobile_ep.contract.plugins import make_plugins  # noqa: E402
from mobile_ep.reports import text as report  # noqa: E402

LIGHT = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"

#: Targets of issue 9.
CHECK_SPEEDUP_TARGET = 3.0
CONVERT_RATIO_TARGET = 1.5


def _ort_logger() -> logging.Logger:
    """The usability checker logs its findings at INFO: formatted, then dropped."""
    logger = logging.getLogger("bench.usability_checker")
    logger.handlers[:] = [logging.NullHandler()]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger


def bench_model(path: pathlib.Path, repeats: int, do_convert: bool, work: pathlib.Path, plugins) -> dict:
    from onnxruntime.tools import convert_onnx_models_to_ort as ort_convert
    from onnxruntime.tools.mobile_helpers import usability_checker

    logger = _ort_logger()
    row: dict = {"model": path.stem}

    def ours_check() -> None:
        report.check_text(api.check(path, plugins=plugins))

    def ort_check() -> None:
        usability_checker.analyze_model(path, skip_optimize=False, logger=logger)

    def session() -> None:  # the basic-level optimization alone, as check runs it: both tools need it
        with tempfile.TemporaryDirectory(dir=work) as out:
            mir.ort_optimized(path, out, weights=False)

    times = alternate({"ours": ours_check, "ort": ort_check, "session": session, "pace": python_pace}, repeats)
    row["check_ours"], row["check_ort"] = median(times["ours"]), median(times["ort"])
    row["pace"] = median(times["pace"])
    row["check_speedup"] = row["check_ort"] / row["check_ours"]
    row["session"] = median(times["session"])
    row["check_bound"] = row["check_ort"] / row["session"]

    if do_convert:
        counter = iter(range(10**9))

        def fresh() -> pathlib.Path:
            out = work / f"out{next(counter)}"
            return out

        def done(out: pathlib.Path) -> None:
            shutil.rmtree(out, ignore_errors=True)

        def ours_convert() -> None:
            out = fresh()
            api.convert(path, "nnapi", out, plugins=plugins, verify=False)
            done(out)

        def ours_convert_verified() -> None:
            out = fresh()
            api.convert(path, "nnapi", out, plugins=plugins)
            done(out)

        def ort_conversion() -> None:
            out = fresh()
            with quiet():
                ort_convert.convert_onnx_models_to_ort(path, out, [ort_convert.OptimizationStyle.Runtime],
                                                       target_platform="arm")
            done(out)

        times = alternate({"ours": ours_convert, "ours_verify": ours_convert_verified, "ort": ort_conversion},
                          repeats)
        row["convert_ours"], row["convert_ours_verify"] = median(times["ours"]), median(times["ours_verify"])
        row["convert_ort"] = median(times["ort"])
        row["convert_ratio"] = row["convert_ours"] / row["convert_ort"]
        row["convert_verify_ratio"] = row["convert_ours_verify"] / row["convert_ort"]

    def ours_io() -> None:
        mir.save(mir.load(path), work / "ir_saved.onnx")

    def floor_io() -> None:
        onnx.save(onnx.load(str(path)), str(work / "onnx_saved.onnx"))

    times = alternate({"ours": ours_io, "floor": floor_io}, repeats)
    row["io_ours"], row["io_floor"] = median(times["ours"]), median(times["floor"])
    row["io_ratio"] = row["io_ours"] / row["io_floor"]
    return row


#: The commands run as after a normal install: byte-code cached (a ``PYTHONDONTWRITEBYTECODE`` in this
#: environment would make every run of an editable install compile its sources again, half a second).
_COMMAND_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _command(args: list[str]) -> Callable[[], None]:
    def run() -> None:
        result = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=3600, env=_COMMAND_ENV)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({result.returncode}): {result.stderr[-500:]}")

    return run


def bench_commands(path: pathlib.Path, repeats: int, work: pathlib.Path) -> dict:
    """The same comparisons as commands, each a fresh process (what CI pays): interpreter start-up and
    imports included, output written as the tools write it."""
    row: dict = {"model": path.stem}
    times = alternate({
        "ours": _command(["-m", "mobile_ep.cli.main", "check", str(path)]),
        "ort": _command(["-m", "onnxruntime.tools.check_onnx_model_mobile_usability", str(path)]),
    }, repeats, warmup=1)
    row["check_ours"], row["check_ort"] = median(times["ours"]), median(times["ort"])
    row["check_speedup"] = row["check_ort"] / row["check_ours"]
    times = alternate({
        "ours": _command(["-m", "mobile_ep.cli.main", "convert", str(path), "--ep", "nnapi", "--no-verify",
                          "-o", str(work / "cmd-ours")]),
        "ort": _command(["-m", "onnxruntime.tools.convert_onnx_models_to_ort", str(path), "--output_dir",
                         str(work / "cmd-ort"), "--optimization_style", "Runtime", "--target_platform", "arm"]),
    }, repeats, warmup=1)
    row["convert_ours"], row["convert_ort"] = median(times["ours"]), median(times["ort"])
    row["convert_ratio"] = row["convert_ours"] / row["convert_ort"]
    return row


def render_commands(rows: list[dict], repeats: int) -> list[str]:
    lines = [
        "",
        "## As commands (a fresh process per run: start-up and imports included)",
        "",
        f"Medians of {repeats} alternating runs: `python -m mobile_ep.cli.main check MODEL` vs `python -m "
        "onnxruntime.tools.check_onnx_model_mobile_usability MODEL`, and `python -m mobile_ep.cli.main convert "
        "MODEL --ep nnapi --no-verify` vs `python -m onnxruntime.tools.convert_onnx_models_to_ort MODEL "
        "--optimization_style Runtime --target_platform arm`.",
        "",
        "| model | check: mobile-ep | check: ORT | speedup | convert: mobile-ep | convert: ORT | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['model']} | {fmt_s(r['check_ours'])} | {fmt_s(r['check_ort'])} | "
                     f"{r['check_speedup']:.2f}x | {fmt_s(r['convert_ours'])} | {fmt_s(r['convert_ort'])} | "
                     f"{r['convert_ratio']:.2f} |")
    lines += ["", f"**Median check speedup {statistics.median(r['check_speedup'] for r in rows):.2f}x; "
                  f"median convert ratio {statistics.median(r['convert_ratio'] for r in rows):.2f}.**"]
    return lines


def render(rows: list[dict], repeats: int, description: str) -> str:
    lines = [
        "# mobile-ep vs ONNX Runtime's own tools",
        "",
        f"Machine: {description}.",
        f"Medians of {repeats} alternating runs in one process after a warm-up (`python bench/vs_ort.py`).",
        "",
        "## check: `mobile-ep check` vs `check_onnx_model_mobile_usability`",
        "",
        "Both optimize the model at ORT's basic level first (ORT Mobile partitions that graph). mobile-ep "
        "then analyzes both installed backends as is and after convert; ORT's checker matches op names "
        "against its lists.",
        "",
        "The last columns time the basic-level optimization alone (one onnxruntime session writing the "
        "optimized model, as mobile-ep runs it: its weights go to the null device): both tools need it, so "
        "ORT checker / session bounds the speedup any checker with ORT Mobile's semantics can reach.",
        "",
        "Python pace: a fixed piece of pure-Python work (`harness.python_pace`) timed in the same rounds. "
        "It tells how fast the machine ran interpreted code meanwhile: mobile-ep's work outside "
        "onnxruntime is mostly interpreted and slows down more than onnxruntime's C++ when the pace is "
        "slow, so compare speedups across runs only at a similar pace.",
        "",
        "| model | mobile-ep | ORT checker | speedup (ORT / mobile-ep) | ORT session alone | "
        "bound (ORT / session) | Python pace |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['model']} | {fmt_s(r['check_ours'])} | {fmt_s(r['check_ort'])} | "
                     f"{r['check_speedup']:.2f}x | {fmt_s(r['session'])} | {r['check_bound']:.2f}x | "
                     f"{r['pace'] * 1e3:.1f} ms |")
    speedup = statistics.median(r["check_speedup"] for r in rows)
    bound = statistics.median(r["check_bound"] for r in rows)
    lines += ["", f"**Median speedup: {speedup:.2f}x** (target: at least {CHECK_SPEEDUP_TARGET:.0f}x; "
                  f"median bound from the session alone: {bound:.2f}x)."]
    if any("convert_ours" in r for r in rows):
        lines += [
            "",
            "## convert: `mobile-ep convert --ep nnapi` vs `convert_onnx_models_to_ort --optimization_style Runtime`",
            "",
            "mobile-ep writes the EP-aware `.onnx` and `.ort` and `report.json`; verification (on by default) "
            "also runs the original and both outputs in onnxruntime. ORT's converter writes the `.ort` "
            "(twice: with and without runtime optimizations, for its operator config).",
            "",
            "| model | mobile-ep (--no-verify) | mobile-ep (verified) | ORT converter | ratio (--no-verify / ORT) | "
            "ratio (verified / ORT) |",
            "|---|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(f"| {r['model']} | {fmt_s(r['convert_ours'])} | {fmt_s(r['convert_ours_verify'])} | "
                         f"{fmt_s(r['convert_ort'])} | {r['convert_ratio']:.2f} | {r['convert_verify_ratio']:.2f} |")
        ratio = statistics.median(r["convert_ratio"] for r in rows)
        worst = max(rows, key=lambda r: r["convert_ratio"])
        verified = statistics.median(r["convert_verify_ratio"] for r in rows)
        lines += ["", f"**Median ratio {ratio:.2f}** (worst {worst['convert_ratio']:.2f}, {worst['model']}; "
                      f"target: at most {CONVERT_RATIO_TARGET}); with verification {verified:.2f}."]
    lines += [
        "",
        "## load + save: mobile-ep's IR vs `onnx.load` + `onnx.save` (the floor)",
        "",
        "mobile-ep's load inspects the file, runs onnx's checker, infers shapes and builds the IR; save "
        "writes atomically with a valid IR version.",
        "",
        "| model | mobile-ep IR | onnx (floor) | ratio |",
        "|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['model']} | {fmt_s(r['io_ours'])} | {fmt_s(r['io_floor'])} | {r['io_ratio']:.2f} |")
    lines += ["", f"Median ratio {statistics.median(r['io_ratio'] for r in rows):.2f}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--models", nargs="*", type=pathlib.Path, default=None)
    parser.add_argument("--no-convert", dest="convert", action="store_false")
    parser.add_argument("--out", default="vs_ort.md", help="file name under bench/results/")
    parser.add_argument("--commands", type=int, default=3, metavar="N",
                        help="also time both tools as commands (fresh processes), N runs each (0: skip)")
    args = parser.parse_args(argv)
    models = args.models or sorted(LIGHT.glob("light_*.onnx"))
    plugins = make_plugins()
    description = machine()
    rows = []
    with tempfile.TemporaryDirectory(prefix="mobile-ep-bench-") as tmp:
        for path in models:
            rows.append(bench_model(path, args.repeats, args.convert, pathlib.Path(tmp), plugins))
            print({k: round(v, 3) if isinstance(v, float) else v for k, v in rows[-1].items()}, file=sys.stderr,
                  flush=True)
    text = render(rows, args.repeats, description)
    if args.commands:
        command_rows = []
        with tempfile.TemporaryDirectory(prefix="mobile-ep-bench-") as tmp:
            for path in models:
                command_rows.append(bench_commands(path, args.commands, pathlib.Path(tmp)))
                print({k: round(v, 3) if isinstance(v, float) else v for k, v in command_rows[-1].items()},
                      file=sys.stderr, flush=True)
        text += "\n".join(render_commands(command_rows, args.commands)) + "\n"
    target = write_result(args.out, text)
    print(text)
    print(f"written: {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
