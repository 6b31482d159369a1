"""Function ops an execution provider takes whole.

ONNX defines some ops as functions of other ops (GroupNormalization, HardSwish, CastLike, Mish, windowed
Attention, ...).  onnxruntime partitions a graph before it inlines their bodies: each EP is offered the
function node itself, and only a node that no EP takes and the CPU has no kernel for is replaced by its body,
whose nodes are then offered again (their Shape and Reshape chains not constant-folded: the basic level has
already run).  The CPU-only session that writes the basic-level graph (:mod:`mobile_ep.passes.fold_constants`)
has no EP to take them, so it inlines all of them: a backend would judge the body of a node its EP takes whole.

:func:`keep_claimed` mends that.  When the basic-level graph lost function nodes of the file, the file is
optimized once more with those nodes cut out (their outputs made graph inputs, their inputs graph outputs, so
the basic level runs around them as it does in a real session), the nodes are put back, and the backends
judge them in that graph.  The nodes some backend takes stay whole; the others are inlined as before.  Only
nodes of the main graph are considered; a function node inside an inlined body is judged as its body.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import pathlib
import tempfile
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import onnx

from mobile_ep import model_io
from mobile_ep.model_io.protos import is_function_op

if TYPE_CHECKING:
    from mobile_ep.contract import Backend

__all__ = ["keep_claimed", "function_nodes", "Whole"]

#: Writes the model (its external data in the given folder) optimized into ``out_dir``, as
#: :func:`mobile_ep.passes.fold_constants.ort_optimized` does, and returns the written file.
Optimize = Callable[[onnx.ModelProto, pathlib.Path, pathlib.Path], pathlib.Path]


def function_nodes(proto: onnx.ModelProto) -> list[int]:
    """The indexes of the main graph's nodes whose op is an ONNX function at the model's opset."""
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    found = []
    for i, node in enumerate(proto.graph.node):
        if node.domain in ("", "ai.onnx") and not any(model_io.subgraphs(node)) and \
                is_function_op(node.op_type, opset):
            found.append(i)
    return found


@dataclasses.dataclass
class Whole:
    """What :func:`keep_claimed` did: the function nodes kept whole (by first output), and those the backends
    were offered whole and refused with a rule's reason (by first output: the node's name, its op, and each
    refusing backend's reason), which are judged as their bodies."""

    kept: list[str] = dataclasses.field(default_factory=list)
    refused: dict[str, tuple[str, str, dict[str, str]]] = dataclasses.field(default_factory=dict)


def keep_claimed(source: pathlib.Path, proto: onnx.ModelProto, optimized: pathlib.Path, out_dir: pathlib.Path,
                 backends: Sequence[Backend], optimize: Optimize) -> tuple[pathlib.Path, Whole]:
    """The basic-level model at *optimized* with the function nodes of *proto* (the file at *source*) that
    onnxruntime inlined and one of *backends* takes whole given back: the file holding it (*optimized*, left as
    it is, when none is; else a file written in *out_dir*), and what was kept whole."""
    candidates = function_nodes(proto)
    if not candidates:
        return optimized, Whole()
    written = onnx.load(str(optimized), load_external_data=False)
    producer = {o: n.op_type for n in written.graph.node for o in n.output}
    candidates = [i for i in candidates if _inlined(proto.graph.node[i], producer)]
    if not candidates:  # (the CPU has kernels for them, or they were folded into constants)
        return optimized, Whole()
    typed = _typed(proto, written)
    candidates = [i for i in candidates if all(o in typed for o in proto.graph.node[i].output if o)]
    spliced = _optimized_around(source, proto, candidates, typed, out_dir / "whole", optimize)
    if spliced is None:
        return optimized, Whole()
    claimed, refused = _claimed(spliced, [proto.graph.node[i].output[0] for i in candidates], backends)
    kept = [i for i in candidates if proto.graph.node[i].output[0] in claimed]
    if kept and kept != candidates:
        spliced = _optimized_around(source, proto, kept, typed, out_dir / "whole.kept", optimize)
    if not kept or spliced is None:
        return optimized, Whole(refused=refused)
    return spliced, Whole([proto.graph.node[i].output[0] for i in kept], refused)


def _inlined(node: onnx.NodeProto, producer: dict[str, str]) -> bool:
    """Whether onnxruntime replaced *node* by its body: each of its outputs is made by a node of another op
    (a body keeps the outputs' names; a folded node's outputs are constants, a kept one's made by its op)."""
    outputs = [o for o in node.output if o]
    copy = "InsertedPrecisionFreeCast_"  # (fold_constants.INSERTED_CAST_PREFIX: a float16 output's float32 copy)
    made = [o if o in producer else copy + o for o in outputs]
    return bool(outputs) and all(o in producer and producer[o] != node.op_type for o in made)


def _typed(*models: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    """The main graph's values ONNX's shape inference gives a tensor type in one of *models* (the file, and its
    basic-level graph with the function nodes inlined), each with the most sizes known: a cut node's outputs
    need a type, they become graph inputs.  (Folding settles sizes the file leaves open; an inlined body's
    unfolded shape arithmetic leaves open sizes the file knows.)"""
    found: dict[str, onnx.ValueInfoProto] = {}
    for model in models:
        try:
            graph = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True).graph
        except Exception:
            continue
        for v in [*graph.input, *graph.value_info, *graph.output]:
            if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type and (
                    v.name not in found or _known(v) > _known(found[v.name])):
                found[v.name] = v
    return found


def _known(value: onnx.ValueInfoProto) -> int:
    """How many sizes of *value*'s shape are known (-1: no shape)."""
    tensor = value.type.tensor_type
    return sum(d.HasField("dim_value") for d in tensor.shape.dim) if tensor.HasField("shape") else -1


def _optimized_around(source: pathlib.Path, proto: onnx.ModelProto, nodes: list[int],
                      typed: dict[str, onnx.ValueInfoProto], work: pathlib.Path, optimize: Optimize) -> pathlib.Path | None:
    """*proto* optimized with *nodes* cut out, then put back (into *work*); ``None`` if onnxruntime refuses."""
    if not nodes:
        return None
    cut = onnx.ModelProto()
    cut.CopyFrom(proto)
    graph = cut.graph
    taken = [proto.graph.node[i] for i in nodes]  # (the file's: the copy's are deleted below)
    outputs = [o for node in taken for o in node.output if o]
    made = set(outputs)
    kept_outputs = [v.name for v in graph.output]
    inputs = [v for node in taken for v in node.input if v and v not in made]
    extra_outputs = list(dict.fromkeys(v for v in inputs if v not in kept_outputs))
    new_inputs = [typed[name] for name in outputs]
    for i in sorted(nodes, reverse=True):
        del graph.node[i]
    graph.input.extend(new_inputs)
    graph.output.extend(onnx.ValueInfoProto(name=name) for name in extra_outputs)
    work.mkdir(parents=True, exist_ok=True)
    try:
        written = optimize(cut, source.parent, work)  # (a view that may serve another call: not changed here)
    except Exception:
        return None
    result = onnx.load(str(written), load_external_data=False)
    graph = result.graph
    inserted = {v.name for v in new_inputs}
    kept = [v for v in graph.input if v.name not in inserted]
    del graph.input[:]
    graph.input.extend(kept)
    by_name = {v.name: v for v in graph.output}
    del graph.output[:]
    graph.output.extend(by_name[name] for name in kept_outputs)
    graph.value_info.extend(by_name[name] for name in extra_outputs if name in by_name)
    ordered = _topological([*graph.node, *taken], {v.name for v in graph.input} | {t.name for t in graph.initializer})
    if ordered is None:
        return None
    del graph.node[:]
    graph.node.extend(ordered)
    graph.value_info.extend(_as_onnxruntime_types(result, taken, proto, typed))
    fd, spliced = tempfile.mkstemp(prefix="whole.", suffix=".onnx", dir=written.parent)  # (beside its weights)
    os.close(fd)
    onnx.save(result, spliced)
    return pathlib.Path(spliced)


def _as_onnxruntime_types(model: onnx.ModelProto, nodes: list[onnx.NodeProto], original: onnx.ModelProto,
                          typed: dict[str, onnx.ValueInfoProto]) -> list[onnx.ValueInfoProto]:
    """The outputs of the put-back *nodes* in *model* typed as onnxruntime types them when it opens the file:
    by the op's own shape inference from its (folded) inputs, else as the file declares them, else by their
    element type alone.  (ONNX has no shape inference for some function ops, GroupNormalization for one:
    onnxruntime then knows the output's shape only from the file, and an EP may refuse the node without it.)"""
    try:
        graph = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False).graph
        inferred = {v.name: v for v in [*graph.value_info, *graph.output]}
    except Exception:
        inferred = {}
    declared = {v.name: v for v in [*original.graph.value_info, *original.graph.output]}
    found = []
    for name in (o for node in nodes for o in node.output if o):
        for source in (inferred, declared):
            if name in source and _known(source[name]) >= 0:
                found.append(source[name])
                break
        else:
            value = onnx.ValueInfoProto(name=name)
            value.type.tensor_type.elem_type = typed[name].type.tensor_type.elem_type
            found.append(value)
    return found


def _topological(nodes: list[onnx.NodeProto], available: set[str]) -> list[onnx.NodeProto] | None:
    """*nodes* in an order where each comes after the producers of its inputs (values in *available* and outer
    scope names are given); ``None`` on a cycle."""
    producer = {o: i for i, node in enumerate(nodes) for o in node.output if o}
    needs = [{producer[v] for v in _reads(node) if v in producer and v not in available} for node in nodes]
    users = collections.defaultdict(list)
    for i, deps in enumerate(needs):
        for d in deps:
            users[d].append(i)
    count = [len(deps) for deps in needs]
    ready = collections.deque(i for i, c in enumerate(count) if c == 0)
    order = []
    while ready:
        i = ready.popleft()
        order.append(nodes[i])
        for u in users[i]:
            count[u] -= 1
            if count[u] == 0:
                ready.append(u)
    return order if len(order) == len(nodes) else None


def _reads(node: onnx.NodeProto) -> set[str]:
    """The values *node* reads, its subgraphs' outer-scope reads included."""
    names = {v for v in node.input if v}
    for sub in model_io.subgraphs(node):
        for graph in model_io.graphs(sub):
            for inner in graph.node:
                names.update(v for v in inner.input if v)
    return names


def _claimed(path: pathlib.Path, firsts: list[str], backends: Sequence[Backend]
             ) -> tuple[set[str], dict[str, tuple[str, str, dict[str, str]]]]:
    """Which of the nodes (by first output) some backend takes in the model at *path*, as ORT offers nodes to
    several EPs in priority order; and, for the others, each backend's reason when a rule of its gave one (a
    backend without a rule for the op is not worth a word)."""
    from mobile_ep.partitioning.propose import propose
    from mobile_ep.passes.partition import isolate_faults

    model = model_io.load(path, check=False)
    found = propose(model, list(backends), on_error=isolate_faults(False))
    wanted = set(firsts)
    claimed, refused = set(), {}
    for node, placement in found.placements.items():
        first = node.outputs[0].name if node.outputs else None
        if first not in wanted:
            continue
        if placement.backend is not None:
            claimed.add(first)
            continue
        reasons = {b.name: found.per_backend[b.name].rejected.get(node, "") for b in backends}
        reasons = {b: r for b, r in reasons.items() if r and f"{b} has no rule for" not in r}
        if reasons:
            refused[first] = (node.name or "", node.op_type, reasons)
    return claimed, refused
