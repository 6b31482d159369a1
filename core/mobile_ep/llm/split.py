"""Splitting the prefill and decode graphs into parts under a weight budget, chained by hidden states.

An HTP session maps its graph's weights into the accelerator's address space, so a model past a size runs out of
it (QNN's error 1002 when the graph is finalized); the fix the vendors' recipes apply is a split into parts, each
its own session.  A part here is a run of whole layers: the first part starts at ``input_ids`` (the embedding),
the last ends at the logits, and each hands the residual stream (``[1, seq, hidden]``) to the next.  Every part
takes the attention mask, the position ids and the past keys and values of its own layers and returns the presents
of its layers; what only the mask and the positions feed (the causal mask, the rotary tables) is computed again in
each part.

A cut is a point of the graph's node order where only one tensor that depends on the tokens crosses from the
nodes before to the nodes after.  The cuts are chosen in the prefill graph (each part as many whole layers as fit
the budget) and the decode graph is cut after the same layers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import onnx_ir as ir

from mobile_ep.errors import UsageError
from mobile_ep.llm.decoder import Interface

__all__ = ["Cut", "cuts", "choose", "split_graphs", "part_weights", "copy_nodes"]


@dataclasses.dataclass(frozen=True)
class Cut:
    """A point after node *index* where only *tensor* (the hidden state) crosses; *layers*: the cache layers
    read before it; *weights*: the bytes of initializers the nodes before it use."""

    index: int
    tensor: str
    layers: int
    weights: int


def _side(graph: ir.Graph, face: Interface) -> set[str]:
    """Tensors computed only from the mask, the positions and constants."""
    side = {face.attention_mask} | ({face.position_ids} if face.position_ids else set())
    side |= set(graph.initializers)
    for node in graph:
        if all(v is None or v.name in side or v.const_value is not None for v in node.inputs):
            side |= {v.name for v in node.outputs}
    return side


def _weight_bytes(values) -> int:
    return sum(v.const_value.nbytes for v in values if v is not None and v.is_initializer() and v.const_value is not None)


def cuts(model: ir.Model, face: Interface) -> list[Cut]:
    """Every clean cut of *model*'s graph between its layers, in order."""
    graph = model.graph
    nodes = list(graph)
    side = _side(graph, face)
    past_names = {name for pair in face.past for name in pair}
    position = {id(node): i for i, node in enumerate(nodes)}
    crossing: set[str] = set()
    last_use: dict[str, int] = {}
    for node in nodes:
        for value in node.outputs:
            uses = [position[id(user)] for user, _ in value.uses() if id(user) in position]
            last_use[value.name] = max(uses, default=-1)
    found, layers_seen, used = [], set(), set()
    weights = 0
    for i, node in enumerate(nodes):
        for value in node.inputs:
            if value is None:
                continue
            if value.name in past_names:
                layers_seen.add(value.name)
            if value.is_initializer() and value.name not in used:
                used.add(value.name)
                weights += _weight_bytes([value])
        crossing = {name for name in crossing if last_use.get(name, -1) > i}
        crossing |= {v.name for v in node.outputs if v.name not in side and last_use.get(v.name, -1) > i}
        if len(crossing) == 1 and layers_seen and len(layers_seen) % 2 == 0:
            (tensor,) = crossing
            layers = len(layers_seen) // 2
            if layers < face.layers and (not found or found[-1].layers < layers):
                found.append(Cut(i, tensor, layers, weights))
            elif found and found[-1].layers == layers:
                found[-1] = Cut(i, tensor, layers, weights)  # (the latest point before the next layer's cache)
    return found


def choose(prefill_cuts: list[Cut], total: int, budget: int) -> list[Cut]:
    """The fewest cuts that keep each part's weights within *budget* bytes."""
    chosen: list[Cut] = []
    start = 0
    points = [*prefill_cuts, Cut(-1, "", -1, total)]
    for k, cut in enumerate(points):
        if cut.weights - start > budget:
            previous = points[k - 1] if k else None
            if previous is None or (chosen and previous == chosen[-1]) or previous.weights == start:
                raise UsageError(f"a part of {(cut.weights - start) / 2**20:.1f} MB cannot be split under "
                                 f"--max-part-mb {budget / 2**20:.4g}: a layer (with the embedding or the output "
                                 "head) is the smallest part")
            chosen.append(previous)
            start = previous.weights
            if cut.weights - start > budget:
                raise UsageError(f"a part of {(cut.weights - start) / 2**20:.1f} MB cannot be split under "
                                 f"--max-part-mb {budget / 2**20:.4g}: a layer is the smallest part")
    return chosen


def _part(model: ir.Model, face: Interface, start: str | None, stop: str | None, layers: tuple[int, int],
          name: str) -> ir.Model:
    """The nodes of *model* from tensor *start* (else ``input_ids``) to *stop* (else the logits), with the
    presents of *layers* (first, end), as a model of its own (the weights shared with *model*'s tensors)."""
    graph = model.graph
    values = {}
    for node in graph:
        for value in node.outputs:
            values[value.name] = value
    for value in graph.inputs:
        values[value.name] = value
    nodes = list(graph)
    producer = {v.name: node for node in nodes for v in node.outputs}
    target = values[stop] if stop else next(v for v in graph.outputs if v.name == face.logits)
    boundary = {start or face.input_ids, face.attention_mask} | ({face.position_ids} if face.position_ids else set())
    presents = [next(v for v in graph.outputs if v.name == out) for pair in face.present[layers[0]:layers[1]]
                for out in pair]
    keep: set[int] = set()
    stack = [target, *presents]  # (every node they read, back to the boundary)
    while stack:
        value = stack.pop()
        if value.name in boundary or value.name not in producer or id(producer[value.name]) in keep:
            continue
        node = producer[value.name]
        keep.add(id(node))
        stack.extend(v for v in node.inputs if v is not None)
    return copy_nodes(model, [n for n in nodes if id(n) in keep], [v for v in [target, *presents]], name)


def copy_nodes(model: ir.Model, nodes: list[ir.Node], outputs: list[ir.Value], name: str) -> ir.Model:
    """A new model of copies of *nodes* (the initializers' tensors shared, not copied)."""
    mapping: dict[str, ir.Value] = {}
    inputs, initializers = [], []

    def get(value: ir.Value | None) -> ir.Value | None:
        if value is None:
            return None
        if value.name not in mapping:
            copy = ir.Value(name=value.name, shape=value.shape, type=value.type,
                            const_value=value.const_value if value.is_initializer() else None)
            mapping[value.name] = copy
            if value.is_initializer():
                initializers.append(copy)
            elif value.producer() is None or value.producer() not in nodes:
                inputs.append(copy)
        return mapping[value.name]

    made = []
    for node in nodes:
        ins = [get(v) for v in node.inputs]
        copy = ir.Node(node.domain, node.op_type, ins, attributes=[a for a in node.attributes.values()],
                       num_outputs=len(node.outputs), name=node.name, overload=node.overload, version=node.version)
        for old, new in zip(node.outputs, copy.outputs, strict=True):
            new.name, new.shape, new.type = old.name, old.shape, old.type
            mapping[old.name] = new
        made.append(copy)
    graph = ir.Graph(inputs, [mapping[v.name] for v in outputs], nodes=made, initializers=initializers,
                     opset_imports=dict(model.opset_imports), name=name)
    return ir.Model(graph, ir_version=model.ir_version, producer_name=model.producer_name)


def split_graphs(graphs: Mapping[str, ir.Model], face: Interface, budget: int) -> list[dict[str, ir.Model]]:
    """*graphs* (``prefill``, ``decode``) as parts of at most *budget* bytes of weights each (one part: the
    graphs as they are)."""
    total = _weight_bytes(graphs["prefill"].graph.initializers.values())
    if total <= budget:
        return [dict(graphs)]
    found = {name: {cut.layers: cut for cut in cuts(model, face)} for name, model in graphs.items()}
    chosen = choose(list(found["prefill"].values()), total, budget)
    layers = [cut.layers for cut in chosen]
    missing = [n for n in layers if n not in found["decode"]]
    if missing:
        raise UsageError(f"the decode graph has no clean cut after layer {missing[0]}, where the prefill graph is cut")
    parts = []
    for k in range(len(layers) + 1):
        part = {}
        for name, model in graphs.items():
            start = found[name][layers[k - 1]].tensor if k else None
            stop = found[name][layers[k]].tensor if k < len(layers) else None
            bounds = (layers[k - 1] if k else 0, layers[k] if k < len(layers) else face.layers)
            part[name] = _part(model, face, start, stop, bounds, f"{model.graph.name}_part{k + 1}")
            for value in [*part[name].graph.inputs, *part[name].graph.outputs]:
                if value.name in (start, stop):  # (the hidden state after layer N: hidden_states.N)
                    value.name = f"hidden_states.{layers[k - 1] if value.name == start else layers[k]}"
        parts.append(part)
    return parts


def part_weights(part: Mapping[str, ir.Model]) -> int:
    return _weight_bytes(part["prefill"].graph.initializers.values())
