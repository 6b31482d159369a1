"""Load: validate the user's file, then read the model as an onnxruntime session sees it.

Every ORT session applies the basic-level optimizations before an execution provider is asked for its
nodes, so that graph — not the file's — is what the backends judge: :func:`as_ort_sees_it` validates the
file (one-line errors naming it), fixes input shapes when asked (:mod:`mobile_ep.passes.fix_shapes`) and
runs onnxruntime's basic level (:mod:`mobile_ep.passes.fold_constants`); ``com.microsoft`` Q/DQ nodes are read as
the standard ops they equal (:mod:`mobile_ep.passes.contrib_qdq`).  The user's file is never changed.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import onnx_ir as ir

from mobile_ep import model_io
from mobile_ep.errors import ModelError
from mobile_ep.options import Options
from mobile_ep.passes import const_inputs, contrib_qdq, fold_constants
from mobile_ep.passes.fix_shapes import FixShapesPass
from mobile_ep.passes.function_ops import Whole

if TYPE_CHECKING:
    from onnx import ModelProto

    from mobile_ep.contract import Backend

__all__ = ["validate", "View", "view", "needs_own_view", "as_ort_sees_it", "load_for_analysis", "KEPT_WHOLE",
           "REFUSED_WHOLE"]

#: The key of a loaded model's ``meta`` that lists the function nodes kept whole for the backends (their
#: first outputs' names).
KEPT_WHOLE = "mobile_ep.kept_whole"
#: ... and the one that holds those the backends refused whole with a rule's reason
#: (:attr:`mobile_ep.passes.function_ops.Whole.refused`), judged as their bodies.
REFUSED_WHOLE = "mobile_ep.refused_whole"


def validate(path: str | os.PathLike) -> ModelProto:
    """Refuse a file that is not a model onnxruntime could load, in one line naming it (a ``ModelError``);
    the file as read (weights left in their files), for :func:`as_ort_sees_it`."""
    return model_io.validate(path)


@dataclasses.dataclass
class View:
    """The model as an onnxruntime session sees it (:func:`view`): the IR model, the input-shape changes made
    (input name -> [old, new]) and what was decided about its function nodes (kept whole for a backend, or
    refused whole with a rule's reason: :class:`mobile_ep.passes.function_ops.Whole`)."""

    model: ir.Model
    changes: dict[str, list[str]]
    whole: Whole
    #: Whether a session of the model written as it is sees the same graph: onnxruntime's basic level folded no
    #: constant the file lacks that shape inference may read (an integer tensor or a few numbers: a shape, axes,
    #: scales).  Such a constant is known to the shape inference of a session that loads the result, which may
    #: then remove more (a Reshape to the shape its input has); folded weights are not.
    settled: bool = False


def view(path: str | os.PathLike, work: str | os.PathLike, options: Options | None = None,
         proto: ModelProto | None = None, backends: Sequence[Backend] = ()) -> View:
    """The model at *path*, with its input shapes fixed as *options* ask, after onnxruntime's basic-level
    optimizations.  *proto*: the file as :func:`validate` read it (else it is read again).  *backends*: the EPs
    of the session, in priority order: the ONNX function nodes one of them takes are kept whole
    (:mod:`mobile_ep.passes.function_ops`).

    Files are written into *work*, which must outlive the model (large weights stay memory-mapped there).
    """
    source = pathlib.Path(path)
    work = pathlib.Path(work)
    work.mkdir(parents=True, exist_ok=True)
    if options is not None and options.fixes_shapes:
        fix = FixShapesPass(options.shapes, options.dims)
        try:
            result = fix(model_io.load(source, check=False))
        except ModelError as exc:
            raise ModelError(f"{source}: fixing input shapes ({_asked(options)}): {exc}"
                             f"{const_inputs.branch_hint(model_io.load(source, check=False).graph)}") from None
        changes = {name: list(change) for name, change in fix.changes.items()}
        if result.modified:
            fixed = model_io.save(result.model, work / "fixed.onnx", external_data="fixed.onnx.data")
            try:  # the fixed model is what onnxruntime loads: a model it refuses is never passed on
                optimized, whole = fold_constants.ort_optimized_keeping(fixed, work, inspected=True,  # (our own file)
                                                                        backends=backends)
            except ModelError as exc:
                message = str(exc).replace(f"{fixed}: ", "", 1).replace(str(fixed), "the fixed model")
                raise ModelError(f"{source}: fixing input shapes ({_asked(options)}): {message} (the model itself, "
                                 f"with only these dims fixed){const_inputs.branch_hint(result.model.graph)}") from None
            # (the optimized model references the weights of the fixed model that onnxruntime left as they were)
            return _view(optimized, changes, whole, proto)
    else:
        changes = {}
    optimized, whole = fold_constants.ort_optimized_keeping(source, work, proto=proto, backends=backends)
    return _view(optimized, changes, whole, proto)


def _view(optimized: pathlib.Path, changes: dict[str, list[str]], whole: Whole, proto: ModelProto | None) -> View:
    """The view of the optimized file: its IR, its ``com.microsoft`` Q/DQ nodes read as the standard ops they
    equal (:mod:`mobile_ep.passes.contrib_qdq`; a model so changed is not the file onnxruntime wrote: not settled)."""
    model = fold_constants.load_optimized(optimized)
    if contrib_qdq.standardize(model):
        return View(model, changes, whole)
    return View(model, changes, whole, _settled(model, proto))


#: A folded constant of at most this many numbers may be a shape-like operand (scales, a pad, ...).
_FEW = 16


def _settled(model: ir.Model, proto: ModelProto | None) -> bool:
    """Whether every initializer of *model* (a basic-level view) that shape inference may read is a constant of
    *proto* (the file it was made from: an initializer, or a ``Constant`` node's output); False when the file
    is not at hand."""
    if proto is None:
        return False
    own = set()
    for graph in model_io.graphs(proto.graph):
        own.update(t.name for t in graph.initializer)
        own.update(o for n in graph.node if n.op_type == "Constant" and n.domain in ("", "ai.onnx") for o in n.output)
    return not any(name not in own and (t := value.const_value) is not None and (t.dtype.is_integer() or t.size <= _FEW)
                   for graph in model.graphs() for name, value in graph.initializers.items())


def as_ort_sees_it(path: str | os.PathLike, work: str | os.PathLike, options: Options | None = None,
                   proto: ModelProto | None = None, backends: Sequence[Backend] = ()
                   ) -> tuple[ir.Model, dict[str, list[str]]]:
    """:func:`view`'s model and shape changes; the model's ``meta[KEPT_WHOLE]`` lists the function nodes kept
    whole (by first output), ``meta[REFUSED_WHOLE]`` those refused whole by a rule, with its reason."""
    seen = view(path, work, options, proto, backends)
    seen.model.meta[KEPT_WHOLE] = seen.whole.kept
    seen.model.meta[REFUSED_WHOLE] = seen.whole.refused
    return seen.model, seen.changes


def needs_own_view(seen: View, backends: Sequence[Backend], rejected: Collection[ir.Node] | None) -> bool:
    """Whether a backend's own session (the backend alone) sees another model than *seen*, loaded for all
    *backends*: when *seen* keeps whole a function node for another backend (one of *rejected*, the nodes the
    backend does not take, when known), which alone its session would have inlined."""
    kept = set(seen.whole.kept)
    return len(backends) > 1 and bool(kept) and (
        rejected is None or any(n.outputs and n.outputs[0].name in kept for n in rejected))


def _asked(options: Options) -> str:
    shapes = [f"--shape {name + '=' if name else ''}{','.join(map(str, dims))}" for name, dims in options.shapes.items()]
    return " ".join(shapes + [f"--dim {name}={value}" for name, value in options.dims.items()])


def load_for_analysis(path: str | os.PathLike, work: str | os.PathLike, options: Options | None = None,
                      backends: Sequence[Backend] = ()) -> ir.Model:
    """Validate *path*, then :func:`as_ort_sees_it` (the shape changes dropped)."""
    validate(path)
    return model_io.inline_small_weights(as_ort_sees_it(path, work, options, backends=backends)[0])  # (weights < 1 MB outlive *work*)

