"""Rendering reports as text (for people) and JSON (for tools), and the generated op tables."""

from __future__ import annotations

import json
import pathlib
import shutil
from collections.abc import Sequence

from mobile_ep.contract import Backend
from mobile_ep.reports.model import BackendReport, CheckReport, ConvertReport

__all__ = ["check_text", "convert_text", "to_json", "ops_markdown", "ops_text"]


def to_json(report: CheckReport | ConvertReport, *, timings: bool = True) -> str:
    data = report.as_dict()
    if not timings:
        data.pop("timings", None)
    return json.dumps(data, indent=2)


def _width() -> int:
    return max(60, min(shutil.get_terminal_size((100, 24)).columns, 160))


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _sizes(report: BackendReport) -> str:
    sizes = [len(p.nodes) for p in report.partitions]
    if len(sizes) > 12:
        return ", ".join(map(str, sizes[:12])) + f", … ({len(sizes)} in all)"
    return ", ".join(map(str, sizes))


def backend_text(report: BackendReport, *, verbose: bool = False, width: int | None = None) -> list[str]:
    width = width or _width()
    options = " ".join(f"{k}={v}" for k, v in report.options.items())
    lines = [_clip(f"{report.backend} {report.version}" + (f"  [{options}]" if options else ""), width)]
    pct = 100.0 * report.coverage
    count = len(report.partitions)
    noun = "partition" if count == 1 else "partitions"
    summary = f"  {report.supported_nodes}/{report.nodes} nodes ({pct:.1f}%) in {count} {noun}"
    if count:
        summary += f" (sizes: {_sizes(report)})"
    lines.append(_clip(summary, width))
    lines.append(f"  verdict: {report.verdict}" + {
        "YES": " - the model should perform well with this backend",
        "MAYBE": " - worth measuring on a device",
        "NO": " - likely slower than the CPU alone (too many partitions or too few nodes claimed)",
    }[report.verdict])
    if report.unsupported:
        lines.append(f"  left on CPU ({len(report.unsupported)}):")
        if verbose:
            for item in report.unsupported:
                lines.append(_clip(f"    {item.node:<24} {item.reason}", width))
        else:
            groups: dict[str, list[str]] = {}
            for item in report.unsupported:
                groups.setdefault(item.reason, []).append(item.node)
            for reason, names in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
                head = f"    {len(names):>4} x  {reason}"
                example = f"  ({', '.join(names[:3])}{', …' if len(names) > 3 else ''})"
                lines.append(_clip(head + example, width))
    return lines


def _after_summary(after: BackendReport) -> str:
    count = len(after.partitions)
    text = (f"{after.supported_nodes}/{after.nodes} nodes in {count} partition{'s' if count != 1 else ''}, "
            f"verdict {after.verdict}")
    dropped = [p for p in after.partitions if p.estimate and not p.estimate.get("kept", True)]
    if dropped:
        text += f"; {len(dropped)} not worth their copies by the cost model"
    return text


def check_text(report: CheckReport, *, verbose: bool = False) -> str:
    width = _width()
    lines = [_clip(f"{report.model}: {report.nodes} nodes (as an ORT session sees it after basic optimization)",
                   width), ""]
    for name, backend in report.backends.items():
        lines.extend(backend_text(backend, verbose=verbose, width=width))
        after = report.after_convert.get(name)
        if after is not None:
            lines.append(_clip(f"  after mobile-ep convert: {_after_summary(after)}", width))
        for hint in backend.suggestions:
            lines.append(_clip(f"  hint: {hint}", width) if not verbose else f"  hint: {hint}")
        lines.append("")
    if report.shape_changes:
        fixed = ", ".join(f"{name} {old} -> {new}" for name, (old, new) in report.shape_changes.items())
        lines.append(_clip(f"shapes fixed for the after-convert view: {fixed}", width))
        lines.append("")
    if report.combined is not None:
        placement = ", ".join(f"{k}: {v}" for k, v in report.combined.placement.items())
        lines.append(_clip(f"together, in priority order {' > '.join(report.combined.order)}: {placement}", width))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def convert_text(report: ConvertReport, *, verbose: bool = False) -> str:
    width = _width()
    lines = backend_text(report.check, verbose=verbose, width=width)
    if report.before is not None:
        b = report.before
        lines.append(f"  before mobile-ep: {b.supported_nodes}/{b.nodes} nodes in {len(b.partitions)} partitions, "
                     f"verdict {b.verdict}")
    if report.check.rewrites:
        counts: dict[str, int] = {}
        for r in report.check.rewrites:
            counts[r["rewrite"]] = counts.get(r["rewrite"], 0) + 1
        lines.append(_clip("  rewrites: " + ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())), width))
    for name, (old, new) in report.shape_changes.items():
        lines.append(_clip(f"  shape: {name} {old} -> {new}", width))
    for p in report.check.partitions:
        if p.estimate and not p.estimate.get("kept", True):
            lines.append(_clip(f"  note: partition of {len(p.nodes)} nodes ({p.nodes[0]}…): {p.estimate['reason']}; "
                               "ORT's EP still takes it (--compile can leave it on CPU)", width))
    lines.append("  wrote:")
    for kind, path in report.outputs.items():
        lines.append(_clip(f"    {kind:<9}{path}", width))
    compiled = getattr(report, "compiled", None)
    if compiled is not None:
        lines.append(_clip(f"    {'bundle':<9}{compiled.bundle}", width))
        lines.append(_clip(f"    {'adapter':<9}{compiled.adapter}", width))
        lines.append(f"  compiled: {len(compiled.compiled)} partition(s), {compiled.compiled_nodes}/{compiled.nodes} nodes "
                     f"as {compiled.backend} payloads")
        for failure in compiled.failures:
            lines.append(_clip(f"    not compiled (left on CPU): partition {failure.partition} ({len(failure.nodes)} "
                               f"nodes): {failure.reason}", width))
    if report.verification:
        for v in report.verification:
            status = "matches" if v.ok else "DIFFERS"
            worst_abs = max((o.max_abs for o in v.outputs), default=0.0)
            worst_rel = max((o.max_rel for o in v.outputs), default=0.0)
            lines.append(f"  verify: {pathlib.Path(v.candidate).name} {status} the original "
                         f"(max abs error {worst_abs:.2e}, max rel error {worst_rel:.2e})")
            for o in v.outputs:
                flag = "ok" if o.ok else "MISMATCH"
                lines.append(_clip(f"    {o.name}: max abs {o.max_abs:.2e}, max rel {o.max_rel:.2e} {flag}"
                                   f"{' (' + o.note + ')' if o.note else ''}", width))
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
    width = _width()
    out = []
    for backend in backends:
        out.append(f"{backend.name} {backend.version}: {len(backend.rules)} ops")
        for label, _module, conditions in _rows(backend):
            out.append(_clip(f"  {label:<28} {conditions}", width))
        out.append("")
    return "\n".join(out)
