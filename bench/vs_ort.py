"""Benchmark: mobile-ep's commands against ONNX Runtime's own tools, as commands (a fresh process per run).

For each ``light_*`` model of the onnx wheel (or the models given), round after round (the commands of a
group take turns; one untimed warm-up round first):

- **check**: ``mobile-ep check MODEL --ep nnapi``, ``mobile-ep check MODEL`` (every installed backend) and
  ``mobile-ep check MODEL --ep nnapi,coreml,qnn`` against ``python -m
  onnxruntime.tools.check_onnx_model_mobile_usability MODEL`` and against the floor, one basic-level
  onnxruntime session on the model as a command (``bench/ort_floor.py``);
- **convert**: ``mobile-ep convert MODEL --ep nnapi --no-verify -o DIR`` and the same with verification
  (the default) against ``python -m onnxruntime.tools.convert_onnx_models_to_ort MODEL --output_dir DIR
  --optimization_style Runtime --target_platform arm``.

The tables give ratios of medians (seconds only as a column for scale).  ``mobile-ep`` is run as
``PYTHON -m mobile_ep.cli`` (see ``harness.mobile_ep_command``).

``--baseline-python PY`` adds the same mobile-ep commands run by another interpreter (e.g. a venv with an
earlier commit installed) to the same rounds, and the ratios this tree / that one: how a change moved
``check`` and ``convert``.  Not part of the default run.  To build such a baseline::

    git worktree add /work/baseline COMMIT
    python -m venv /work/venv-base
    /work/venv-base/bin/pip install /work/baseline /work/baseline/plugins/nnapi /work/baseline/plugins/coreml
    python bench/vs_ort.py --baseline-python /work/venv-base/bin/python --baseline-label COMMIT
    git worktree remove --force /work/baseline

Usage::

    python bench/vs_ort.py [--repeats 5] [--warmup 1] [--models PATH ...] [--no-convert]
                           [--baseline-python PY] [--baseline-label TEXT] [--out vs_ort.md]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from harness import (  # noqa: E402
    COMMAND_ENV,
    alternate,
    code,
    fmt_s,
    header,
    machine,
    median,
    mobile_ep_command,
    ratio,
    remove,
    reproduce,
    versions,
    write_result,
)


def light_models() -> list[pathlib.Path]:
    """The ``light_*`` models shipped in the onnx wheel."""
    import onnx

    return sorted((pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data" / "light").glob("light_*.onnx"))


#: Targets: check (--ep nnapi, and every installed backend) at least this much faster than ORT's checker,
#: median over the models; convert at most this much slower than the baseline.
CHECK_SPEEDUP_TARGET = 1.5
BASELINE_SLOWDOWN_LIMIT = 1.10
#: Targets against the floor (one basic-level onnxruntime session on the model, as a command: ``ort_floor.py``),
#: medians over the models: check --ep nnapi, check with three backends; no model's check --ep nnapi above
#: the last; convert --no-verify against ORT's converter.
FLOOR_TARGETS = {"nnapi": 1.5, "three": 1.8, "max": 2.5, "convert": 1.3}
#: The backends of "check with three backends" (those of them installed).
THREE_BACKENDS = "nnapi,coreml,qnn"


def _three_backends() -> str:
    from mobile_ep.contract.plugins import make_plugins

    installed = make_plugins().backends()
    return ",".join(b for b in THREE_BACKENDS.split(",") if b in installed) or "nnapi"


def installed_backends(python: str = sys.executable) -> str:
    proc = subprocess.run([*mobile_ep_command(python), "list"], capture_output=True, text=True, env=COMMAND_ENV)
    names = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    return ", ".join(names) if proc.returncode == 0 else f"(mobile-ep list failed: {proc.stderr.strip()[-200:]})"


def bench_model(path: pathlib.Path, repeats: int, warmup: int, work: pathlib.Path, convert: bool = True,
                baseline: str | None = None) -> dict:
    ours = mobile_ep_command()
    model = str(path)
    row: dict = {"model": path.stem}
    check = {
        "ours_nnapi": [*ours, "check", model, "--ep", "nnapi"],
        "ours_all": [*ours, "check", model],
        "ours_three": [*ours, "check", model, "--ep", _three_backends()],
        "ort": [sys.executable, "-m", "onnxruntime.tools.check_onnx_model_mobile_usability", model],
        "floor": [sys.executable, str(pathlib.Path(__file__).parent / "ort_floor.py"), model],
    }
    if baseline:
        check["base_nnapi"] = [*mobile_ep_command(baseline), "check", model, "--ep", "nnapi"]
    times = {name: median(runs) for name, runs in alternate(check, repeats, warmup).items()}
    row.update({f"check_{name}": seconds for name, seconds in times.items()})
    if convert:
        out = work / "out"
        commands = {
            "ours": [*ours, "convert", model, "--ep", "nnapi", "--no-verify", "-o", str(out)],
            "ours_verify": [*ours, "convert", model, "--ep", "nnapi", "-o", str(out)],
            "ort": [sys.executable, "-m", "onnxruntime.tools.convert_onnx_models_to_ort", model, "--output_dir",
                    str(out), "--optimization_style", "Runtime", "--target_platform", "arm"],
        }
        if baseline:
            base = mobile_ep_command(baseline)
            commands["base"] = [*base, "convert", model, "--ep", "nnapi", "--no-verify", "-o", str(out)]
            commands["base_verify"] = [*base, "convert", model, "--ep", "nnapi", "-o", str(out)]
        times = {name: median(runs) for name, runs in alternate(commands, repeats, warmup, after=remove(out)).items()}
        row.update({f"convert_{name}": seconds for name, seconds in times.items()})
    return row


def _ratio(row: dict, a: str, b: str) -> float | None:
    return row[a] / row[b] if a in row and b in row else None


def _median(rows: list[dict], a: str, b: str) -> float | None:
    values = [_ratio(r, a, b) for r in rows]
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _verdict(value: float | None, ok: bool) -> str:
    return "" if value is None else (" (met)" if ok else " (NOT met)")


def _floor_table(rows: list[dict]) -> list[str]:
    """``check`` and ``convert --no-verify`` against the floor: one basic-level session on the model."""
    lines = ["", "## Against the floor", "",
             "The floor: `python bench/ort_floor.py MODEL`, one onnxruntime session at the basic level on the model "
             "writing the optimized model, as a command (what `check` cannot do without). Ratio = command / floor; "
             "convert --no-verify = mobile-ep / ORT's converter.", "",
             f"| model | floor | check --ep nnapi | ratio | check --ep {THREE_BACKENDS} | ratio | "
             "convert --no-verify / ORT |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {fmt_s(r['check_floor'])} | {fmt_s(r['check_ours_nnapi'])} | "
                     f"{ratio(_ratio(r, 'check_ours_nnapi', 'check_floor'))} | {fmt_s(r.get('check_ours_three'))} | "
                     f"{ratio(_ratio(r, 'check_ours_three', 'check_floor'))} | "
                     f"{ratio(_ratio(r, 'convert_ours', 'convert_ort'))} |")
    nnapi, three = _median(rows, "check_ours_nnapi", "check_floor"), _median(rows, "check_ours_three", "check_floor")
    worst = max((v for v in (_ratio(r, "check_ours_nnapi", "check_floor") for r in rows) if v is not None),
                default=None)
    converted = _median(rows, "convert_ours", "convert_ort")
    t = FLOOR_TARGETS
    lines += ["", f"**Medians: check --ep nnapi {ratio(nnapi)}x the floor{_verdict(nnapi, (nnapi or 0) <= t['nnapi'])} "
                  f"(target <= {t['nnapi']}), highest {ratio(worst)}x{_verdict(worst, (worst or 0) <= t['max'])} "
                  f"(<= {t['max']}); three backends {ratio(three)}x{_verdict(three, (three or 0) <= t['three'])} "
                  f"(<= {t['three']}); convert --no-verify {ratio(converted)}x ORT's converter"
                  f"{_verdict(converted, (converted or 0) <= t['convert'])} (<= {t['convert']}).**"]
    return lines


def render(rows: list[dict], repeats: int, warmup: int, description: str, command: str, backends: str,
           baseline: str | None = None, baseline_label: str = "the baseline", baseline_versions: str = "",
           label: str = "this tree") -> str:
    lines = [
        *header("mobile-ep vs ONNX Runtime's own tools, as commands", description, command, label, baseline_label if baseline else None),
        f"Each run is a fresh process (start-up and imports included, byte-code cached); the commands of a group "
        f"take turns, {repeats} timed rounds after {warmup} warm-up round(s); medians, and ratios of the medians. "
        f"`mobile-ep` = `python -m mobile_ep.cli`; installed backends: {backends}.",
        "",
        "## check",
        "",
        "`mobile-ep check MODEL --ep nnapi` and `mobile-ep check MODEL` (every installed backend) vs "
        "`python -m onnxruntime.tools.check_onnx_model_mobile_usability MODEL`. Speedup = ORT / mobile-ep.",
        "",
        "| model | ORT checker | mobile-ep --ep nnapi | speedup | mobile-ep (all) | speedup |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['model']} | {fmt_s(r['check_ort'])} | {fmt_s(r['check_ours_nnapi'])} | "
                     f"{ratio(_ratio(r, 'check_ort', 'check_ours_nnapi'))}x | {fmt_s(r['check_ours_all'])} | "
                     f"{ratio(_ratio(r, 'check_ort', 'check_ours_all'))}x |")
    nnapi, every = _median(rows, "check_ort", "check_ours_nnapi"), _median(rows, "check_ort", "check_ours_all")
    lines += ["", f"**Median speedup: --ep nnapi {ratio(nnapi)}x{_verdict(nnapi, nnapi >= CHECK_SPEEDUP_TARGET)}, "
                  f"every backend {ratio(every)}x{_verdict(every, every >= CHECK_SPEEDUP_TARGET)}** "
                  f"(target: at least {CHECK_SPEEDUP_TARGET}x)."]
    if any("convert_ours" in r for r in rows):
        lines += [
            "",
            "## convert",
            "",
            "`mobile-ep convert MODEL --ep nnapi --no-verify -o DIR` (and verified, the default) vs `python -m "
            "onnxruntime.tools.convert_onnx_models_to_ort MODEL --output_dir DIR --optimization_style Runtime "
            "--target_platform arm`. Ratio = mobile-ep / ORT (above 1: mobile-ep is slower). mobile-ep writes the "
            "EP-aware `.onnx`, `.ort` and `report.json`, and verification runs the original and both outputs in "
            "onnxruntime; ORT's converter writes the `.ort` and its operator config.",
            "",
            "| model | ORT converter | mobile-ep --no-verify | ratio | mobile-ep (verified) | ratio |",
            "|---|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(f"| {r['model']} | {fmt_s(r['convert_ort'])} | {fmt_s(r['convert_ours'])} | "
                         f"{ratio(_ratio(r, 'convert_ours', 'convert_ort'))} | {fmt_s(r['convert_ours_verify'])} | "
                         f"{ratio(_ratio(r, 'convert_ours_verify', 'convert_ort'))} |")
        lines += ["", f"Median ratio: --no-verify {ratio(_median(rows, 'convert_ours', 'convert_ort'))}, verified "
                      f"{ratio(_median(rows, 'convert_ours_verify', 'convert_ort'))}."]
    if baseline:
        lines += [
            "",
            "## Against the baseline",
            "",
            f"The same mobile-ep commands run by `{baseline}` ({baseline_label}; {baseline_versions}), in the same "
            "rounds as the commands above. Ratio = measured / baseline (above 1: slower than the baseline).",
            "",
            "| model | check --ep nnapi | convert --no-verify | convert (verified) |",
            "|---|---|---|---|",
        ]
        for r in rows:
            lines.append(f"| {r['model']} | {ratio(_ratio(r, 'check_ours_nnapi', 'check_base_nnapi'))} | "
                         f"{ratio(_ratio(r, 'convert_ours', 'convert_base'))} | "
                         f"{ratio(_ratio(r, 'convert_ours_verify', 'convert_base_verify'))} |")
        check = _median(rows, "check_ours_nnapi", "check_base_nnapi")
        plain = _median(rows, "convert_ours", "convert_base")
        verified = _median(rows, "convert_ours_verify", "convert_base_verify")
        limit = BASELINE_SLOWDOWN_LIMIT
        lines += ["", f"**Median ratio: check --ep nnapi {ratio(check)}; convert --no-verify {ratio(plain)}"
                      f"{_verdict(plain, plain is not None and plain <= limit)}, verified {ratio(verified)}"
                      f"{_verdict(verified, verified is not None and verified <= limit)}** (convert's limit: "
                      f"at most {limit:.2f})."]
    if any("check_floor" in r for r in rows):
        lines += _floor_table(rows)
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    parser.add_argument("--models", nargs="*", type=pathlib.Path, default=None,
                        help="default: the light_* models of the onnx wheel")
    parser.add_argument("--no-convert", dest="convert", action="store_false", help="time check only")
    parser.add_argument("--baseline-python", metavar="PY",
                        help="also run the mobile-ep commands with this interpreter (another install) and compare")
    parser.add_argument("--baseline-label", help="what the baseline is (default: its commit, if installed from a "
                        "git checkout, else where it is installed)")
    parser.add_argument("--label", help="what the measured mobile-ep is (default: the commit of the checkout this "
                        "interpreter's mobile_ep is installed from, else where it is installed)")
    parser.add_argument("--out", default="vs_ort.md", help="file under bench/results/ (or an absolute path)")
    args = parser.parse_args(argv)
    models = args.models or light_models()
    description = machine()
    backends = installed_backends()
    baseline_versions = versions(args.baseline_python) if args.baseline_python else ""
    label = args.label or code()
    baseline_label = args.baseline_label or (code(args.baseline_python) if args.baseline_python else "")
    rows = []
    with tempfile.TemporaryDirectory(prefix="mobile-ep-bench-") as tmp:
        for path in models:
            rows.append(bench_model(path, args.repeats, args.warmup, pathlib.Path(tmp), args.convert,
                                    args.baseline_python))
            print({k: round(v, 3) if isinstance(v, float) else v for k, v in rows[-1].items()}, file=sys.stderr,
                  flush=True)
    text = render(rows, args.repeats, args.warmup, description, reproduce("vs_ort.py", argv), backends,
                  args.baseline_python, baseline_label, baseline_versions, label)
    target = write_result(args.out, text)
    print(text)
    print(f"written: {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
