"""Fold constants: the model as an onnxruntime session sees it after its basic-level optimizations.

Every ORT session applies the basic level (constant folding, redundant-node elimination, ...) before an
execution provider is asked for its nodes, so that graph is what the backends judge.  onnxruntime itself
does the work: a session that is built only to write the optimized model, never run.

That CPU-only session also wraps each CPU kernel that has no float16 version in Casts to float32
(``InsertedPrecisionFreeCast_...``), after partitioning: an EP is never offered those Casts, it sees the
float16 node.  The written model has them taken out again where that gives back the float16 node exactly, and
a Cast of the model to float32 that onnxruntime merged with one of them is put back.

Given the backends of the session being modelled, the ONNX function nodes one of them takes are kept whole
instead of inlined (:mod:`mobile_ep.passes.function_ops`).
"""

from __future__ import annotations

import functools
import os
import pathlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import onnx
import onnx_ir as ir

from mobile_ep import model_io, sessions
from mobile_ep.errors import ModelError
from mobile_ep.export.ort_format import model_bytes, ort_model_source
from mobile_ep.passes import function_ops

if TYPE_CHECKING:
    from mobile_ep.contract import Backend

__all__ = ["ort_optimized", "ort_optimized_keeping", "load_optimized", "OPTIMIZED_DATA", "OPTIMIZED_EXTERNAL_MIN_BYTES", "INSERTED_CAST_PREFIX"]

#: Initializers of at least this size go to the optimized model's external data file: the ``.onnx`` stays
#: small (parsed in a few ms), the weights are memory-mapped when, and only when, something reads them.
#: Smaller tensors (shapes, axes, scales: what capability rules read) stay inline.
OPTIMIZED_EXTERNAL_MIN_BYTES = 1024
#: The name of that external data file, beside ``optimized.onnx``.
OPTIMIZED_DATA = "optimized.onnx.data"
#: How onnxruntime names the Casts it inserts around a CPU kernel without float16 (node and value:
#: ``InsertedPrecisionFreeCast_x`` is ``x`` in float32).
INSERTED_CAST_PREFIX = "InsertedPrecisionFreeCast_"


def ort_optimized(path: str | os.PathLike, out_dir: str | os.PathLike, *, level: str = "basic",
                  inspected: bool = False, proto: onnx.ModelProto | None = None,
                  backends: Sequence[Backend] = (), at: pathlib.Path | None = None) -> pathlib.Path:
    """The written file of :func:`ort_optimized_keeping`."""
    return ort_optimized_keeping(path, out_dir, level=level, inspected=inspected, proto=proto, backends=backends,
                                 at=at)[0]


def ort_optimized_keeping(path: str | os.PathLike, out_dir: str | os.PathLike, *, level: str = "basic",
                          inspected: bool = False, proto: onnx.ModelProto | None = None,
                          backends: Sequence[Backend] = (), at: pathlib.Path | None = None
                          ) -> tuple[pathlib.Path, function_ops.Whole]:
    """Write ``optimized.onnx`` into *out_dir* (or the file *at*): the model at *path* after onnxruntime's
    optimizations at *level* (basic by default), its initializers of :data:`OPTIMIZED_EXTERNAL_MIN_BYTES` and
    more in :data:`OPTIMIZED_DATA` beside it (for *at*, its name and ``.data``).  Written beside *path*, the
    weights of *path*'s files that onnxruntime leaves as they are are referenced, not written again
    (:func:`mobile_ep.sessions.optimize_into`).

    The file is read with :func:`mobile_ep.model_io.read_proto` (external data confined to its folder)
    before onnxruntime opens it, unless *inspected* says the caller has just done so (or wrote it) or hands
    that reading over as *proto*.  A model of a newer IR version than onnxruntime reads is given to it from
    memory with the IR version lowered.

    *backends*: the EPs of the session being modelled, in priority order; the function nodes one of them takes
    whole are not inlined (:mod:`mobile_ep.passes.function_ops`).  Returns the written file and what was kept
    whole (:class:`mobile_ep.passes.function_ops.Whole`).
    """
    if not inspected and proto is None:
        proto = model_io.read_proto(path)
    out_dir = pathlib.Path(out_dir)
    so, out = _session_options(out_dir, level, at)
    read = functools.cache(lambda: proto if proto is not None else onnx.load(str(path), load_external_data=False))
    source = str(path) if proto is None else ort_model_source(path, so, proto)
    try:
        try:
            out = _optimize(source, so, out, level, read, pathlib.Path(path).parent, pathlib.Path(path))
        except Exception:
            if proto is not None:
                raise
            source = ort_model_source(path, so)  # (read only when onnxruntime refuses the file: its IR version?)
            if isinstance(source, str):
                raise
            out = _optimize(source, so, out, level, read, pathlib.Path(path).parent, pathlib.Path(path))
    except Exception as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{path}: onnxruntime cannot load the model: {message}") from None
    if not backends:
        return out, function_ops.Whole()
    return function_ops.keep_claimed(pathlib.Path(path), read(), out, out_dir, backends,
                                     lambda model, folder, where: _optimized_proto(model, folder, where, level))


#: What the guard of :func:`mobile_ep.model_io.read_proto` normalizes, as it appears in a file: the domain
#: ``ai.onnx`` spelled out, a dim of -1 (``dim_value``: field 1, varint).
_NORMALIZED = (b"ai.onnx", b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")


def load_optimized(path: str | os.PathLike) -> ir.Model:
    """The IR of a file :func:`ort_optimized` wrote (the model of a file already read and guarded, as
    onnxruntime optimized it): read without the guard again, unless it holds a spelling the guard normalizes
    (then as :func:`mobile_ep.model_io.load` reads any file)."""
    path = pathlib.Path(path)
    data = path.read_bytes()  # (the graph: weights of 1 KB and more are in the data file)
    if any(spelling in data for spelling in _NORMALIZED):
        return model_io.load(path, check=False)
    return model_io.from_proto(onnx.ModelProto.FromString(data), base_dir=path.parent, label=str(path))


def _session_options(out_dir: pathlib.Path, level: str, at: pathlib.Path | None = None):
    """Options of a session that writes the model optimized at *level* to ``optimized.onnx`` in *out_dir* (or to
    *at*)."""
    out = pathlib.Path(at) if at is not None else out_dir / "optimized.onnx"
    so = sessions.options(level=level, log=4, write=out, lean=True, config={  # (errors come back as exceptions)
        "session.optimized_model_external_initializers_file_name": OPTIMIZED_DATA if at is None else out.name + ".data",
        "session.optimized_model_external_initializers_min_size_in_bytes": str(OPTIMIZED_EXTERNAL_MIN_BYTES)})
    return so, out


def _optimize(source: str | bytes, so, out: pathlib.Path, level: str, original: Callable[[], onnx.ModelProto],
              folder: pathlib.Path, runs: pathlib.Path | None = None) -> pathlib.Path:
    """*source* (external data in *folder*) optimized at *level* into *out*, its float16 nodes unwrapped; the
    file holding it (*out*, or the one made earlier in the command: :func:`mobile_ep.sessions.write_optimized`).
    *runs*: the file *source* is, as it is (its session may then run it)."""
    return sessions.write_optimized(source, so, out, key=("optimized", level), folder=folder,
                                    finish=lambda: _without_inserted_casts(out, original),
                                    runs=None if runs is None else (runs, level))


def _optimized_proto(model: onnx.ModelProto, folder: pathlib.Path, out_dir: pathlib.Path, level: str) -> pathlib.Path:
    """Optimize *model*, its external data in *folder* (its IR version lowered if onnxruntime reads only older
    ones); returns the written file, its float16 nodes unwrapped."""
    so, out = _session_options(out_dir, level)
    return _optimize(model_bytes(model, folder, so), so, out, level, lambda: model, folder)


def _without_inserted_casts(path: pathlib.Path, original: Callable[[], onnx.ModelProto]) -> None:
    """Rewrite the model at *path* with the float16 nodes onnxruntime wrapped in inserted Casts given back (main
    graph only), where that is exact; *original* gives the model onnxruntime read (its Casts' names)."""
    if INSERTED_CAST_PREFIX.encode() not in path.read_bytes():  # (the weights are in the data file: a small read)
        return
    proto = onnx.load(str(path), load_external_data=False)
    if any(node.name.startswith(INSERTED_CAST_PREFIX) for node in proto.graph.node) and _unwrap_float16(proto,
                                                                                                      original):
        with model_io.atomic_path(path) as tmp:  # (replaced, not rewritten: the file may be linked elsewhere)
            onnx.save(proto, str(tmp))


def _float32_values(proto: onnx.ModelProto) -> set[str] | None:
    """The values of the main graph ONNX's shape inference types float32 (weights' data not read); ``None``
    when inference fails."""
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, check_type=False, strict_mode=False)
    except Exception:
        return None
    graph = inferred.graph
    found = {t.name for t in graph.initializer if t.data_type == onnx.TensorProto.FLOAT}
    for info in [*graph.input, *graph.value_info, *graph.output]:
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            found.add(info.name)
    return found


def _model_casts(original: onnx.ModelProto) -> dict[str, tuple[str, str]]:
    """The main graph's Casts to float32, by the value they read: (node name, output)."""
    return {node.input[0]: (node.name, node.output[0]) for node in original.graph.node
            if node.op_type == "Cast" and node.domain in ("", "ai.onnx") and len(node.input) == 1
            and any(a.name == "to" and a.i == onnx.TensorProto.FLOAT for a in node.attribute)}


def _unwrap_float16(proto: onnx.ModelProto, original: Callable[[], onnx.ModelProto]) -> bool:
    """Give back the float16 nodes onnxruntime wrapped: a value ``InsertedPrecisionFreeCast_x`` is the float32
    copy of the float16 value ``x``.  A node is unwrapped when every float32 value it reads or writes is such a
    copy (or it is a Cast of the model reading one: onnxruntime merges its inserted Cast into it), and a copy
    is renamed back to ``x`` (its inserted Cast taken out) when every node writing it and every node reading it
    as float16 is unwrapped.  A node that is not wrapped and reads a copy reads the output of a Cast of the model
    to float32 that onnxruntime merged with its own: that Cast is put back (:func:`_restored_casts`)."""
    graph = proto.graph
    nodes = list(graph.node)  # (by index: protobuf gives a new Python object for each access)
    prefix = INSERTED_CAST_PREFIX

    def inserted(node: onnx.NodeProto) -> bool:
        return (node.op_type == "Cast" and node.domain in ("", "ai.onnx") and node.name.startswith(prefix)
                and len(node.input) == 1 and len(node.output) == 1)

    float32 = _float32_values(proto)
    if float32 is None:  # (without the types no node is known to be wrapped whole)
        return False
    names = {v for node in nodes for v in [*node.input, *node.output]} | {v.name for v in graph.input}
    inner = {v for node in nodes for sub in model_io.subgraphs(node) for g in model_io.graphs(sub)
             for n in g.node for v in n.input}
    casts = {i for i, node in enumerate(nodes) if inserted(node)}
    # an inserted Cast reading another value than the float16 one it copies is a Cast of the model (to float16)
    # onnxruntime merged into it (uint8 -> float16 -> float32 as one Cast): that Cast is given back
    model_casts = _merged_model_casts([nodes[i] for i in casts], original)
    # a copy whose float16 name is taken by a value no inserted Cast links it to stays
    linked = {v for i in casts for v in (*nodes[i].input, *nodes[i].output)}
    copies = {v for v in names if v.startswith(prefix) and v not in inner and v not in {o.name for o in graph.output}
              and (v[len(prefix):] not in names or v[len(prefix):] in linked)}
    for i in casts:
        v = nodes[i].output[0]
        if nodes[i].input[0] != v[len(prefix):] and v not in model_casts:
            copies.discard(v)  # (merged with a Cast the model does not have: the copy stays)
    touching = {i: [v for v in (*node.input, *node.output) if v.startswith(prefix)]
                for i, node in enumerate(nodes) if i not in casts}
    wrapped = {i for i, values in touching.items() if values and (all(
        v.startswith(prefix) for v in (*nodes[i].input, *nodes[i].output) if v in float32) or (
        nodes[i].op_type == "Cast" and values == [nodes[i].input[0]]))}  # (a Cast of the model reads any type)
    users: dict[str, list[int]] = {}
    for i, values in touching.items():
        for v in values:
            users.setdefault(v, []).append(i)
    # nodes that are not wrapped and read a copy read it as the output of a Cast of the model to float32, which
    # onnxruntime merged with the Cast it inserted: that Cast is put back for them when the copy is renamed
    readers = {v: [i for i in users[v] if i not in wrapped and v not in nodes[i].output] for v in users}
    for v, found in readers.items():
        users[v] = [i for i in users[v] if i not in found]
    changed = True
    while changed:
        changed = False
        for v in list(copies):
            if any(i not in wrapped for i in users.get(v, ())):
                copies.discard(v)
                changed = True
        for i in list(wrapped):
            if any(v not in copies for v in touching[i]):
                wrapped.discard(i)
                changed = True
    if not copies:
        return False
    restored = _restored_casts([v for v in copies if readers.get(v)], names, original)
    kept = []
    for i, node in enumerate(nodes):  # (copies: the repeated field is emptied below)
        if i in casts and any(v in copies for v in (*node.input, *node.output)):
            if node.output[0] in copies and node.output[0] in model_casts:
                kept.append(model_casts[node.output[0]])
            continue
        kept.extend(cast for v, cast in restored.items() if i == min(readers[v]))
        kept.append(onnx.NodeProto())
        kept[-1].CopyFrom(node)
        for k, name in enumerate(kept[-1].input):
            if name in restored and i in readers[name]:
                kept[-1].input[k] = restored[name].output[0]
        for field in (kept[-1].input, kept[-1].output):
            for k, name in enumerate(field):
                if name in copies:
                    field[k] = name[len(prefix):]
    del graph.node[:]
    graph.node.extend(kept)
    given_back = {cast.output[0] for cast in model_casts.values()}
    for info in [info for info in graph.value_info if info.name in given_back]:  # (typed as the merged Cast's input)
        info.type.tensor_type.elem_type = next(a.i for a in model_casts[prefix + info.name].attribute if a.name == "to")
    return True


def _merged_model_casts(inserted: list[onnx.NodeProto], original: Callable[[], onnx.ModelProto]
                        ) -> dict[str, onnx.NodeProto]:
    """For each inserted Cast ``InsertedPrecisionFreeCast_x`` reading another value than ``x``, the model's Cast
    writing ``x`` from the value it reads (onnxruntime merged that Cast into its own), by the copy's name."""
    merged = {node.output[0]: node for node in inserted
              if node.input[0] != node.output[0][len(INSERTED_CAST_PREFIX):]}
    if not merged:
        return {}
    by_output = {node.output[0]: node for node in original().graph.node
                 if node.op_type == "Cast" and node.domain in ("", "ai.onnx") and len(node.output) == 1}
    found = {}
    for v, node in merged.items():
        cast = by_output.get(v[len(INSERTED_CAST_PREFIX):])
        if cast is not None and list(cast.input) == list(node.input):
            found[v] = onnx.NodeProto()
            found[v].CopyFrom(cast)
    return found


def _restored_casts(merged: list[str], names: set[str], original: Callable[[], onnx.ModelProto]
                    ) -> dict[str, onnx.NodeProto]:
    """For each copy ``InsertedPrecisionFreeCast_x`` onnxruntime merged with a Cast of the model, that Cast of
    ``x`` to float32, named as in the model (a Cast in the body of a function op onnxruntime inlined, which
    the model does not name, gets ``x``'s name with ``/float32``)."""
    if not merged:
        return {}
    named = _model_casts(original())
    restored = {}
    for v in merged:
        x = v[len(INSERTED_CAST_PREFIX):]
        name, output = named.get(x, (f"{x}/float32", f"{x}/float32"))
        while output in names:
            name, output = f"{name}'", f"{output}'"
        restored[v] = onnx.helper.make_node("Cast", [x], [output], name=name, to=onnx.TensorProto.FLOAT)
        names.add(output)
    return restored
