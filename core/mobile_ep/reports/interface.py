"""What changed in the model's interface: the inputs and outputs the app feeds and reads.

``convert`` can remove inputs (``--const``), fix their shapes (``--shape``/``--dim``) or change a dtype; an
app written for the original model then fails ("Invalid input name: sr").  :func:`interface_changes`
compares the original model's graph inputs and outputs with the written model's, and every report (the
terminal, ``report.json``'s ``interface_changes``, the HTML) lists them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence

import onnx_ir as ir

from mobile_ep import model_io as mir

__all__ = ["InterfaceChange", "Signature", "interface_changes", "signature", "describe", "app_interface"]


@dataclasses.dataclass(frozen=True)
class Signature:
    """One graph input or output as the app sees it: its name, element type and dims (an int, or a dim
    parameter's name, or ``?``)."""

    name: str
    dtype: str
    dims: tuple[int | str, ...] | None

    def text(self) -> str:
        dims = "?" if self.dims is None else "[" + ",".join(map(str, self.dims)) + "]"
        return f"{self.name} {self.dtype} {dims}"


@dataclasses.dataclass(frozen=True)
class InterfaceChange:
    #: ``"input"`` or ``"output"``.
    kind: str
    name: str
    #: ``"removed"``, ``"added"``, ``"shape"`` or ``"dtype"``.
    change: str
    before: str
    after: str
    #: What the app does about it.
    note: str

    def text(self) -> str:
        if self.change == "removed":
            return f"{self.kind} {self.name} removed ({self.before}): {self.note}"
        if self.change == "added":
            return f"{self.kind} {self.name} added ({self.after}): {self.note}"
        return f"{self.kind} {self.name}: {self.before} -> {self.after}: {self.note}"

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _dims(value: ir.Value) -> tuple[int | str, ...] | None:
    if value.shape is None:
        return None
    return tuple(d if isinstance(d, int) else (d.value or "?") for d in value.shape)


def _dtype(value: ir.Value) -> str:
    if value.dtype is None:
        return str(value.type) if value.type is not None else "?"
    try:
        return value.dtype.numpy().name
    except (TypeError, ValueError, AttributeError):
        return value.dtype.name.lower()


def _signature(value: ir.Value) -> Signature:
    return Signature(value.name or "", _dtype(value), _dims(value))


def signature(model: ir.Model | tuple[list[Signature], list[Signature]]) -> tuple[list[Signature], list[Signature]]:
    """The graph inputs (initializers aside) and outputs of *model* (returned as they are when already read)."""
    if isinstance(model, tuple):
        return model
    graph = model.graph
    return [_signature(v) for v in graph.inputs if not v.is_initializer()], [_signature(v) for v in graph.outputs]


def _load(model: object) -> ir.Model | tuple[list[Signature], list[Signature]]:
    """*model* as signature() reads it: a model, a path, or a ModelProto as the pipeline read it (of which only
    the graph's inputs and outputs are read: its nodes may hold what onnx_ir cannot read, e.g. a Constant's
    sparse value, which onnxruntime folds)."""
    if isinstance(model, ir.Model):
        return model
    if isinstance(model, (str, os.PathLike)):
        return mir.load(model, shapes=False, check=False)
    graph = model.graph  # type: ignore[attr-defined]
    weights = {t.name for t in graph.initializer}

    def read(value) -> Signature:
        try:
            return _signature(ir.serde.deserialize_value_info_proto(value, None))
        except Exception:  # (a type onnx_ir does not read, e.g. ZipMap's sequence of maps)
            return Signature(value.name, "?", None)

    return [read(v) for v in graph.input if v.name not in weights], [read(v) for v in graph.output]


def interface_changes(original: object, written: object,
                      consts: Mapping[str, Sequence[float]] | None = None) -> list[InterfaceChange]:
    """Every difference between *original*'s inputs and outputs and *written*'s (models or paths; weights are
    not read), in the original's order; *consts*: the ``--const`` values, named in the notes."""
    consts = consts or {}
    changes: list[InterfaceChange] = []
    for kind, old, new in zip(("input", "output"), *(signature(_load(m)) for m in (original, written)), strict=True):
        now = {s.name: s for s in new}
        for s in old:
            after = now.pop(s.name, None)
            if after is None:
                if kind == "input" and s.name in consts:
                    value = ",".join(f"{v:g}" for v in consts[s.name])
                    note = f"fixed by --const {s.name}={value}: the app no longer feeds it"
                else:
                    note = "the written model has no such " + kind
                changes.append(InterfaceChange(kind, s.name, "removed", s.text()[len(s.name) + 1:], "", note))
                continue
            if after.dtype != s.dtype:
                changes.append(InterfaceChange(kind, s.name, "dtype", s.dtype, after.dtype,
                                               f"the app {'feeds' if kind == 'input' else 'reads'} {after.dtype}"))
            if after.dims != s.dims:
                old_dims, new_dims = (x.text()[len(x.name) + len(x.dtype) + 2:] for x in (s, after))
                fixed = after.dims is not None and all(isinstance(d, int) for d in after.dims)
                note = ("the app feeds exactly this shape" if kind == "input" else "the app reads this shape") \
                    if fixed else "dims changed"
                changes.append(InterfaceChange(kind, s.name, "shape", old_dims, new_dims, note))
        for s in now.values():
            changes.append(InterfaceChange(kind, s.name, "added", "", s.text()[len(s.name) + 1:],
                                           "the app feeds it" if kind == "input" else "the app may read it"))
    return changes


def describe(model: object) -> str:
    """The written model's inputs, as the app feeds them: ``input float32 [1,512], state float32 [2,1,128]``."""
    inputs, _ = signature(_load(model))
    return ", ".join(s.text() for s in inputs)


def app_interface(original: object, written: object, consts: Mapping[str, Sequence[float]] | None = None
                  ) -> tuple[list[InterfaceChange], str]:
    """:func:`interface_changes` and :func:`describe` of the written model, read once."""
    model = _load(written)
    return interface_changes(original, model, consts), describe(model)
