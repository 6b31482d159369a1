"""Verify: run the original and every written model on this machine, on the same inputs, and compare.

The ``.onnx`` and ``.ort`` run in onnxruntime; a compiled-partition model runs its CPU part in onnxruntime
and each partition through its backend's emulator (:mod:`mobile_ep.runtime`).  Outputs must agree within
the tolerances :mod:`mobile_ep.runtime` documents (wider where a compiled payload declares it).
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from typing import Any

import onnx_ir as ir

from mobile_ep import runtime
from mobile_ep.contract import Backend
from mobile_ep.errors import VerificationError
from mobile_ep.options import Options

__all__ = ["verify", "reference_of", "raise_on_mismatch"]


def _named_shapes(options: Options, model: ir.Model) -> dict[str, Sequence[int]]:
    """``--shape`` values by input name (the unnamed one given to the model's only input)."""
    shapes = dict(options.shapes)
    if None in shapes:
        inputs = [v.name for v in model.graph.inputs if not v.is_initializer()]
        shapes[inputs[0] if inputs else ""] = shapes.pop(None)
    return shapes  # type: ignore[return-value]


def reference_of(backend: Backend, applied: Sequence[dict]) -> tuple[str | None, str]:
    """The optimization level the original is run at to verify a model *backend*'s rewrites changed
    (*applied*: the report's rewrite entries), and why: that of the first applied rewrite that names one
    (:attr:`mobile_ep.Rewrite.reference_level`), else onnxruntime's default (None)."""
    names = {entry.get("rewrite") for entry in applied}
    for rewrite in backend.rewrites():
        level = getattr(rewrite, "reference_level", None)
        if level is not None and getattr(rewrite, "name", None) in names:
            return level, getattr(rewrite, "reference_why", "")
    return None, ""


def verify(source: pathlib.Path, candidates: Sequence[pathlib.Path], backend: Backend, options: Options,
           model: ir.Model, seed: int = 0, *, proto: Any = None,
           applied: Sequence[dict] = ()) -> list[runtime.Verification]:
    """Each candidate against *source* on the same generated inputs (shaped as *options* fix them; *model*:
    the source as loaded, for the name of its only input; *proto*: the file as validated, if at hand;
    *applied*: the rewrites convert applied, which may ask for another run of the source, :func:`reference_of`)."""
    level, why = reference_of(backend, applied)
    return runtime.verify(source, candidates, backends={backend.name: backend}, seed=seed, dims=options.dims,
                          shapes=_named_shapes(options, model), proto=proto, reference_level=level,
                          reference_why=why)


def raise_on_mismatch(verification: Sequence[runtime.Verification], report_path: pathlib.Path | str) -> None:
    """A :class:`VerificationError` naming the worst output of the first candidate that differs."""
    failed = [v for v in verification if not v.ok]
    if failed:
        worst = max((o for v in failed for o in v.outputs if not o.ok), key=lambda o: o.max_abs)
        raise VerificationError(
            f"{failed[0].candidate} differs from the original: output {worst.name!r} max abs error "
            f"{worst.max_abs:.3g}{' (' + worst.note + ')' if worst.note else ''}; see {report_path}"
        )


