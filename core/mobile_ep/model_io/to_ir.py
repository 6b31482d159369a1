"""To the IR: a parsed model as an ``onnx_ir.Model`` (external weights stay memory-mapped, never copied), with
the shapes ONNX infers, and shape inference on an IR model in linear time."""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import math
import os
from collections.abc import Iterator

import numpy as np
import onnx
import onnx_ir as ir
from onnx_ir.passes.common import NameFixPass

from mobile_ep.errors import ModelError
from mobile_ep.model_io import guard, shape_values
from mobile_ep.model_io.guard import Refused, check_path, read_proto
from mobile_ep.model_io.protos import INFERENCE_DATA_MAX_BYTES, graphs, infer_proto, nbytes
from mobile_ep.model_io.validation import validate

__all__ = ["from_proto", "load", "infer_shapes", "check_shapes_strictly", "inline_small_weights"]

#: Rounds of :func:`mobile_ep.model_io.shape_values.propagate` and shape inference at most (a shape one round fixes
#: can make the ``Shape`` of the next round static).
SHAPE_VALUE_ROUNDS = 3


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cycle collector paused while a big IR is built (nothing it builds is garbage; each full
    collection would walk the whole model again: more than half the time on a 40k-node graph)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _deserialize(proto: onnx.ModelProto, label: str | None = None) -> ir.Model:
    try:
        return ir.serde.deserialize_model(proto)
    except Exception as exc:
        raise ModelError(f"{label + ': ' if label else ''}cannot read the model's graph: "
                         f"{type(exc).__name__}: {exc}") from None


def _shape_inference_failed(exc: Exception) -> None:
    """What onnx_ir's ShapeInferencePass does when inference fails: a warning; shapes stay as they are."""
    logging.getLogger("onnx_ir.passes.common.shape_inference").warning(
        "Shape inference failed: %s. Model is left unchanged", exc_info=exc)


def _dense(sparse: onnx.SparseTensorProto) -> onnx.TensorProto:
    """A sparse initializer as the dense tensor onnxruntime makes of it when it loads the model."""
    from onnx import numpy_helper

    values = numpy_helper.to_array(sparse.values)
    indices = numpy_helper.to_array(sparse.indices).astype(np.int64)
    dims = tuple(sparse.dims)
    elements = math.prod(dims)
    if elements > guard.MAX_ELEMENTS or (nbytes(sparse.values.data_type, elements) or 0) > guard.MAX_VALUE_BYTES:
        raise Refused(f"absurd shape: sparse initializer {sparse.values.name!r} would have {elements:,} elements")
    if indices.ndim == 2 and len(dims) > 0:  # [NNZ, rank] coordinates
        indices = np.ravel_multi_index(tuple(indices.T), dims) if indices.size else indices.reshape(-1)
    indices = indices.reshape(-1)
    if indices.size != values.size or (indices.size and (indices.min() < 0 or indices.max() >= elements)):
        raise Refused(f"malformed tensor: sparse initializer {sparse.values.name!r} has indices outside its "
                       f"shape {list(dims)}")
    dense = np.zeros(elements, dtype=values.dtype)
    dense[indices] = values.reshape(-1)
    return numpy_helper.from_array(dense.reshape(dims), sparse.values.name)


def _has_map(type_proto: onnx.TypeProto) -> bool:
    kind = type_proto.WhichOneof("value")
    if kind == "map_type":
        return True
    if kind in ("sequence_type", "optional_type"):
        return _has_map(getattr(type_proto, kind).elem_type)
    return False


def _densified(proto: onnx.ModelProto, label: str | None) -> onnx.ModelProto:
    """*proto*, or a copy of it that onnx_ir can read: sparse initializers made dense, and the declared type
    of values of map types (``ZipMap``'s ``seq(map(...))``) left out, for onnxruntime to infer."""
    sparse = any(len(graph.sparse_initializer) for graph in graphs(proto.graph))
    maps = any(_has_map(value.type) for graph in graphs(proto.graph)
               for value in [*graph.input, *graph.output, *graph.value_info])
    if not sparse and not maps:
        return proto
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    try:
        for graph in graphs(copy.graph):
            graph.initializer.extend(_dense(sparse) for sparse in graph.sparse_initializer)
            del graph.sparse_initializer[:]
            for value in [*graph.input, *graph.output, *graph.value_info]:
                if _has_map(value.type):
                    value.ClearField("type")
    except Refused as exc:
        raise ModelError(f"{label + ': ' if label else ''}{exc}") from None
    except Exception as exc:
        raise ModelError(f"{label + ': ' if label else ''}malformed sparse initializer: {type(exc).__name__}: "
                         f"{exc}") from None
    return copy


@_gc_paused()
def from_proto(proto: onnx.ModelProto, *, base_dir: str | os.PathLike | None = None, shapes: bool = True,
               label: str | None = None) -> ir.Model:
    """An IR model from a ModelProto (which stays as it was), with the shapes ONNX infers unless *shapes*
    is False, and a name on every node and value (sparse initializers made dense, as onnxruntime does).
    *base_dir*: the folder external data is read from."""
    proto = _densified(proto, label)
    model = _deserialize(proto, label)
    for node in (n for graph in model.graphs() for n in graph):  # (not UTF-8: protobuf gives bytes; ORT takes it)
        if isinstance(node.name, bytes):
            node.name = node.name.decode("utf-8", "backslashreplace")
    if base_dir is not None:
        for graph in model.graphs():
            ir.external_data.set_base_dir(graph, base_dir)
    if shapes:
        try:
            _take_shapes(model, infer_proto(proto, data_prop=False))
        except Exception as exc:
            _shape_inference_failed(exc)
        else:
            for _ in range(SHAPE_VALUE_ROUNDS):  # (shapes onnxruntime knows: inferred on from them)
                if not shape_values.propagate(model.graph):
                    break
                infer_shapes(model)
    _name_nodes(model)
    NameFixPass()(model)
    return model


def _name_nodes(model: ir.Model) -> None:
    """Name each unnamed node ``node``, ``node_1``, ... (as onnx_ir's ``NameFixPass`` does) skipping the names
    of the graph's named nodes, which keep them: a node onnxruntime made without a name (an inlined function
    body) never takes the name of a node of the file, which onnxruntime reports its EPs' nodes by."""
    for graph in model.graphs():
        unnamed = [node for node in graph if not node.name]
        if not unnamed:
            continue
        used = {node.name for node in graph if node.name}
        count = 0
        for node in unnamed:
            name = "node"
            while name in used:
                count += 1
                name = f"node_{count}"
            used.add(name)
            node.name = name


def load(path: str | os.PathLike, *, shapes: bool = True, check: bool = True) -> ir.Model:
    """Load a model file into the IR (:func:`read_proto`, then :func:`validate` when *check*)."""
    p, _ = check_path(path)
    proto = read_proto(p)
    if check:
        validate(p, proto)
    return from_proto(proto, base_dir=p.parent, shapes=shapes, label=str(p))


def _call_onnx_api(func, model: ir.Model):
    """``func(proto)`` on *model* serialized without the data of its large initializers; *model* is left as
    it was.  onnx_ir's ``passes.common._c_api_utils.call_onnx_api``, in linear time: that one looks each
    initializer up in the list of inputs (a minute for 40,000 initializers)."""
    graph = model.graph
    inputs = list(graph.inputs)
    values = list(graph.initializers.values())
    tensors = [value.const_value for value in values]
    listed = set(inputs)
    graph.initializers.clear()
    try:
        for value, tensor in zip(values, tensors, strict=True):
            if tensor is not None:
                value.shape = value.shape if value.shape is not None else tensor.shape
                value.dtype = value.dtype if value.dtype is not None else tensor.dtype
            if value not in listed:
                graph.inputs.append(value)
            if tensor is not None and tensor.nbytes <= INFERENCE_DATA_MAX_BYTES:
                graph.initializers.add(value)
            else:
                value.const_value = None
        return func(ir.serde.serialize_model(model))
    finally:
        graph.inputs.clear()
        graph.inputs.extend(inputs)
        graph.initializers.clear()
        for value, tensor in zip(values, tensors, strict=True):
            value.const_value = tensor
            graph.initializers.add(value)


@_gc_paused()
def infer_shapes(model: ir.Model) -> ir.Model:
    """ONNX shape inference into an IR model, as onnx_ir's ``ShapeInferencePass`` (non-strict, no data
    propagation) does, in linear time; weights are not copied.  On failure the model is left as it was."""
    infer = functools.partial(onnx.shape_inference.infer_shapes, check_type=False, strict_mode=False,
                              data_prop=False)
    try:
        _take_shapes(model, _call_onnx_api(infer, model))
    except Exception as exc:
        _shape_inference_failed(exc)
    return model


def check_shapes_strictly(model: ir.Model) -> None:
    """Strict ONNX shape inference: a ModelError naming the first inconsistency (weights not copied)."""
    strict = functools.partial(onnx.shape_inference.infer_shapes, check_type=False, strict_mode=True,
                               data_prop=False)
    try:
        _call_onnx_api(strict, model)
    except onnx.shape_inference.InferenceError as exc:
        first = " ".join(str(exc).split()) or "shape inference failed"
        raise ModelError(f"the shapes do not fit the model: {first}") from None


def inline_small_weights(model: ir.Model, limit: int = 1 << 20) -> ir.Model:
    """Read into memory every external initializer under *limit* bytes, so that the model stays whole
    after the folder its side file lives in is deleted (larger ones stay memory-mapped from it)."""
    for graph in model.graphs():
        for value in graph.initializers.values():
            tensor = value.const_value
            if isinstance(tensor, ir.ExternalTensor) and tensor.nbytes < limit:
                data = tensor.numpy().copy()  # the mapping goes with the file
                tensor.release()
                value.const_value = ir.Tensor(data, name=tensor.name, dtype=tensor.dtype)
    return model


def _take_shapes(model: ir.Model, inferred: onnx.ModelProto) -> None:
    """The types and shapes ONNX inferred (*inferred*: the model's value infos and outputs after inference,
    subgraphs included) on the model's values of the same names, graph by graph: the branches of an ``If``
    may use one name for values of different shapes."""
    pairs = [(model.graph, inferred.graph)]
    while pairs:
        graph, proto = pairs.pop()
        values = ir.convenience.create_value_mapping(graph, include_subgraphs=False)
        for info in [*proto.value_info, *proto.output]:
            value = values.get(info.name)
            if value is not None and not _has_map(info.type):  # (onnx_ir has no map types)
                shape = ir.serde.deserialize_type_proto_for_shape(info.type)
                value.shape = shape if shape is not None else value.shape
                type_ = ir.serde.deserialize_type_proto_for_type(info.type)
                value.type = type_ if type_ is not None else value.type
        if len(proto.node) != len(graph):
            continue  # (not the same graph: its subgraphs are left as they are)
        for node, node_proto in zip(graph, proto.node, strict=True):
            subgraphs = {a.name: a for a in node_proto.attribute if a.HasField("g") or len(a.graphs)}
            for name, attr in node.attributes.items():
                found = subgraphs.get(name)
                if found is None:
                    continue
                if attr.type == ir.AttributeType.GRAPH and found.HasField("g"):
                    pairs.append((attr.value, found.g))
                elif attr.type == ir.AttributeType.GRAPHS and len(attr.value) == len(found.graphs):
                    pairs.extend(zip(attr.value, found.graphs, strict=True))
