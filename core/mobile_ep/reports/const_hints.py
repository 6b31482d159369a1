"""``--const NAME=VALUE`` hints: a scalar input that only selects branches or feeds integer arithmetic.

A sample rate, a step count or a flag fed as a scalar input (silero VAD's ``sr``) keeps its arithmetic and the
``If`` it selects on the CPU: the backend refuses int64 math and control flow.  When the app always feeds the
same value, ``--const`` folds all of it away.  The value is the user's: the hint names the input and what it
selects, never a value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import onnx_ir as ir

__all__ = ["ConstCandidate", "const_candidates", "const_hints", "attach"]

_CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
_FLOATS = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE})


@dataclasses.dataclass(frozen=True)
class ConstCandidate:
    """A scalar input and the nodes its value reaches through integer (or bool) values."""

    input: str
    dtype: str
    #: The nodes reading the input or integer values made from it, in graph order.
    nodes: tuple[str, ...]
    #: The control-flow nodes among them (If, Loop, Scan): what the input selects.
    selects: tuple[str, ...]

    def hint(self, on_cpu: Sequence[str]) -> str:
        what = []
        if self.selects:
            what.append(f"selects the branch of {', '.join(self.selects)}")
        math = [n for n in on_cpu if n not in self.selects]
        if math:
            what.append(f"feeds {', '.join(math[:4])}{' ...' if len(math) > 4 else ''}")
        return (f"input {self.input} ({self.dtype} scalar) {' and '.join(what)}, left on the CPU: if your app "
                f"always feeds the same value, fix it with --const {self.input}=VALUE (your value) and that "
                f"arithmetic folds away")


def _scalar(value: ir.Value) -> bool:
    shape = value.shape
    return shape is not None and all(isinstance(d, int) and d == 1 for d in shape) and value.dtype is not None \
        and value.dtype not in _FLOATS


def const_candidates(model: ir.Model) -> list[ConstCandidate]:
    """The model's non-float scalar inputs and the nodes their value reaches as integer values."""
    order: dict[int, int] = {}
    found = []
    for value in model.graph.inputs:
        if value.is_initializer() or not _scalar(value):
            continue
        reached: dict[int, ir.Node] = {}
        pending = [value]
        while pending:
            current = pending.pop()
            for use in current.uses():
                node = use.node
                top = node
                while top.graph is not None and top.graph is not model.graph and top.graph.parent is not None:
                    top = top.graph.parent  # a read inside a subgraph: the node in the main graph decides
                if id(top) in reached:
                    continue
                reached[id(top)] = top
                if top.op_type in _CONTROL_FLOW:
                    continue
                pending.extend(v for v in top.outputs if v.dtype is not None and v.dtype not in _FLOATS)
        if not order:  # (the graph is numbered only for a model with a scalar input)
            order.update((id(node), i) for i, node in enumerate(model.graph))
        nodes = sorted(reached.values(), key=lambda n: order.get(id(n), 0))
        if nodes:
            found.append(ConstCandidate(value.name or "", value.dtype.name.lower() if value.dtype else "?",
                                        tuple(n.name or "" for n in nodes),
                                        tuple(n.name or "" for n in nodes if n.op_type in _CONTROL_FLOW)))
    return found


def const_hints(candidates: Sequence[ConstCandidate], left_on_cpu: Sequence[str]) -> list[str]:
    """The ``--const`` hint of each candidate some of whose nodes are among *left_on_cpu* (node names)."""
    on_cpu = set(left_on_cpu)
    return [c.hint([n for n in c.nodes if n in on_cpu]) for c in candidates if on_cpu.intersection(c.nodes)]


def attach(model: ir.Model, *reports: object) -> None:
    """Give each of *reports* (:class:`~mobile_ep.reports.model.BackendReport`, None skipped) the ``--const``
    hints for the nodes it leaves on the CPU, in ``const_fix`` and among its ``suggestions``."""
    candidates = const_candidates(model)
    if not candidates:
        return
    for report in reports:
        if report is None:
            continue
        hints = const_hints(candidates, [u.node for u in report.unsupported])  # type: ignore[attr-defined]
        report.const_fix = hints  # type: ignore[attr-defined]
        report.suggestions = [*report.suggestions, *(h for h in hints if h not in report.suggestions)]  # type: ignore[attr-defined]
