"""``mobile-ep explain MODEL NODE``: why one node runs where it does, and what would change that.

For each backend the answer has two parts:

- **why**: the partition the node lands in (its size, and the cost model's view of it), or the reason it
  stays on the CPU — its rule's own answer, a partition filter, an exclusion (NNAPI's stop ops), a
  backend with higher priority;
- **what would change it**, each computed, not guessed: the node's rule re-evaluated (and the model
  re-partitioned) under every other value of each backend option (a higher ``api_level``, another
  ``model_format`` or ``deployment_target``, ...), and pairs of them when no single change is enough;
  the model with its dynamic input shapes fixed (your ``--shape``/``--dim``, or a guess that says so);
  what ``mobile-ep convert`` does to it (the rewrite that replaces it, and where its replacement lands);
  and every other installed backend.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import os
import pathlib
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import onnx_ir as ir

from mobile_ep import model_io as mir
from mobile_ep import pipeline as pipeline_module
from mobile_ep.contract import Backend, RuleContext, Support, op_label
from mobile_ep.contract.plugins import Plugins, make_plugins
from mobile_ep.errors import MobileEpError, UsageError
from mobile_ep.options import Options
from mobile_ep.partitioning.cost import select_partitions
from mobile_ep.partitioning.platforms import platform_groups, same_platform
from mobile_ep.partitioning.propose import propose
from mobile_ep.partitioning.units import build_node_units
from mobile_ep.passes.load import load_for_analysis
from mobile_ep.passes.partition import isolate_faults
from mobile_ep.reports.model import BackendReport
from mobile_ep.reports.option_hints import option_text, option_values, with_options

__all__ = ["Alternative", "BackendExplanation", "ExplainReport", "explain"]

#: Most option pairs tried when no single option change moves the node.
MAX_PAIRS = 60


@dataclasses.dataclass
class Alternative:
    """One change, and where the node would run with it."""

    #: ``option``, ``options``, ``shape``, ``convert``, ``backend`` or ``const`` (``--const NAME=VALUE``).
    kind: str
    #: The change, as you would type it (``-O nnapi.api_level=29``, ``--shape x=1,3,224,224``, ``--ep coreml``).
    change: str
    #: Where the node would run: a backend's name, or ``None`` for the CPU.
    runs_on: str | None
    #: In words: the partition it would join, or why it would still stay on the CPU.
    outcome: str

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class BackendExplanation:
    backend: str
    #: Whether the node runs on this backend (alone, as ORT would place it).
    claimed: bool
    #: Why: the partition and its cost estimate, or the reason it stays on the CPU.
    why: str
    #: The backend's rule's own answer (before partitioning, filters and priorities).
    rule: str
    #: The node's partition: ``{"index", "of", "size", "ops", "estimate"}``.
    partition: dict | None
    #: Changes that would move the node (on or off the accelerator), each computed.
    alternatives: list[Alternative]
    #: Changes tried that would not move it (their number, per kind).
    unchanged: dict[str, int] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict:
        result = dataclasses.asdict(self)
        result["alternatives"] = [a.as_dict() for a in self.alternatives]
        return result


@dataclasses.dataclass
class ExplainReport:
    model: str
    node: str
    op: str
    inputs: list[tuple[str, str]]
    outputs: list[tuple[str, str]]
    attrs: str
    #: The node unit the backends decide on, when it is more than the node (a QDQ group).
    unit: str
    backends: list[BackendExplanation]
    #: With several backends: where the node runs when they are registered together, in priority order.
    combined: str | None = None
    #: How the node was found (``"by output value name"``, or a note that ORT's optimizations renamed it).
    note: str = ""

    def as_dict(self) -> dict:
        return {
            "model": self.model, "node": self.node, "op": self.op,
            "inputs": [{"name": n, "type": t} for n, t in self.inputs],
            "outputs": [{"name": n, "type": t} for n, t in self.outputs],
            "attrs": self.attrs, "unit": self.unit, "note": self.note,
            "backends": [b.as_dict() for b in self.backends],
            **({"combined": self.combined} if self.combined is not None else {}),
        }

    def text(self, *, verbose: bool = False) -> str:
        def io(items: list[tuple[str, str]]) -> str:
            return ", ".join(f"{n} {t}".strip() for n, t in items) or "-"

        lines = [f"{self.node}: {self.op}  ({self.model})"]
        if self.note:
            lines.append(f"  note: {self.note}")
        lines.append(f"  inputs:  {io(self.inputs)}")
        lines.append(f"  outputs: {io(self.outputs)}")
        if self.attrs:
            lines.append(f"  attributes: {self.attrs}")
        if self.unit:
            lines.append(f"  decided as one unit: {self.unit}")
        for b in self.backends:
            lines.append("")
            lines.append(f"{b.backend}: {'runs on ' + b.backend if b.claimed else 'CPU'}")
            lines.append(f"  why: {b.why}")
            if verbose or (not b.claimed and b.rule not in b.why):
                lines.append(f"  its rule says: {b.rule}")
            if b.alternatives:
                lines.append("  what would change that:")
                for a in b.alternatives:
                    lines.append(f"    {a.change}: {a.outcome}")
            else:
                lines.append("  nothing tried changes that (options, shapes, convert, other backends)")
            if verbose and b.unchanged:
                tried = ", ".join(f"{n} {kind}" for kind, n in sorted(b.unchanged.items()))
                lines.append(f"  tried without effect: {tried}")
        if self.combined is not None:
            lines.append("")
            lines.append(f"all together: {self.combined}")
        return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# Finding the node
# --------------------------------------------------------------------------------------------------
def _find(model: ir.Model, key: str) -> tuple[ir.Node | None, str]:
    for node in model.graph:
        if node.name == key:
            return node, ""
    for node in model.graph:
        if any(v.name == key for v in node.outputs):
            return node, f"{key!r} is a value; explaining the node that produces it ({node.name!r})"
    return None, ""


def _not_found(model: ir.Model, path: pathlib.Path, key: str) -> tuple[ir.Node | None, str]:
    """The node is not in the graph ORT partitions: was it optimized away?  Else a usage error."""
    proto = mir.read_proto(path)
    original = next((n for n in proto.graph.node if n.name == key or key in n.output), None)
    if original is not None:
        for output in original.output:
            node, _ = _find(model, output)
            if node is not None:
                return node, (f"onnxruntime's basic optimizations merged {key!r} ({original.op_type}) into "
                              f"{node.name!r} ({op_label(node)}), which produces its output {output!r}")
        raise UsageError(f"node {key!r} ({original.op_type}) is not in the graph ORT partitions: onnxruntime's "
                         "basic optimizations removed it (constant folding or a fusion); nothing runs it")
    names = [n.name for n in model.graph if n.name] + [v.name for n in model.graph for v in n.outputs if v.name]
    close = difflib.get_close_matches(key, names, n=5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; `mobile-ep check -v` lists the nodes on CPU"
    raise UsageError(f"no node or value named {key!r} in {path.name}{hint}")


def _type(value: ir.Value | None) -> str:
    if value is None:
        return ""
    dtype = value.dtype.name.lower() if value.dtype is not None else "?"
    if value.shape is None:
        return f"{dtype}[?]"
    return f"{dtype}[{','.join(str(d) for d in value.shape)}]"


def _dynamic(value: ir.Value | None) -> bool:
    return value is not None and value.const_value is None and (
        value.shape is None or any(not isinstance(d, int) for d in value.shape))


# --------------------------------------------------------------------------------------------------
# Where a node lands
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Where:
    runs_on: str | None
    why: str
    partition: dict | None = None


def _rule(model: ir.Model, backend: Backend, node: ir.Node) -> Support:
    ctx = RuleContext(model, backend)
    ctx.units = build_node_units(model.graph, backend.qdq_ops())
    try:
        return ctx.claims_unit(ctx.unit_of(node))
    except Exception as exc:  # a broken rule costs only its own answer
        return Support.no(f"{backend.name}'s rule raised {type(exc).__name__}: {' '.join(str(exc).split())}")


def _where(model: ir.Model, backends: Sequence[Backend], node: ir.Node, strict: bool) -> _Where:
    proposal = propose(model, backends, on_error=isolate_faults(strict))
    placement = proposal.placements[node]
    if placement.backend is None:
        return _Where(None, placement.reason or "unsupported")
    bp = proposal.per_backend[placement.backend]
    index = next(i for i, p in enumerate(bp.partitions) if node in p.nodes)
    partition = bp.partitions[index]
    backend = next(b for b in backends if b.name == placement.backend)
    costs = select_partitions(bp.partitions, RuleContext(model, backend), backend.cost_params())
    ops: dict[str, int] = {}
    for n in partition.nodes:
        ops[op_label(n)] = ops.get(op_label(n), 0) + 1
    top = ", ".join(f"{op} x{k}" for op, k in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))[:5])
    info = {"index": index + 1, "of": len(bp.partitions), "size": len(partition.nodes), "ops": top,
            "estimate": costs[index].as_dict()}
    why = f"partition {index + 1} of {len(bp.partitions)} ({len(partition.nodes)} nodes: {top})"
    if not costs[index].kept:
        why += (f"; the cost model would not keep it ({costs[index].reason}), but ORT's EP still takes it "
                "(convert --compile can leave it on CPU)")
    return _Where(placement.backend, why, info)


def _short(where: _Where, backend: str) -> str:
    if where.runs_on is None:
        reason = where.why
        prefix = f"{backend}: "
        reason = reason[len(prefix):] if reason.startswith(prefix) else reason
        return f"stays on CPU ({reason})"
    size = where.partition["size"] if where.partition else "?"
    return f"runs on {where.runs_on}, in a partition of {size} nodes"


def _outcome(where: _Where, backend: str) -> str:
    if where.runs_on is None:
        return _short(where, backend)
    p = where.partition or {}
    return f"runs on {where.runs_on}: partition {p.get('index')} of {p.get('of')} ({p.get('size')} nodes)"


# --------------------------------------------------------------------------------------------------
# Option variants
# --------------------------------------------------------------------------------------------------
def _option_alternatives(model: ir.Model, backend: Backend, node: ir.Node, current: _Where, strict: bool
                         ) -> tuple[list[Alternative], int]:
    rule_now = bool(_rule(model, backend, node))
    claimed_now = current.runs_on is not None
    results: dict[str, list[tuple[str, _Where]]] = {}
    tried = 0
    for key, values in option_values(backend):
        for value in values:
            variant = with_options(backend, {key: value})
            if variant is None:
                continue
            tried += 1
            answer = _rule(model, variant, node)
            if bool(answer) == rule_now and (claimed_now or not rule_now):
                continue  # the node's own answer does not move, nor would its placement
            if not answer:
                where = _Where(None, answer.reason or "unsupported")
            else:
                where = _where(model, [variant], node, strict)
            if (where.runs_on is not None) != claimed_now:
                results.setdefault(key, []).append((value, where))
    alternatives = []
    for key, found in results.items():
        alternatives.extend(_group_values(backend, key, found))
    if not claimed_now and not any(a.runs_on for a in alternatives):
        alternatives.extend(_pair_alternatives(model, backend, node, strict))
    return alternatives, tried


def _group_values(backend: Backend, key: str, found: list[tuple[str, _Where]]) -> list[Alternative]:
    """One alternative per outcome; runs of integers (api_level=29..35) are shown as a range."""
    by_outcome: dict[str, list[str]] = {}
    wheres: dict[str, _Where] = {}
    for value, where in found:  # the same place (the reason may quote the value: grouped anyway)
        text = "cpu" if where.runs_on is None else f"{where.runs_on}:{where.partition}"
        by_outcome.setdefault(text, []).append(value)
        wheres.setdefault(text, where)
    alternatives = []
    for text, values in by_outcome.items():
        if len(values) > 1 and all(v.lstrip("-").isdigit() for v in values):
            numbers = sorted(int(v) for v in values)
            shown = f"{numbers[0]}..{numbers[-1]}" if numbers == list(range(numbers[0], numbers[-1] + 1)) \
                else ",".join(map(str, numbers))
            change = f"-O {backend.name}.{key}={numbers[0]}" + (f" (any of {shown})" if len(numbers) > 1 else "")
        else:
            change = " or ".join(f"-O {backend.name}.{key}={v}" for v in values)
        alternatives.append(Alternative("option", change, wheres[text].runs_on, _outcome(wheres[text], backend.name)))
    return alternatives


def _pair_alternatives(model: ir.Model, backend: Backend, node: ir.Node, strict: bool) -> list[Alternative]:
    """Two option changes together, when no single one moves the node onto the accelerator."""
    choices: list[tuple[str, str]] = []
    for key, values in option_values(backend):
        if values and all(v.lstrip("-").isdigit() for v in values):
            valid = [v for v in values if with_options(backend, {key: v}) is not None]
            values = sorted({valid[0], valid[-1]}, key=int) if valid else []
        choices.extend((key, v) for v in values)
    found = []
    for (k1, v1), (k2, v2) in itertools.islice(
            ((a, b) for a, b in itertools.combinations(choices, 2) if a[0] != b[0]), MAX_PAIRS):
        variant = with_options(backend, {k1: v1, k2: v2})
        if variant is None or not _rule(model, variant, node):
            continue
        where = _where(model, [variant], node, strict)
        if where.runs_on is not None:
            found.append(Alternative("options", option_text(backend.name, {k1: v1, k2: v2}), where.runs_on,
                                     _outcome(where, backend.name)))
        if len(found) >= 3:
            break
    return found


# --------------------------------------------------------------------------------------------------
# Shapes, convert, other backends
# --------------------------------------------------------------------------------------------------
def _guess_shapes(model: ir.Model) -> dict[str | None, tuple[int, ...]]:
    shapes: dict[str | None, tuple[int, ...]] = {}
    for value in model.graph.inputs:
        if value.is_initializer() or value.shape is None:
            continue
        dims = list(value.shape)
        if all(isinstance(d, int) for d in dims):
            continue
        rank = len(dims)
        guess = []
        for i, d in enumerate(dims):
            if isinstance(d, int):
                guess.append(d)
            elif i == 0:
                guess.append(1)
            elif rank == 4 and i == 1:
                guess.append(3)
            elif rank == 4:
                guess.append(224)
            else:
                guess.append(64)
        shapes[value.name] = tuple(guess)
    return shapes


def _shape_text(shapes: Mapping[str | None, Sequence[int]], dims: Mapping[str, int]) -> str:
    parts = [f"--shape {name + '=' if name else ''}{','.join(map(str, s))}" for name, s in shapes.items()]
    parts += [f"--dim {k}={v}" for k, v in dims.items()]
    return " ".join(parts)


def _shape_alternative(path: pathlib.Path, model: ir.Model, node: ir.Node, backend: Backend,
                       current: _Where, pipeline: Options, strict: bool,
                       fixed: dict) -> Alternative | None:
    touches_dynamic = any(_dynamic(v) for v in (*node.inputs, *node.outputs))
    dynamic_inputs = any(_dynamic(v) for v in model.graph.inputs if not v.is_initializer())
    if not dynamic_inputs or not (touches_dynamic or "dynamic" in current.why or "static" in current.why
                                  or "shape" in current.why):
        return None
    if "model" not in fixed:
        if pipeline.fixes_shapes:
            shapes, dims, note = dict(pipeline.shapes), dict(pipeline.dims), ""
        else:
            shapes, dims = _guess_shapes(model), {}
            note = " (a guess: give your real sizes)"
        change = _shape_text(shapes, dims) + note
        fixed["change"] = change
        try:
            with tempfile.TemporaryDirectory(prefix="mobile-ep-explain-") as work:
                fixed["model"] = load_for_analysis(path, work, Options(shapes=shapes, dims=dims), [backend])
        except MobileEpError as exc:
            fixed["model"] = None
            fixed["error"] = str(exc)
    if fixed["model"] is None:
        return Alternative("shape", fixed["change"], None, f"could not be tried: {fixed['error']}")
    fixed_model: ir.Model = fixed["model"]
    target, _ = _find(fixed_model, node.name or "")
    if target is None:
        target = next((n for v in node.outputs for n in [_find(fixed_model, v.name or "")[0]] if n is not None), None)
    if target is None:
        return Alternative("shape", fixed["change"], None,
                           "removed: with static shapes onnxruntime folds it into a constant (nothing runs it)")
    where = _where(fixed_model, [backend], target, strict)
    if (where.runs_on is not None) == (current.runs_on is not None):
        return None
    return Alternative("shape", fixed["change"], where.runs_on, _outcome(where, backend.name))


def _convert_alternative(node: ir.Node, backend: str, after: BackendReport | None,
                         claimed_now: bool) -> Alternative | None:
    if after is None:
        return None
    name = node.name or ""
    rewrites = [r for r in after.rewrites if r.get("node") == name]
    partitions = {n: (i, p) for i, p in enumerate(after.partitions) for n in p.nodes}
    if rewrites:
        r = rewrites[0]
        made = [n for n in partitions if n.startswith(f"{name}/")]
        into = ", ".join(r.get("into") or [])
        if made:
            i, p = partitions[made[0]]
            return Alternative("convert", f"mobile-ep convert (rewrite {r['rewrite']})", backend,
                               f"becomes {into}, which runs on {backend}: partition {i + 1} of "
                               f"{len(after.partitions)} ({len(p.nodes)} nodes)")
        return Alternative("convert", f"mobile-ep convert (rewrite {r['rewrite']})", None,
                           f"becomes {into}, still on CPU")
    if name in partitions and not claimed_now:
        i, p = partitions[name]
        return Alternative("convert", "mobile-ep convert", backend,
                           f"runs on {backend}: partition {i + 1} of {len(after.partitions)} ({len(p.nodes)} nodes), "
                           "once shapes are fixed and constants folded")
    unsupported = {u.node: u.reason for u in after.unsupported}
    if name in unsupported and claimed_now:
        return Alternative("convert", "mobile-ep convert", None, f"stays on CPU: {unsupported[name]}")
    return None


def _backend_alternatives(model: ir.Model, node: ir.Node, me: Backend, others: Sequence[Backend], claimed_now: bool,
                          strict: bool) -> tuple[list[Alternative], int]:
    """Other backends of the same platform (an app on Android cannot switch to Core ML) that would place the node
    differently (on an accelerator where this one does not)."""
    found = []
    tried = 0
    for other in others:
        if other.name == me.name or not same_platform(me, other):
            continue
        tried += 1
        where = _where(model, [other], node, strict)
        if (where.runs_on is not None) != claimed_now:
            found.append(Alternative("backend", f"--ep {other.name}", where.runs_on, _outcome(where, other.name)))
    return found, tried - len(found)


def _const_alternatives(model: ir.Model, node: ir.Node) -> list[Alternative]:
    """``--const NAME=VALUE`` for a scalar input whose value reaches *node* through integer math or which
    selects *node*'s branch: with the value fixed, onnxruntime folds the node away (the value is the user's)."""
    from mobile_ep.reports.const_hints import const_candidates

    found = []
    for candidate in const_candidates(model):
        if node.name in candidate.nodes:
            what = "selects its branch" if node.name in candidate.selects else "feeds it through integer math"
            found.append(Alternative("const", f"--const {candidate.input}=VALUE", None,
                                     f"{candidate.input} ({candidate.dtype} scalar) {what}: fixed to the value your "
                                     f"app always feeds, it folds away (an If becomes the branch it selects)"))
    return found


# --------------------------------------------------------------------------------------------------
# explain
# --------------------------------------------------------------------------------------------------
def explain(
    model: str | os.PathLike,
    node: str,
    ep: str | Sequence[str] | None = None,
    *,
    plugins: Plugins | None = None,
    **options: Any,
) -> ExplainReport:
    """``mobile-ep explain``: why *node* (a node name, or the name of a value it produces) runs where it does,
    per backend, and which changes would move it — each answer computed by re-running the rules and the
    partitioner.  *options*: as :func:`mobile_ep.check` takes them.  ``report.text()`` is what the command
    prints; ``report.backends[i].alternatives`` are the computed changes."""
    opts = Options.build(ep, **options)
    with tempfile.TemporaryDirectory(prefix="mobile-ep-explain-") as work:  # (weights stay mapped from there)
        return _explain(pathlib.Path(model), node, opts, plugins or make_plugins(), pathlib.Path(work))


def _explain(path: pathlib.Path, node: str, pipeline: Options, plugins: Plugins, work: pathlib.Path
             ) -> ExplainReport:
    strict = pipeline.strict
    selected = pipeline_module.resolve_backends(pipeline, plugins)
    others = []
    for name, backend in plugins.backends().items():
        if backend.selected_by_default and name not in {b.name for b in selected}:
            others.append(plugins.backend(name).configure(pipeline.backend_options.get(name, {})))
    fixes = Options(shapes=pipeline.shapes, dims=pipeline.dims) if pipeline.fixes_shapes else None
    model = load_for_analysis(path, work, fixes, selected)  # with --shape/--dim: the fixed model is explained
    target, note = _find(model, node)
    if target is None:
        target, note = _not_found(model, path, node)
    assert target is not None
    if fixes is not None:
        fixed_text = _shape_text(pipeline.shapes, pipeline.dims)
        note = "; ".join(filter(None, [f"the model with its input shapes fixed ({fixed_text})", note]))
    after_convert = pipeline_module.check(path, options=pipeline.for_backends([b.name for b in selected]),
                                          plugins=plugins).after_convert

    units = build_node_units(model.graph, frozenset().union(*(b.qdq_ops() for b in selected)) if selected else ())
    unit = units.get(target)
    unit_text = ""
    if unit is not None and len(unit.nodes) > 1:
        unit_text = f"QDQ unit around {op_label(unit.target)} {unit.name!r} ({len(unit.nodes)} nodes)"

    explanations = []
    fixed: dict = {}
    for backend in selected:
        current = _where(model, [backend], target, strict)
        rule = _rule(model, backend, target)
        alternatives, tried = _option_alternatives(model, backend, target, current, strict)
        unchanged = {"option values": tried - len(alternatives)}
        shape = _shape_alternative(path, model, target, backend, current, pipeline, strict, fixed)
        if shape is not None:
            alternatives.append(shape)
        converted = _convert_alternative(target, backend.name, after_convert.get(backend.name),
                                         current.runs_on is not None)
        if converted is not None:
            alternatives.append(converted)
        by_backend, same = _backend_alternatives(model, target, backend, [*selected, *others],
                                                 current.runs_on is not None, strict)
        alternatives.extend(by_backend)
        if current.runs_on is None:
            alternatives.extend(_const_alternatives(model, target))
        if same:
            unchanged["other backends"] = same
        why = current.why
        prefix = f"{backend.name}: "
        if current.runs_on is None and why.startswith(prefix):
            why = why[len(prefix):]
        explanations.append(BackendExplanation(backend.name, current.runs_on is not None, why,
                                               "yes" if rule else (rule.reason or "no"), current.partition,
                                               alternatives, unchanged))
    combined = None
    together = [group for _platform, group in platform_groups(selected) if len(group) > 1]
    if together:  # (the backends one app registers: the first platform's)
        where = _where(model, together[0], target, strict)
        order = " > ".join(b.name for b in together[0])
        combined = (f"runs on {where.runs_on} (priority {order})" if where.runs_on
                    else f"CPU (priority {order}): {where.why}")
    return ExplainReport(
        model=str(path), node=target.name or "", op=op_label(target),
        inputs=[(v.name or "", _type(v) + (" (constant)" if v.is_initializer() else "")) if v is not None
                else ("(omitted)", "") for v in target.inputs],
        outputs=[(v.name or "", _type(v)) for v in target.outputs],
        attrs=" ".join(f"{k}={_attr(a)}" for k, a in target.attributes.items()),
        unit=unit_text, backends=explanations, combined=combined, note=note)


def _attr(a: ir.Attr) -> str:
    from mobile_ep.reports.nodegraph import _attr_text

    return _attr_text(a)
