"""``check --against-ep``: a rule backend's prediction next to the real EP's own placement, node by node.

A backend whose rules model an ONNX Runtime plugin EP names it (:meth:`mobile_ep.Backend.real_ep`); with
mobile-ep-ort installed, the backend ``ort:<EP name>`` asks that EP which nodes it takes of the same prepared
graph (:mod:`mobile_ep.ep_libraries`).  :func:`compare` lists every node the two place differently, with the
rule's reason where the rules refuse what the EP takes, and the partitions of each.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from mobile_ep.errors import UsageError
from mobile_ep.reports.model import BackendReport

__all__ = ["Disagreement", "Comparison", "real_backends", "compare", "comparison_text", "against_eps"]


@dataclasses.dataclass
class Disagreement:
    node: str
    op: str
    #: ``"rules only"``: the rules claim it, the EP leaves it on the CPU; ``"EP only"``: the other way round.
    kind: str
    #: The rule's reason (EP only) or the EP's (rules only).
    reason: str


@dataclasses.dataclass
class Comparison:
    backend: str
    ep: str
    nodes: int
    partitions: tuple[int, int]
    disagreements: list[Disagreement]

    def as_dict(self) -> dict:
        return {"backend": self.backend, "ep": self.ep, "nodes": self.nodes,
                "partitions": {"rules": self.partitions[0], "ep": self.partitions[1]},
                "disagreements": [dataclasses.asdict(d) for d in self.disagreements]}


def real_backends(backends: Sequence[object], available: Sequence[str]) -> dict[str, tuple[str, dict[str, str]]]:
    """For each backend that names a real EP: the ``ort:<EP>`` backend to ask and its provider options."""
    found = {}
    for backend in backends:
        real = backend.real_ep()  # type: ignore[attr-defined]
        if real is None:
            continue
        name = f"ort:{real[0]}"
        if name not in available:
            raise UsageError(f"--against-ep: {backend.name} predicts {real[0]}, which needs the backend {name} "  # type: ignore[attr-defined]
                             "(install mobile-ep-ort: pip install ./plugins/ort)")
        found[backend.name] = (name, dict(real[1]))  # type: ignore[attr-defined]
    if not found:
        raise UsageError("--against-ep: none of the selected backends predicts an ONNX Runtime plugin EP "
                         "(qnn does, with onnxruntime-qnn)")
    return found


def compare(backend: str, ours: BackendReport, real: BackendReport) -> Comparison:
    """Where *ours* (the rules) and *real* (the EP's own placement, of the same graph) place nodes differently."""
    def claimed(report: BackendReport) -> set[str]:
        return {name for p in report.partitions for name in p.nodes}

    rules, ep = claimed(ours), claimed(real)
    ops = {n.node: n.op for r in (ours, real) for n in r.unsupported}  # (a node placed differently is on one)
    ours_why = {n.node: n.reason for n in ours.unsupported}
    real_why = {n.node: n.reason for n in real.unsupported}
    differ = [Disagreement(name, ops.get(name, ""), "rules only", real_why.get(name, "")) for name in sorted(rules - ep)]
    differ += [Disagreement(name, ops.get(name, ""), "EP only", ours_why.get(name, "")) for name in sorted(ep - rules)]
    return Comparison(backend, real.backend, ours.nodes, (len(ours.partitions), len(real.partitions)), differ)


def comparison_text(comparisons: Sequence[Comparison]) -> str:
    lines = []
    for c in comparisons:
        head = (f"{c.backend} against the real {c.ep.removeprefix('ort:')}: "
                f"{len(c.disagreements)} of {c.nodes} nodes placed differently; partitions {c.partitions[0]} "
                f"(rules) vs {c.partitions[1]} (EP)")
        lines.append(head)
        for d in c.disagreements:
            who = "the rules take it, the EP leaves it on the CPU" if d.kind == "rules only" else \
                "the EP takes it, the rules leave it on the CPU"
            lines.append(f"    {d.op + ' ' if d.op else ''}{d.node}: {who}" + (f" ({d.reason})" if d.reason else ""))
    return "\n".join(lines) + "\n"


def against_eps(path, options, plugins, check) -> list[Comparison]:
    """Each backend *options* select that predicts a plugin EP (:meth:`mobile_ep.Backend.real_ep`) against that
    EP's own placement of the same prepared graph (the ``ort:<EP>`` backend of mobile-ep-ort), node by node;
    *check*: :func:`mobile_ep.pipeline.check`."""

    names = [plugins.canonical_name(n) for n in options.backends] or \
        [n for n, b in plugins.backends().items() if b.selected_by_default]
    selected = [plugins.backend(name).configure(options.backend_options.get(name, {})) for name in names]
    pairs = real_backends(selected, list(plugins.backends()))
    asked = dataclasses.replace(options, backends=tuple(dict.fromkeys([*pairs, *(ort for ort, _ in pairs.values())])),
                                backend_options={**options.backend_options,
                                                 **{ort: {**provider, **options.backend_options.get(ort, {})}
                                                    for ort, provider in pairs.values()}})
    both = check(path, options=asked, plugins=plugins, after_convert=False)
    return [compare(name, both.backends[name], both.backends[ort]) for name, (ort, _) in pairs.items()]
