"""Option changes that improve a backend's verdict, for ``check``'s suggestions.

``explain`` answers for one node which option changes would move it; a user who sees "10/148 nodes in 10
partitions, verdict NO" also needs to know that ``-O coreml.fold_qdq=true`` takes every node in one partition.
For a backend whose verdict is not YES after ``convert``, each single option change ``explain`` would try (the other value of a
boolean, of a choice, the ends of an integer range) is computed as it would happen:

- a change that moves rule answers: the backend so configured partitions the model as it is (rules only);
- a change of the rewrites ``convert`` applies (``fold_qdq``): the model as ``convert`` would write it is
  partitioned again, as ``check``'s after-convert view is (a few at most: each writes and loads a model).

A change is suggested when its verdict is better, or the same with fewer partitions and no fewer nodes, and
said with its numbers: ``-O coreml.fold_qdq=true: 190/190 nodes in 1 partition, verdict YES after convert``.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from collections.abc import Callable, Mapping
from typing import Literal

import onnx_ir as ir

from mobile_ep.contract import Backend
from mobile_ep.contract.plugins import guarded
from mobile_ep.errors import MobileEpError
from mobile_ep.partitioning.propose import graph_index
from mobile_ep.passes.partition import PartitionPass
from mobile_ep.reports.model import BackendReport

__all__ = ["better_options", "option_values", "with_options", "option_text", "MAX_CONVERTS", "INT_SPAN"]

#: Option changes of the rewrites evaluated through a written model, at most, per backend.
MAX_CONVERTS = 3
_RANK = {"YES": 2, "MAYBE": 1, "NO": 0}


#: Integer options are tried this far on either side of their value (invalid values are skipped); check tries
#: the two ends.
INT_SPAN = 12


def option_values(backend: Backend) -> list[tuple[str, list[str]]]:
    """Every option with the other values worth trying, as strings for ``Backend.configure``."""
    options = backend.options
    if not dataclasses.is_dataclass(options):
        return []
    hints = typing.get_type_hints(type(options))
    result = []
    for field in dataclasses.fields(options):
        current = getattr(options, field.name)
        hint = hints.get(field.name)
        values: list[str] = []
        if hint is bool:
            values = [str(not current).lower()]
        elif typing.get_origin(hint) is Literal:
            values = [str(c) for c in typing.get_args(hint) if c != current]
        elif isinstance(hint, type) and issubclass(hint, enum.Enum):
            values = [str(m.value) for m in hint if m != current]
        elif hint is int and isinstance(current, int):
            values = [str(v) for v in range(current - INT_SPAN, current + INT_SPAN + 1) if v != current]
        elif typing.get_origin(hint) in (tuple, frozenset, list) and current:
            values = [""]
        if values:
            result.append((field.name, values))
    return result


def with_options(backend: Backend, changes: Mapping[str, str]) -> Backend | None:
    try:
        return backend.configure(dict(changes))
    except (MobileEpError, ValueError, TypeError):
        return None  # not a valid value for this backend (e.g. an API level it does not know)


def option_text(backend: str, changes: Mapping[str, str]) -> str:
    return " ".join(f"-O {backend}.{k}={v}" for k, v in changes.items())



@dataclasses.dataclass(frozen=True)
class _Outcome:
    """What a suggestion is ranked and said by: a backend report's verdict, number of partitions and nodes
    (for an option change partitioning the model as it is, read off its proposal: no report is built)."""

    verdict: str
    partitions: int
    supported_nodes: int
    nodes: int

    @classmethod
    def of(cls, report: BackendReport) -> _Outcome:
        return cls(report.verdict, len(report.partitions), report.supported_nodes, report.nodes)


def _score(outcome: _Outcome) -> tuple[int, int, int]:
    return _RANK.get(outcome.verdict.split()[0], 0), -outcome.partitions, outcome.supported_nodes


def _better(new: _Outcome, old: _Outcome) -> bool:
    (verdict, partitions, nodes), (old_verdict, old_partitions, old_nodes) = _score(new), _score(old)
    return verdict > old_verdict or (verdict == old_verdict and partitions > old_partitions and nodes >= old_nodes)


def _text(change: str, outcome: _Outcome, where: str) -> str:
    parts = outcome.partitions
    return (f"{change}: {outcome.supported_nodes}/{outcome.nodes} nodes in {parts} partition{'s' * (parts != 1)}, "
            f"verdict {outcome.verdict.split()[0]} {where} (computed)")


def _rewrite_names(backend: Backend) -> tuple[str, ...]:
    return tuple(type(r).__name__ for r in backend.rewrites())


def better_options(model: ir.Model, backend: Backend, before: BackendReport, after: BackendReport | None,
                   after_convert: Callable[[Backend], BackendReport] | None, *, strict: bool = False) -> list[str]:
    """The single option changes of *backend* that improve *before* (the model as is) or *after* (after
    convert; *after_convert* computes it for a configured backend), best first, as suggestion lines."""
    if (after or before).verdict.startswith("YES"):  # (convert already gets there: nothing to suggest)
        return []
    found: list[tuple[tuple[int, int, int], str]] = []
    converts, index = 0, None
    rewrites = _rewrite_names(backend)
    for key, values in option_values(backend):
        if values and all(v.lstrip("-").isdigit() for v in values):
            values = [values[0], values[-1]]  # (the ends of the range explain tries)
        for value in values:
            variant = with_options(backend, {key: value})
            if variant is None:
                continue
            change = option_text(backend.name, {key: value})
            if after is not None and after_convert is not None and _rewrite_names(variant) != rewrites:
                if converts >= MAX_CONVERTS or after.verdict.startswith("YES"):
                    continue
                converts += 1
                try:
                    outcome = _Outcome.of(after_convert(guarded(variant, strict=strict)))
                except Exception:  # (a variant convert cannot write says nothing about the current one)
                    continue
                if _better(outcome, _Outcome.of(after)):
                    found.append((_score(outcome), _text(change, outcome, "after convert")))
                continue
            if before.verdict.startswith("YES"):
                continue
            index = graph_index(model) if index is None else index  # (one for every variant: the model is not changed)
            partition = PartitionPass(guarded(variant, strict=strict), index=index)
            partition(model)
            proposal = partition.proposal
            assert proposal is not None  # (what its report would say: backend_report copies these four)
            outcome = _Outcome(proposal.verdict, len(proposal.partitions), proposal.supported_nodes,
                               proposal.total_nodes)
            if _better(outcome, _Outcome.of(before)):
                found.append((_score(outcome), _text(change, outcome, "as is")))
    found.sort(key=lambda item: item[0], reverse=True)
    return [text for _, text in found[:3]]
