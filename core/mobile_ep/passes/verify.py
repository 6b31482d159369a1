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

__all__ = ["verify", "raise_on_mismatch"]


def _named_shapes(options: Options, model: ir.Model) -> dict[str, Sequence[int]]:
    """``--shape`` values by input name (the unnamed one given to the model's only input)."""
    shapes = dict(options.shapes)
    if None in shapes:
        inputs = [v.name for v in model.graph.inputs if not v.is_initializer()]
        shapes[inputs[0] if inputs else ""] = shapes.pop(None)
    return shapes  # type: ignore[return-value]


def verify(source: pathlib.Path, candidates: Sequence[pathlib.Path], backend: Backend, options: Options,
           model: ir.Model, seed: int = 0, *, proto: Any = None) -> list[runtime.Verification]:
    """Each candidate against *source* on the same generated inputs (shaped as *options* fix them; *model*:
    the source as loaded, for the name of its only input; *proto*: the file as validated, if at hand)."""
    return runtime.verify(source, candidates, backends={backend.name: backend}, seed=seed, dims=options.dims,
                          shapes=_named_shapes(options, model), proto=proto)


def raise_on_mismatch(verification: Sequence[runtime.Verification], report_path: pathlib.Path | str) -> None:
    """A :class:`VerificationError` naming the worst output of the first candidate that differs."""
    failed = [v for v in verification if not v.ok]
    if failed:
        worst = max((o for v in failed for o in v.outputs if not o.ok), key=lambda o: o.max_abs)
        raise VerificationError(
            f"{failed[0].candidate} differs from the original: output {worst.name!r} max abs error "
            f"{worst.max_abs:.3g}{' (' + worst.note + ')' if worst.note else ''}; see {report_path}"
        )


