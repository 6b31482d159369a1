"""What every job of :mod:`mobile_ep.model_io` shares: facts about ONNX protobufs and onnxruntime, walks over
the graphs of a ``ModelProto``, and ONNX shape inference of a model without its large weights."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import onnx
import onnx_ir as ir

__all__ = ["MAX_IR_VERSION", "DATA_TYPES", "INFERENCE_DATA_MAX_BYTES", "nbytes", "type_name", "node_label",
           "subgraphs", "graphs", "external_files", "is_function_op", "infer_proto", "function_body_ops"]

#: Highest ONNX IR version onnxruntime 1.31 accepts (recent onnx releases write 14 by default).
MAX_IR_VERSION = 13

_T = onnx.TensorProto
DATA_TYPES = frozenset(v.number for v in _T.DataType.DESCRIPTOR.values) - {_T.UNDEFINED}


def nbytes(data_type: int, elements: int) -> int | None:
    """Bytes *elements* values of *data_type* take in raw_data or external data (None: strings, no fixed size)."""
    if data_type not in DATA_TYPES or data_type == _T.STRING:
        return None
    return (elements * ir.DataType(data_type).bitwidth + 7) // 8


def type_name(data_type: int) -> str:
    return _T.DataType.Name(data_type) if data_type in DATA_TYPES | {_T.UNDEFINED} else str(data_type)


def node_label(node: onnx.NodeProto, index: int) -> str:
    op = f"{node.domain}:{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type
    return f"{node.name!r} ({op})" if node.name else f"#{index} ({op})"


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for attribute in node.attribute:
        if attribute.HasField("g"):
            yield attribute.g
        yield from attribute.graphs


def graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """*graph*, then every subgraph in it at any depth."""
    stack = [graph]
    while stack:
        graph = stack.pop()
        yield graph
        stack += [sub for node in graph.node if node.attribute for sub in subgraphs(node)]


#: Initializers larger than this go to ONNX's shape inference as inputs, without their data (onnx_ir's rule).
INFERENCE_DATA_MAX_BYTES = 1000


def external_files(data: bytes, cpu_kernel: Callable[[str, int], bool]) -> set[str] | None:
    """The locations of the external data files a serialized model's tensors (initializers and attributes, in
    every graph) read, when onnxruntime's model compiler writes the model a session writes of it; ``None`` when
    it may not: a node whose op is an ONNX function the CPU EP has no kernel for (*cpu_kernel*: whether it has one
    for an op at an opset; a session inlines such a node, the compiler does not) or a float16 or bfloat16 value
    (a session wraps the CPU kernels without one in Casts after partitioning)."""
    if b"\n\x08location" not in data:  # (the key of an external data entry, as serialized: none, no parse)
        return set()
    proto = onnx.ModelProto.FromString(data)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    half = {_T.FLOAT16, _T.BFLOAT16}
    found = set()
    for graph in graphs(proto.graph):
        for value in [*graph.input, *graph.output, *graph.value_info]:
            if value.type.tensor_type.elem_type in half:
                return None
        for node in graph.node:
            if node.domain in ("", "ai.onnx") and ((is_function_op(node.op_type, opset)
                                                    and not cpu_kernel(node.op_type, opset)) or any(
                    (a.name == "to" and a.i in half) or (a.HasField("t") and a.t.data_type in half)
                    for a in node.attribute)):
                return None
        for tensor in [*graph.initializer, *(a.t for n in graph.node for a in n.attribute if a.HasField("t"))]:
            if tensor.data_type in half:
                return None
            if tensor.data_location == _T.EXTERNAL:
                found.update(e.value for e in tensor.external_data if e.key == "location")
    return found


@functools.cache
def is_function_op(op: str, opset: int | None) -> bool:
    """Whether the ONNX op *op* is a function (its body given by ONNX, maybe depending on the node) at *opset*."""
    if opset is None:
        return False
    try:
        schema = onnx.defs.get_schema(op, opset, "")
    except onnx.defs.SchemaError:
        return False
    return schema.has_function or schema.has_context_dependent_function


def infer_proto(proto: onnx.ModelProto, *, data_prop: bool) -> onnx.ModelProto:
    """ONNX shape inference of *proto* without the data of its large initializers, every initializer also
    an input (onnx_ir's rule): only nodes, value infos and small tensors are copied."""
    source = proto.graph
    skeleton = onnx.ModelProto(ir_version=proto.ir_version, opset_import=proto.opset_import,
                               functions=proto.functions)
    graph = skeleton.graph
    graph.name = source.name
    for field in ("node", "input", "output", "value_info", "sparse_initializer"):
        getattr(graph, field).extend(getattr(source, field))
    inputs = {value.name for value in source.input}
    for tensor in source.initializer:  # (under IR 3 onnx reads the type of an initializer only if an input)
        if tensor.name not in inputs:
            graph.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims))
        if tensor.data_location != _T.EXTERNAL and tensor.ByteSize() <= INFERENCE_DATA_MAX_BYTES:
            graph.initializer.append(tensor)
    return onnx.shape_inference.infer_shapes(skeleton, check_type=False, strict_mode=False, data_prop=data_prop)


@functools.lru_cache(maxsize=256)
def function_body_ops(op: str, opset: int) -> frozenset[str]:
    """The ops of ONNX function *op*'s body at *opset* (empty when it is none): a context-dependent body as ONNX
    builds it for a node with the op's required inputs, of the first type each takes, and no attributes."""
    try:
        schema = onnx.defs.get_schema(op, opset, "")
        if schema.has_function:
            version = max(v for v in schema.function_opset_versions if v <= opset)
            body = onnx.FunctionProto.FromString(schema.get_function_with_opset_version(version))
        elif schema.has_context_dependent_function:
            version = max(v for v in schema.context_dependent_function_opset_versions if v <= opset)
            allowed = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
            required = [p for p in schema.inputs if p.option != onnx.defs.OpSchema.FormalParameterOption.Optional]
            types = []
            for p in required:
                kinds = allowed.get(p.type_str, [p.type_str])
                kind = "tensor(float)" if "tensor(float)" in kinds else kinds[0]
                elem = getattr(onnx.TensorProto, kind.removeprefix("tensor(").removesuffix(")").upper())
                types.append(onnx.helper.make_tensor_type_proto(elem, None).SerializeToString())
            node = onnx.helper.make_node(op, [f"i{k}" for k in range(len(required))], ["o"])
            body = onnx.FunctionProto.FromString(schema.get_context_dependent_function_with_opset_version(
                version, node.SerializeToString(), types))
        else:
            return frozenset()
    except Exception:  # (no such op, or a body ONNX cannot build without attributes)
        return frozenset()
    return frozenset(n.op_type for n in body.node if n.domain in ("", "ai.onnx"))
