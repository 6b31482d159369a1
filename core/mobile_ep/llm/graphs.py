"""The fixed-context graphs of a decoder: prefill (``seq`` = the prompt window) and decode (``seq`` = 1), each over
a KV cache of ``context - seq`` and a mask of ``context``, and their weights written once for both.

Each graph is the export with its input shapes fixed (:class:`mobile_ep.passes.fix_shapes.FixShapesPass`) and
onnxruntime's basic-level optimizations applied (:func:`mobile_ep.passes.load.view`, what every session does
first): with the shapes known, the shape arithmetic, the causal mask's index arithmetic and the rotary
frequencies fold into constants.  :func:`write_shared` writes the graphs beside one weights file: a tensor both
graphs hold (same type, shape and bytes) is stored once and both reference the same offset.
"""

from __future__ import annotations

import dataclasses
import hashlib
import pathlib
from collections.abc import Mapping

import numpy as np
import onnx_ir as ir

from mobile_ep import model_io
from mobile_ep.llm.decoder import Interface, graph_shapes
from mobile_ep.llm.rotary import fold_rotary
from mobile_ep.options import Options
from mobile_ep.passes import load

__all__ = ["GRAPHS", "build_graphs", "write_shared", "SharedWeights", "WEIGHTS_FILE", "ALIGN", "INLINE_BELOW"]

#: The graphs written, with the number of new tokens of each (``None``: the prefill window).
GRAPHS = ("prefill", "decode")
#: The weights file beside the graphs.
WEIGHTS_FILE = "weights.data"
#: Each tensor in the weights file starts at a multiple of this (a page: the file can be memory-mapped).
ALIGN = 4096
#: Tensors smaller than this stay inside their graph's file.
INLINE_BELOW = 1024


def build_graphs(path: pathlib.Path, face: Interface, context: int, prefill: int, work: pathlib.Path,
                 proto=None, new_slots: bool = True) -> dict[str, ir.Model]:
    """The prefill and decode graphs of the export at *path* (files under *work*, which must outlive them); with
    *new_slots*, their presents cut to the new tokens' slots (:func:`only_new_slots`)."""
    graphs = {}
    for name, seq in (("prefill", prefill), ("decode", 1)):
        options = Options(shapes=graph_shapes(face, context, seq))
        graphs[name] = load.view(path, work / name, options, proto).model
        graphs[name].graph.name = f"{graphs[name].graph.name or 'decoder'}_{name}"
        fold_rotary(graphs[name], face, context, seq)
        if new_slots:
            only_new_slots(graphs[name], face, context, seq)
    return graphs


def only_new_slots(model: ir.Model, face: Interface, context: int, seq: int) -> None:
    """Each present output cut to the new tokens' slots, ``[1, kv_heads, seq, head_dim]``: the app writes them
    into its cache (the past slots it already holds), and the accelerator copies ``seq`` slots out, not
    ``context``."""
    graph = model.graph
    outputs = {value.name: i for i, value in enumerate(graph.outputs)}
    constants = {}
    for key, value in face.present:
        for name in (key, value):
            if name not in outputs:
                continue  # (a part of a split graph: another part's layer)
            whole = graph.outputs[outputs[name]]
            whole.name = f"{name}.all_slots"
            for bound, number in (("starts", context - seq), ("ends", context), ("axes", 2)):
                if bound not in constants:
                    tensor = ir.tensor(np.array([number], np.int64), name=f"present_slots.{bound}")
                    constants[bound] = ir.Value(name=tensor.name, const_value=tensor, shape=ir.Shape([1]),
                                                type=ir.TensorType(ir.DataType.INT64))
                    graph.register_initializer(constants[bound])
            node = ir.node("Slice", [whole, constants["starts"], constants["ends"], constants["axes"]],
                           name=f"present_slots.{name}")
            graph.append(node)
            new = node.outputs[0]
            new.name, new.dtype = name, whole.dtype
            new.shape = ir.Shape([1, face.kv_heads, seq, face.head_dim])
            graph.outputs[outputs[name]] = new


@dataclasses.dataclass
class SharedWeights:
    """What :func:`write_shared` wrote: the weights file's size, the bytes each graph references in it, and the
    bytes a file per graph would have held."""

    file: str
    bytes: int
    tensors: int
    per_graph: dict[str, int]

    @property
    def unshared_bytes(self) -> int:
        return sum(self.per_graph.values())

    def as_dict(self) -> dict:
        return {"file": self.file, "bytes": self.bytes, "tensors": self.tensors, "per_graph": self.per_graph,
                "bytes_without_sharing": self.unshared_bytes}


def write_shared(graphs: Mapping[str, ir.Model], folder: pathlib.Path, weights: str = WEIGHTS_FILE,
                 prefix: str = "") -> tuple[dict[str, pathlib.Path], SharedWeights]:
    """Write each graph to ``folder/<prefix><name>.onnx``, their initializers of :data:`INLINE_BELOW` bytes and
    more into ``folder/<prefix><weights>``, each distinct tensor once (page-aligned)."""
    folder = pathlib.Path(folder)
    weights = prefix + weights
    stored: dict[tuple, tuple[int, int]] = {}  # (dtype, shape, sha256) -> (offset, length)
    per_graph = {name: 0 for name in graphs}
    offset = 0
    with open(folder / weights, "wb") as data:
        for name, model in graphs.items():
            for graph in model.graphs():
                for value in graph.initializers.values():
                    tensor = value.const_value
                    if tensor is None or tensor.nbytes < INLINE_BELOW or tensor.dtype == ir.DataType.STRING:
                        continue
                    raw = tensor.tobytes()
                    if isinstance(tensor, ir.ExternalTensor):  # (its file unmapped: the pages read are not kept)
                        tensor.release()
                    key = (tensor.dtype, tuple(tensor.shape), hashlib.sha256(raw).digest())
                    if key not in stored:
                        offset = -(-offset // ALIGN) * ALIGN
                        data.seek(offset)
                        data.write(raw)
                        stored[key] = (offset, len(raw))
                        offset += len(raw)
                    per_graph[name] += len(raw)
                    del raw
                    where, length = stored[key]
                    value.const_value = ir.ExternalTensor(weights, where, length, tensor.dtype, shape=tensor.shape,
                                                          name=value.name, base_dir=folder)
    paths = {}
    for name, model in graphs.items():  # (saved as they are: the external tensors stay references)
        paths[name] = folder / f"{prefix}{name}.onnx"
        model_io.prepare_for_save(model)
        with model_io.atomic_path(paths[name]) as tmp:
            ir.save(model, tmp)
    size = (folder / weights).stat().st_size
    return paths, SharedWeights(weights, size, len(stored), per_graph)
