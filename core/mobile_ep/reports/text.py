"""Rendering reports as text (for people) and JSON (for tools), and the generated op tables."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import sys
import textwrap
from collections.abc import Sequence

from mobile_ep.contract import Backend
from mobile_ep.reports.model import BackendReport, CheckReport, ConvertReport, causes

__all__ = ["check_text", "convert_text", "compile_warning", "nothing_gained", "to_json", "ops_markdown", "ops_text"]


def to_json(report: CheckReport | ConvertReport, *, timings: bool = True) -> str:
    data = report.as_dict()
    if not timings:
        data.pop("timings", None)
    return json.dumps(data, indent=2)


class _Out:
    """Where the text goes: a terminal (tables fitted to its width) or a pipe or file (nothing cut).

    Prose is wrapped at word boundaries (an option such as ``--shape x=1,3,H,W`` is never split); only
    tables (``-v`` node lists, the op tables) are cut to the width, and only on a terminal."""

    def __init__(self, terminal: bool | None = None) -> None:
        self.terminal = sys.stdout.isatty() if terminal is None else terminal
        columns = shutil.get_terminal_size((100, 24)).columns
        self.width = max(60, columns if self.terminal or os.environ.get("COLUMNS") else 100)

    def wrap(self, text: str, indent: str = "", more: str = "    ") -> list[str]:
        # An option and its value stay on one line: `--shape x=1,3,H,W` is copied whole.
        text = re.sub(r"(?<!\S)(--?[A-Za-z][\w-]*) (?=[^\s-])", "\\1\u00a0", text)
        lines = textwrap.wrap(text, self.width, initial_indent=indent, subsequent_indent=indent + more,
                              break_long_words=False, break_on_hyphens=False) or [indent]
        return [line.replace("\u00a0", " ") for line in lines]

    def row(self, text: str) -> str:
        if self.terminal and len(text) > self.width:
            return text[: max(0, self.width - 1)] + "…"
        return text


def _sizes(report: BackendReport) -> str:
    sizes = [len(p.nodes) for p in report.partitions]
    if len(sizes) > 12:
        return ", ".join(map(str, sizes[:12])) + f", … ({len(sizes)} in all)"
    return ", ".join(map(str, sizes))


_VERDICTS = {
    "YES": "the model should perform well with this backend",
    "MAYBE": "worth measuring on a device",
    "NO": "likely slower than the CPU alone (too many partitions or too few nodes claimed)",
}


def _result(report: BackendReport) -> str:
    """``claimed/nodes (pct) in N partitions (sizes), verdict V``."""
    count = len(report.partitions)
    text = (f"{report.supported_nodes}/{report.nodes} nodes claimed ({100.0 * report.coverage:.1f}%) in {count} "
            f"partition{'' if count == 1 else 's'}")
    if count > 1:
        text += f" ({_sizes(report)})"
    return text + f", verdict {report.verdict}"


def _ops(ops: dict[str, int], limit: int = 6) -> str:
    items = [f"{op} x{n}" if n > 1 else op for op, n in ops.items()]
    return ", ".join(items[:limit]) + (f", +{len(items) - limit} more ops" if len(items) > limit else "")


def cause_lines(report: BackendReport, out: _Out, indent: str = "  ", after: BackendReport | None = None
                ) -> list[str]:
    """One line (wrapped) per cause: how many nodes, the ops, the cause and what to do about it (with *after*,
    the report after convert: the rewrites convert applies to those nodes)."""
    rewritten = {r.get("node"): r.get("rewrite") for r in after.rewrites} if after is not None else {}
    lines = []
    for cause in causes(report):
        count = len(cause.nodes)
        head = f"{count} node{'' if count == 1 else 's'} on CPU: "
        if cause.kind == "dynamic":
            fix = report.shape_fix or "--shape NAME=D1,D2,..."
            sizes = re.findall(r"--shape (?:\S*=)?(\S+)", report.shape_fix)
            places = list(dict.fromkeys(d for dims in sizes for d in dims.split(",") if not d.isdigit()))
            text = (f"{head}dynamic shapes ({_ops(cause.ops)}); fix them with {fix}"
                    + (f" ({', '.join(places)}: the sizes your app feeds)" if places else ""))
        elif cause.kind == "no_rule":
            text = f"{head}{report.backend} has no rule for {_ops(cause.ops, limit=10)}"
        else:
            text = f"{head}{_ops(cause.ops)}: {cause.text}"
        if count <= 3:
            text += f" ({', '.join(cause.nodes)})"
        applied: dict[str, int] = {}
        for name in cause.nodes:
            if name in rewritten:
                applied[rewritten[name]] = applied.get(rewritten[name], 0) + 1
        if applied:
            done = sum(applied.values())
            text += (f"; mobile-ep convert rewrites {'them' if done == count else f'{done} of them'} "
                     f"({', '.join(f'{k} x{v}' for k, v in sorted(applied.items()))})")
        lines.extend(out.wrap(text, indent + "  "))
    return lines


def _node_rows(report: BackendReport, out: _Out) -> list[str]:
    """-v: every node left on the CPU, one row each."""
    if not report.unsupported:
        return []
    width = min(max((len(u.node) for u in report.unsupported), default=0), 40)
    rows = [f"  every node left on CPU ({len(report.unsupported)}):"]
    for u in report.unsupported:  # (wrapped under the reason column, never cut)
        rows.extend(out.wrap(f"{u.node:<{width}}  {u.reason}", "    ", " " * (width + 2)))
    return rows


def backend_text(report: BackendReport, *, verbose: bool = False, width: int | None = None,
                 out: _Out | None = None, label: str = "", after: BackendReport | None = None) -> list[str]:
    """One backend: its result in one line, then one line per cause (every node with *verbose*)."""
    out = out or _Out()
    if width is not None:
        out.width = width
    title = f"{report.backend} {report.version}" + (f" ({label})" if label else "")
    lines = out.wrap(f"{title}: {_result(report)} - {_VERDICTS[report.verdict]}", "", "  ")
    if verbose and report.options:
        lines.extend(out.wrap("options: " + " ".join(f"{k}={v}" for k, v in report.options.items()), "  "))
    lines.extend(cause_lines(report, out, after=after))
    if report.shape_fix and report.unsupported and not any(c.kind == "dynamic" for c in causes(report)):
        lines.extend(out.wrap(f"input shapes are dynamic: {report.shape_fix} (the sizes your app feeds) gives "
                              f"{report.backend} static shapes and the cost model its numbers", "    ", "      "))
    for hint in report.const_fix:
        lines.extend(out.wrap(hint, "    ", "      "))
    lines.extend(_inlined_lines(report, out))
    if verbose:
        lines.extend(_node_rows(report, out))
    return lines


def _inlined_lines(report: BackendReport, out: _Out, indent: str = "    ") -> list[str]:
    """One line per reason the backend refused ONNX function nodes offered whole (judged as their bodies)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for item in report.inlined:
        groups.setdefault((item.op, item.reason), []).append(item.node)
    lines = []
    for (op, reason), nodes in groups.items():
        count = f" x{len(nodes)}" if len(nodes) > 1 else ""
        lines.extend(out.wrap(f"{op}{count} offered whole, refused ({reason}); judged as its body's nodes", indent,
                              indent + "  "))
    return lines


def _after_summary(after: BackendReport) -> str:
    count = len(after.partitions)
    text = (f"{after.supported_nodes}/{after.nodes} nodes in {count} partition{'s' if count != 1 else ''}, "
            f"verdict {after.verdict}")
    dropped = [p for p in after.partitions if p.estimate and not p.estimate.get("kept", True)]
    if dropped:
        text += f"; {len(dropped)} not worth their copies by the cost model"
    unknown = [p for p in after.partitions if p.estimate and p.estimate.get("known") is False]
    if unknown:
        text += f"; {len(unknown)} of unknown cost (shapes not static)"
    return text


def _rewrites(report: BackendReport) -> str:
    counts: dict[str, int] = {}
    for r in report.rewrites:
        counts[r["rewrite"]] = counts.get(r["rewrite"], 0) + 1
    return ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))


def check_text(report: CheckReport, *, verbose: bool = False, combined: bool | None = None,
               terminal: bool | None = None) -> str:
    """``check``'s answer.  Without ``--shape``/``--dim``: per backend the model as ORT Mobile sees it today
    (one line), one line per cause, and one line for the model after ``mobile-ep convert``.  With them, the
    fixed (and converted) model is the subject and the model as is gets one line.  *combined*: show the
    backends registered together (default: when the report has it and more than one backend)."""
    out = _Out(terminal)
    fixed = bool(report.shape_changes)
    lines = out.wrap(f"{report.model}: {report.nodes} nodes (as an ORT session sees it after basic optimization)",
                     "", "  ")
    if fixed:
        changes = ", ".join(f"{name} {old} -> {new}" for name, (old, new) in report.shape_changes.items())
        lines.extend(out.wrap(f"with the shapes fixed: {changes}", "", "  "))
    lines.append("")
    for name, as_is in report.backends.items():
        after = report.after_convert.get(name)
        subject = after if fixed and after is not None else as_is
        lines.extend(backend_text(subject, verbose=verbose, out=out,
                                  label="shapes fixed, after mobile-ep convert" if subject is after else "",
                                  after=after if subject is as_is else None))
        if subject is after:
            lines.extend(out.wrap(f"as is (no --shape/--dim, no rewrites): {_after_summary(as_is)}", "  "))
            if after.rewrites:
                lines.extend(out.wrap(f"mobile-ep convert rewrites: {_rewrites(after)}", "  "))
        elif after is not None:
            text = f"after mobile-ep convert: {_after_summary(after)}"
            if after.rewrites:
                text += f" (rewrites: {_rewrites(after)})"
            lines.extend(out.wrap(text, "  "))
        for option in (s for s in as_is.suggestions if s.startswith("-O ")):  # (option_hints: computed)
            lines.extend(out.wrap(f"try {option}", "  ", "    "))
        lines.append("")
    if combined is None:
        combined = len(report.backends) > 1
    for together in [report.combined, *report.other_platforms] if combined and report.combined is not None else []:
        placement = ", ".join(f"{k}: {v}" for k, v in together.placement.items())
        where = f" on {together.platform}" if together.platform != "any" else ""
        lines.extend(out.wrap(f"together{where}, in priority order {' > '.join(together.order)}"
                              f"{' (as is)' if fixed else ''}: {placement} nodes", "", "  "))
        lines.append("")
    if combined and report.combined is None and len(report.backends) > 1:
        named = ", ".join(f"{name} ({b.platform})" for name, b in report.backends.items())
        lines.extend(out.wrap(f"not combined: {named} are for apps on different platforms", "", "  "))
    if report.against_ep:
        from mobile_ep.reports import against

        lines.extend(["", *against.comparison_text(report.against_ep).rstrip("\n").splitlines()])
    return "\n".join(lines).rstrip() + "\n"


def _verification_lines(report: ConvertReport, out: _Out) -> list[str]:
    lines = []
    for v in report.verification:
        status = "matches" if v.ok else "DIFFERS from"
        worst_abs = max((o.max_abs for o in v.outputs), default=0.0)
        lines.extend(out.wrap(f"verify: {pathlib.Path(v.candidate).name} {status} the original "
                              f"(max abs error {worst_abs:.2e})", "  "))
        if getattr(v, "reference", ""):
            lines.extend(out.wrap(f"({v.reference})", "    "))
        for o in v.outputs:
            flag = "ok" if o.ok else "MISMATCH"
            rel, floor, steps = o.max_rel, getattr(o, "rel_floor", None), getattr(o, "max_steps", None)
            if rel is None:
                rel_text = "relative error not measured (|reference| is below the floor everywhere)"
            elif floor:
                rel_text = f"max rel {rel:.2e} where |reference| > {floor:.0e}"
            else:
                rel_text = f"max rel {rel:.2e}"
            if steps is not None:
                rel_text += f", {steps:g} quantization step(s)"
            note = f" ({o.note})" if o.note else ""
            lines.extend(out.wrap(f"{o.name}: {flag}, max abs {o.max_abs:.2e}, {rel_text}{note}", "    "))
    return lines


def compile_warning(report: ConvertReport) -> str | None:
    """The warning for ``convert --compile`` that compiled nothing, or fewer nodes than the backend claims in
    the partitions it keeps (None when all of them were compiled)."""
    compiled = getattr(report, "compiled", None)
    if compiled is None:
        return None
    if compiled.compiled:
        predicted = predicted_nodes(report)
        if compiled.compiled_nodes >= predicted:
            return None
        why = "; ".join(f"partition {f.partition}: {f.reason}" for f in compiled.failures[:3]) or \
            "the partitions it did not compile stay on the CPU"
        return (f"--compile compiled {compiled.compiled_nodes} of the {predicted} nodes {report.backend} claims: "
                f"the compiled model differs from the prediction ({why})")
    if compiled.failures:
        why = "; ".join(f"partition {f.partition}: {f.reason}" for f in compiled.failures[:3])
        more = f" (and {len(compiled.failures) - 3} more)" if len(compiled.failures) > 3 else ""
        return f"--compile compiled no partition: {why}{more}"
    if not report.check.partitions:
        return (f"--compile compiled no partition: {report.backend} claims no node of this model"
                + (f" (fix the input shapes with {report.check.shape_fix})" if report.check.shape_fix
                   and any(c.kind == "dynamic" for c in causes(report.check)) else ""))
    return "--compile compiled no partition: the backend lowered none of them"


def interface_lines(report: ConvertReport, out: _Out) -> list[str]:
    """What changed in the inputs and outputs the app feeds and reads (nothing when nothing did)."""
    changes = getattr(report, "interface", [])
    if not changes:
        return []
    lines = out.wrap(f"the app's interface changed; the written model's inputs: {report.app_inputs}", "  ", "    ")
    for change in changes:
        lines.extend(out.wrap(change.text(), "    ", "    "))
    return lines


def nothing_gained(report: ConvertReport) -> str | None:
    """The warning for a ``convert`` whose model the backend takes nothing of (None when it takes a node)."""
    if report.check.supported_nodes:
        return None
    judged = [r for r in (report.check, report.before) if r is not None]
    fix = (f"; fix the input shapes with {report.check.shape_fix}" if report.check.shape_fix
           and any(c.kind == "dynamic" for r in judged for c in causes(r)) else "")
    return (f"{report.backend} takes 0/{report.check.nodes} nodes of the written model: the app gains nothing on "
            f"{report.backend}, every node runs on the CPU{fix}")


def predicted_nodes(report: ConvertReport) -> int:
    """The nodes of the partitions the backend claims and keeps (those its cost model drops are left out):
    what ``--compile`` should compile."""
    return sum(len(p.nodes) for p in report.check.partitions if not p.estimate or p.estimate.get("kept", True))


def convert_text(report: ConvertReport, *, verbose: bool = False, terminal: bool | None = None) -> str:
    """``convert``'s answer: the converted model's result and causes, then what was written and verified."""
    out = _Out(terminal)
    lines = out.wrap(f"{report.model} -> {report.backend}", "", "  ")
    lines.extend(backend_text(report.check, verbose=verbose, out=out))
    if report.before is not None:
        lines.extend(out.wrap(f"before mobile-ep (as ORT Mobile sees the model): {_after_summary(report.before)}",
                              "  "))
    if report.check.rewrites:
        lines.extend(out.wrap(f"rewrites: {_rewrites(report.check)}", "  "))
    for p in report.check.partitions:
        if p.estimate and not p.estimate.get("kept", True):
            lines.extend(out.wrap(f"note: partition of {len(p.nodes)} nodes ({p.nodes[0]}, ...): "
                                  f"{p.estimate['reason']}; ORT's EP still takes it (--compile can leave it on CPU)",
                                  "  "))
    lines.append("  wrote:")
    for kind, path in report.outputs.items():
        lines.append(f"    {kind:<9}{path}")
    compiled = getattr(report, "compiled", None)
    if compiled is not None:
        for kind, path in (("compiled", compiled.path), ("bundle", compiled.bundle), ("adapter", compiled.adapter)):
            if path and path not in report.outputs.values():
                lines.append(f"    {kind:<9}{path}")
        short = predicted_nodes(report) - compiled.compiled_nodes
        lines.extend(out.wrap(f"compiled: {len(compiled.compiled)} partition(s), {compiled.compiled_nodes}/"
                              f"{compiled.nodes} nodes as {compiled.backend} payloads"
                              + (f", {short} fewer than predicted" if short > 0 else ""), "  "))
        for failure in compiled.failures:
            lines.extend(out.wrap(f"not compiled (left on CPU): partition {failure.partition} "
                                  f"({len(failure.nodes)} nodes): {failure.reason}", "    "))
    lines.extend(interface_lines(report, out))
    if report.verification:
        lines.extend(_verification_lines(report, out))
    else:
        lines.append("  verify: skipped (--no-verify)")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# Op tables, generated from the rule registries
# --------------------------------------------------------------------------------------------------
def _rows(backend: Backend) -> list[tuple[str, str, str]]:
    rows = []
    for domain, op_type, rule in backend.rules:
        lo, hi = rule.opsets
        registered = "" if (lo, hi) == (1, 10_000) else f" (opsets {lo}–{hi})"
        label = op_type if not domain else f"{domain}:{op_type}"
        conditions = "; ".join(rule.conditions(op_type)) or "-"
        rows.append((label + registered, type(rule).__module__.rsplit(".", 1)[-1], conditions))
    return rows


def ops_markdown(backends: Sequence[Backend]) -> str:
    out = []
    for backend in backends:
        out.append(f"## {backend.name} {backend.version}\n")
        if backend.description:
            out.append(backend.description.strip() + "\n")
        options = ", ".join(f"`{n}={d}`" for n, d, _ in backend.describe_options())
        if options:
            out.append(f"Options (defaults): {options}\n")
        out.append("| Op | Rule module | Conditions |")
        out.append("|---|---|---|")
        for label, module, conditions in _rows(backend):
            out.append(f"| {label} | `{module}` | {conditions.replace('|', '/')} |")
        out.append("")
    return "\n".join(out)


def ops_text(backends: Sequence[Backend]) -> str:
    fit = _Out()
    out = []
    for backend in backends:
        out.append(f"{backend.name} {backend.version}: {len(backend.rules)} ops")
        for label, _module, conditions in _rows(backend):
            out.append(fit.row(f"  {label:<28} {conditions}"))
        out.append("")
    return "\n".join(out)
