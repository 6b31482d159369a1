"""Reading, validating and saving models: with the exporters and :mod:`mobile_ep.passes.fold_constants`, the
only code that touches ONNX protobufs.

Models live in memory as ``onnx_ir.Model``; external weights stay memory-mapped (onnx_ir's lazy external
tensors) and are never copied.  Every problem a file can have ends in a one-line :class:`mobile_ep.ModelError`
naming it.

Files are parsed by onnx and checked by onnx's checker; :func:`read_proto` adds a short guard for what
neither the checker nor onnxruntime refuse, or refuse only after the harm is done: files that cannot be one
protobuf message, subgraphs nested too deep, declared shapes too large to allocate, external data outside
the model's folder or past the end of its file.  The guard runs before anything opens a file the model
refers to.  :func:`validate` then runs the checker, and refuses values whose *inferred* shape is absurd
before onnxruntime folds them.  Saving goes through onnx_ir, atomically, with an IR version onnxruntime
accepts.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import math
import os
import pathlib
import stat
import tempfile
from collections.abc import Iterator

import numpy as np
import onnx
import onnx_ir as ir
from onnx_ir.passes.common import NameFixPass

from mobile_ep import lenient, progress
from mobile_ep.errors import ModelError

__all__ = [
    "MAX_IR_VERSION", "MAX_ELEMENTS", "MAX_VALUE_BYTES", "MAX_SUBGRAPH_DEPTH", "KNOWN_DOMAINS", "SINGLE_FILE_MAX_BYTES",
    "read_proto", "inspect_proto", "validate", "check_inferred_shapes",
    "load", "from_proto", "infer_shapes", "check_shapes_strictly", "inline_small_weights",
    "target_ir_version", "prepare_for_save", "save", "atomic_path",
]

#: Highest ONNX IR version onnxruntime 1.31 accepts (recent onnx releases write 14 by default).
MAX_IR_VERSION = 13
_MIN_IR_VERSION = 4  # IR 3 lists initializers as inputs; we always write 4+ with them removed.
_MIN_READ_IR_VERSION = 3  # ONNX 1.1; the checker refuses older files with opset imports anyway

#: A declared or inferred tensor value (not stored data) with more elements than this is refused.
MAX_ELEMENTS = 2**31
#: ... and so is one of more bytes than this (2 GiB: more than protobuf, a phone or ORT Mobile handle).
MAX_VALUE_BYTES = 2**31
#: Subgraphs (If/Loop/Scan bodies) nested deeper than this are refused.
MAX_SUBGRAPH_DEPTH = 16
#: A model file larger than this cannot be one protobuf message: weights must be external data.
MAX_PROTO_BYTES = 2**31 - 1
#: Above this, weights fit neither in one protobuf (2 GB) nor in an ORT format file (flatbuffers, 2 GB):
#: :func:`save` puts them in ``<name>.data`` beside the model.
SINGLE_FILE_MAX_BYTES = 1_800_000_000

#: Domains onnxruntime implements (a node in any other domain cannot load without a custom-op library).
KNOWN_DOMAINS = frozenset({
    "", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training", "ai.onnx.training",
    "com.microsoft", "com.microsoft.nchwc", "com.microsoft.experimental", "com.ms.internal.nhwc",
    "org.pytorch.aten",
})

# onnxruntime reads a tensor from *memory* (offset = address) when its location is one of these markers.
_ORT_MEMORY_MARKERS = ("_ORT_MEM_ADDR_", "__ORT_MEM_ADDR__")

_T = onnx.TensorProto
_DATA_TYPES = frozenset(v.number for v in _T.DataType.DESCRIPTOR.values) - {_T.UNDEFINED}
_TYPED_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")


def _nbytes(data_type: int, elements: int) -> int | None:
    """Bytes *elements* values of *data_type* take in raw_data or external data (None: strings, no fixed size)."""
    if data_type not in _DATA_TYPES or data_type == _T.STRING:
        return None
    return (elements * ir.DataType(data_type).bitwidth + 7) // 8


def _type_name(data_type: int) -> str:
    return _T.DataType.Name(data_type) if data_type in _DATA_TYPES | {_T.UNDEFINED} else str(data_type)


def _node_label(node: onnx.NodeProto, index: int) -> str:
    op = f"{node.domain}:{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type
    return f"{node.name!r} ({op})" if node.name else f"#{index} ({op})"


# --------------------------------------------------------------------------------------------------
# Reading: the file, the parse, and the guard for what onnx's checker and onnxruntime let through
# --------------------------------------------------------------------------------------------------
class _Refused(Exception):
    """What the guard refuses, without the file's name."""


def _check_value(value: onnx.ValueInfoProto, what: str) -> None:
    """Refuse a declared or inferred value of an unknown element type or a negative or absurd shape; a dim of
    -1 is made unknown (cleared in *value*)."""
    type_proto = value.type
    kind = type_proto.WhichOneof("value")
    while kind in ("sequence_type", "optional_type", "map_type"):
        inner = getattr(type_proto, kind)
        type_proto = inner.value_type if kind == "map_type" else inner.elem_type
        kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":  # (every value of a model is looked at: the usual case first)
        tensor_type = type_proto.tensor_type
    elif kind == "sparse_tensor_type":
        tensor_type = type_proto.sparse_tensor_type
    else:
        return
    elem_type = tensor_type.elem_type
    if elem_type and elem_type not in _DATA_TYPES:
        raise _Refused(f"invalid ONNX model: {what} {value.name!r} has an unknown element type {elem_type}")
    elements = 1
    for d in tensor_type.shape.dim:
        dim = d.dim_value  # (0 when unset: a dim_param or nothing)
        if dim > 0:
            elements *= dim
        elif dim == -1:  # "unknown", as exporters (paddle2onnx, older tf2onnx) write it and ORT reads it
            d.ClearField("dim_value")
        elif dim < 0:
            raise _Refused(f"absurd shape: {what} {value.name!r} has a negative dimension ({dim})")
        elif d.HasField("dim_value"):
            elements = 0
    if elements > MAX_VALUE_BYTES // 16 and (  # (below, any type fits: 16 bytes an element at most)
            elements > MAX_ELEMENTS or (_nbytes(elem_type, elements) or 0) > MAX_VALUE_BYTES):
        raise _Refused(f"absurd shape: {what} {value.name!r} would have {elements:,} elements "
                       f"({_type_name(elem_type)}); at most {MAX_ELEMENTS:,} elements and {MAX_VALUE_BYTES:,} "
                       "bytes are accepted")


def _check_values(graph: onnx.GraphProto, main: bool, inputs: bool = True) -> None:
    for value in graph.input if inputs else ():
        _check_value(value, "graph input" if main else "subgraph input")
    for value in graph.output:
        _check_value(value, "graph output" if main else "subgraph output")
    for value in graph.value_info:
        _check_value(value, "value")


def _subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for attribute in node.attribute:
        if attribute.HasField("g"):
            yield attribute.g
        yield from attribute.graphs


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """*graph*, then every subgraph in it at any depth."""
    stack = [graph]
    while stack:
        graph = stack.pop()
        yield graph
        stack += [sub for node in graph.node if node.attribute for sub in _subgraphs(node)]


class _Guard:
    """One walk over a parsed model: the header, every graph, every tensor and its external data.

    Only ``lstat`` and ``realpath`` touch the disk (for external data, with a folder): nothing is opened.
    Two spellings onnxruntime reads like the usual ones are normalized in the proto: a dim of -1 becomes an
    unknown dim, the domain ``ai.onnx`` becomes ``""``.
    """

    def __init__(self, proto: onnx.ModelProto, folder: pathlib.Path | None) -> None:
        self.proto = proto
        self.folder = folder
        self.domains = KNOWN_DOMAINS | {f.domain for f in proto.functions}
        self.file_sizes: dict[str, int] = {}  # external-data files already judged, by location

    def run(self) -> None:
        proto = self.proto
        if not proto.HasField("graph") or proto.ir_version == 0:
            raise _Refused("not an ONNX model (no graph or IR version in the file)")
        if not _MIN_READ_IR_VERSION <= proto.ir_version <= onnx.IR_VERSION:
            raise _Refused(f"unsupported IR version {proto.ir_version} (supported: {_MIN_READ_IR_VERSION} to "
                           f"{onnx.IR_VERSION})")
        self.opsets()
        if not proto.graph.node:
            raise _Refused("empty graph: the model has no nodes")
        if not proto.graph.output:
            raise _Refused("invalid ONNX model: the graph has no outputs")
        self.graph(proto.graph, 0)
        for function in proto.functions:
            self.nodes(function.node, 0)
        for info in proto.training_info:  # never run, but its tensors may point at files
            self.graph(info.initialization, 0)
            self.graph(info.algorithm, 0)

    def opsets(self) -> None:
        seen: set[str] = set()
        latest = onnx.defs.onnx_opset_version()
        for opset in self.proto.opset_import:
            if opset.domain == "ai.onnx":
                opset.domain = ""
            domain = opset.domain
            if domain in seen:
                raise _Refused(f"invalid ONNX model: opset of domain {opset.domain or 'ai.onnx'!r} imported twice")
            seen.add(domain)
            if domain == "" and not 1 <= opset.version <= latest:
                raise _Refused(f"unsupported opset: the model imports ai.onnx opset {opset.version}; "
                               f"supported are 1 to {latest}")
            if opset.version < 1:
                raise _Refused(f"unsupported opset: the model imports {opset.domain!r} opset {opset.version}")

    def graph(self, graph: onnx.GraphProto, depth: int) -> None:
        _check_values(graph, main=depth == 0)
        for tensor in graph.initializer:
            self.tensor(tensor, f"initializer {tensor.name!r}")
        for sparse in graph.sparse_initializer:
            self.tensor(sparse.values, f"sparse initializer {sparse.values.name!r}")
            self.tensor(sparse.indices, f"indices of sparse initializer {sparse.values.name!r}")
        self.nodes(graph.node, depth)

    def nodes(self, nodes, depth: int) -> None:
        for index, node in enumerate(nodes):
            if node.domain == "ai.onnx":  # ONNX's default domain spelled out: read as onnxruntime reads it
                node.domain = ""
            if node.domain not in self.domains:
                raise _Refused(f"unknown domain: node {_node_label(node, index)} is in domain {node.domain!r}, "
                               "which neither ONNX nor onnxruntime implements")
            for attribute in node.attribute:
                tensors = [attribute.t] if attribute.HasField("t") else []
                tensors += attribute.tensors
                sparse = [attribute.sparse_tensor] if attribute.HasField("sparse_tensor") else []
                for pair in [*sparse, *attribute.sparse_tensors]:
                    tensors += [pair.values, pair.indices]
                for tensor in tensors:
                    self.tensor(tensor, f"attribute {attribute.name!r} of node {_node_label(node, index)}")
            for sub in _subgraphs(node) if node.attribute else ():
                if depth + 1 > MAX_SUBGRAPH_DEPTH:
                    raise _Refused(f"subgraphs nested more than {MAX_SUBGRAPH_DEPTH} deep (node "
                                   f"{_node_label(node, index)})")
                self.graph(sub, depth + 1)

    def tensor(self, tensor: onnx.TensorProto, where: str) -> None:
        """Data type, dims and data size; the rest of a tensor's form is onnx's checker's."""
        if tensor.data_type not in _DATA_TYPES:
            raise _Refused(f"malformed tensor: {where} has an unknown data type {tensor.data_type}")
        for dim in tensor.dims:
            if dim < 0:
                raise _Refused(f"malformed tensor: {where} has a negative dimension ({dim})")
        elements = math.prod(tensor.dims)
        expected = _nbytes(tensor.data_type, elements)
        shape = f"{list(tensor.dims)} of {_type_name(tensor.data_type)}"
        if tensor.data_location == _T.EXTERNAL or len(tensor.external_data):
            self.external(tensor, where, expected)
        elif tensor.HasField("raw_data"):
            if expected is not None and len(tensor.raw_data) != expected:
                raise _Refused(f"malformed tensor: {where} holds {len(tensor.raw_data):,} bytes but its shape "
                               f"{shape} needs {expected:,}")
        else:
            counts = [len(getattr(tensor, field)) for field in _TYPED_FIELDS if len(getattr(tensor, field))]
            per_element = 2 if tensor.data_type in (_T.COMPLEX64, _T.COMPLEX128) else 1
            if len(counts) == 1 and (expected is None or expected >= elements):  # (sub-byte types are packed)
                if counts[0] != elements * per_element:
                    raise _Refused(f"malformed tensor: {where} holds {counts[0]:,} values but its shape {shape} "
                                   f"needs {elements * per_element:,}")

    def external(self, tensor: onnx.TensorProto, where: str, expected: int | None) -> None:
        def refuse(reason: str) -> None:
            raise _Refused(f"external data of {where} refused: {reason}")

        info: dict[str, str] = {}
        for entry in tensor.external_data:
            if entry.key in info:  # (readers disagree on which one counts)
                refuse(f"key {entry.key!r} given twice")
            info[entry.key] = entry.value
        location = info.get("location", "")
        if not location:
            refuse("no location")
        if "\0" in location:
            refuse(f"location {location!r} contains a NUL character")
        if any(marker in location for marker in _ORT_MEMORY_MARKERS):
            refuse(f"location {location!r} is onnxruntime's in-memory marker (the offset would be an address)")
        if (pathlib.PurePosixPath(location).is_absolute() or pathlib.PureWindowsPath(location).anchor
                or location.startswith("~")):
            refuse(f"location {location!r} is an absolute path; it must be relative to the model's folder")
        if ".." in location.replace("\\", "/").split("/"):
            refuse(f"location {location!r} contains '..'; it must stay inside the model's folder")
        if tensor.data_type == _T.STRING:
            refuse("string tensors cannot be stored as external data")
        offset, length = info.get("offset", "0"), info.get("length")
        for key, text in (("offset", offset), ("length", length)):
            if text is not None and not (text.isascii() and text.isdigit()):
                refuse(f"{key} {text!r} is not a non-negative integer")
            if text is not None and len(text.lstrip("0")) > 19:  # (more than any file can hold: 2**63)
                refuse(f"{key} of {len(text.lstrip('0')):,} digits is larger than any file")
        if length is not None and expected is not None and int(length) != expected:
            refuse(f"length {int(length):,} does not match its shape {list(tensor.dims)} of "
                   f"{_type_name(tensor.data_type)} ({expected:,} bytes)")
        if self.folder is None:
            return  # an in-memory model: its files are looked at when it is read from one
        size = self.file_size(location, refuse)
        start, needed = int(offset), int(length) if length is not None else (expected or 0)
        if start + needed > size:
            refuse(f"offset {start:,} + length {needed:,} is past the end of {location!r} ({size:,} bytes)")

    def file_size(self, location: str, refuse) -> int:
        """The size of an external-data file, after proving it is a regular file inside the folder."""
        if location not in self.file_sizes:
            assert self.folder is not None
            folder = os.path.realpath(self.folder)
            candidate = os.path.join(self.folder, location)
            resolved = os.path.realpath(candidate)
            if os.path.commonpath([folder, resolved]) != folder or resolved == folder:
                refuse(f"location {location!r} leaves the model's folder through a symbolic link")
            try:
                st = os.lstat(candidate)
            except (FileNotFoundError, NotADirectoryError):
                refuse(f"location {location!r} does not exist in the model's folder")
            except OSError as exc:
                refuse(f"location {location!r} cannot be examined: {exc.strerror or exc}")
            if stat.S_ISLNK(st.st_mode):
                refuse(f"location {location!r} is a symbolic link (onnx refuses them)")
            if not stat.S_ISREG(st.st_mode):
                refuse(f"location {location!r} is not a regular file")
            self.file_sizes[location] = st.st_size
        return self.file_sizes[location]


def inspect_proto(proto: onnx.ModelProto, *, folder: str | os.PathLike | None = None, label: str = "model") -> None:
    """Refuse, in one line, a model that would crash, hang or leak in later stages and that onnx's checker
    lets through: IR version and opsets, nesting depth, unknown domains, declared shapes, tensor sizes,
    external-data references (relative, no ``..``, a regular file inside *folder* after resolving symbolic
    links, offset and length inside it).  With *folder* None no file is looked at."""
    try:
        _Guard(proto, pathlib.Path(folder) if folder is not None else None).run()
    except _Refused as exc:
        raise ModelError(f"{label}: {exc}") from None


def _check_path(path: str | os.PathLike) -> tuple[pathlib.Path, os.stat_result]:
    p = pathlib.Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ModelError(f"{p}: no such file") from None
    except OSError as exc:
        raise ModelError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ModelError(f"{p}: is a directory, not an ONNX model")
    if not stat.S_ISREG(st.st_mode):
        raise ModelError(f"{p}: not a regular file (a device, FIFO or socket), refused")
    if st.st_size > MAX_PROTO_BYTES:
        raise ModelError(f"{p}: {st.st_size:,} bytes is more than one protobuf message can hold (2 GB): "
                         "store the weights as external data")
    return p, st


def read_proto(path: str | os.PathLike) -> onnx.ModelProto:
    """Parse a model file (external data not loaded) and guard it (:func:`inspect_proto`, its folder's files
    included); every failure is a one-line ModelError."""
    p, st = _check_path(path)
    if st.st_size == 0:
        raise ModelError(f"{p}: empty file, not an ONNX model")
    try:
        proto = onnx.load_model(str(p), format="protobuf", load_external_data=False)
    except OSError as exc:
        raise ModelError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except Exception as exc:  # DecodeError, and whatever else the parser raises on hostile bytes
        text = str(exc)
        if "MaxDepth" in text or "recursion" in text.lower():
            raise ModelError(f"{p}: not a valid ONNX model (protobuf parse failed: messages nested too deeply, "
                             "e.g. subgraphs inside subgraphs)") from None
        raise ModelError(f"{p}: not a valid ONNX model (protobuf parse failed: "
                         f"{text or 'truncated or corrupt'})") from None
    inspect_proto(proto, folder=p.parent, label=str(p))
    return proto


def _checker_message(exc: BaseException) -> str:
    """onnx's message on one line, its "==> Context: ... Name: n OpType: Op" as "(node 'n', Op)"."""
    text = " ".join(str(exc).split()) or "validation failed"
    message, _, context = text.partition(" ==> Context: ")
    if "Name: " in context:
        name, _, op = context.rpartition("Name: ")[2].partition(" OpType:")
        op = op.strip() or "unnamed op"
        message += f" (node {name!r}, {op})" if name else f" ({op} node)"
    return message


def validate(path: str | os.PathLike, proto: onnx.ModelProto | None = None) -> onnx.ModelProto:
    """:func:`read_proto`, then onnx's checker (given the path, it checks external data beside the model),
    then :func:`check_inferred_shapes`.  *proto*: the file as :func:`read_proto` already returned it.

    Not ``full_check``: its strict shape inference refuses models onnxruntime loads (a declared output
    shape that disagrees with the inferred one is a warning to onnxruntime).
    """
    p, _ = _check_path(path)
    progress.notify("model", str(p))
    if proto is None:
        proto = read_proto(p)
    try:
        onnx.checker.check_model(str(p), full_check=False)
    except Exception as exc:  # ValidationError, and whatever else the checker raises on hostile input
        if lenient.only_default_domain_refused(exc, proto):
            check_inferred_shapes(proto, str(p))
            return proto
        kind = "" if isinstance(exc, onnx.checker.ValidationError) else f"{type(exc).__name__}: "
        refusal = ModelError(f"{p}: invalid ONNX model: {kind}{_checker_message(exc)}")
        if not any(text in str(exc) for text in lenient.CHECKS):
            raise refusal from None
        check_inferred_shapes(proto, str(p))
        if not _onnxruntime_loads(p, proto):
            raise refusal from None
        logging.getLogger("mobile_ep").warning(
            "%s: onnx's checker refuses the model (%s), but onnxruntime loads it: continuing as onnxruntime "
            "reads it", p, _checker_message(exc))
        return proto
    check_inferred_shapes(proto, str(p))
    return proto


def _onnxruntime_loads(path: pathlib.Path, proto: onnx.ModelProto) -> bool:
    """Whether an onnxruntime session (no optimizations, never run) accepts the model: for files onnx's
    checker refuses but onnxruntime does not (no shape field, an explicit ``ai.onnx`` domain, IR 3
    initializers not listed as inputs ...)."""
    from mobile_ep import sessions

    so = sessions.options(level="disable", log=4)
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    source: str | bytes = str(path)
    if proto.ir_version > MAX_IR_VERSION:  # (as bytes with the IR version onnxruntime reads)
        lowered = onnx.ModelProto.FromString(proto.SerializeToString())
        lowered.ir_version = MAX_IR_VERSION
        so.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                    str(pathlib.Path(path).parent.resolve()))
        source = lowered.SerializeToString()
    try:
        sessions.open_session(source, so)
    except Exception:
        return False
    return True


#: Initializers larger than this go to ONNX's shape inference as inputs, without their data (onnx_ir's rule).
_INFERENCE_DATA_MAX_BYTES = 1000


def _inferred(proto: onnx.ModelProto, *, data_prop: bool) -> onnx.ModelProto:
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
        if tensor.data_location != _T.EXTERNAL and tensor.ByteSize() <= _INFERENCE_DATA_MAX_BYTES:
            graph.initializer.append(tensor)
    return onnx.shape_inference.infer_shapes(skeleton, check_type=False, strict_mode=False, data_prop=data_prop)


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


def check_inferred_shapes(proto: onnx.ModelProto, label: str = "model") -> None:
    """Refuse values whose *inferred* shape is absurd (e.g. ConstantOfShape of 10^12 elements).

    onnxruntime folds constants while it loads a model: a tiny file could make it allocate terabytes.
    ONNX shape inference with data propagation (the model without its large weights) finds them first.
    """
    try:
        inferred = _inferred(proto, data_prop=True)
    except Exception as exc:
        raise ModelError(f"{label}: invalid ONNX model: shape inference failed: {_checker_message(exc)}") from None
    try:  # (inputs were declared, and checked as such: here large initializers are inputs too)
        for index, graph in enumerate(_graphs(inferred.graph)):
            _check_values(graph, main=index == 0, inputs=False)
    except _Refused as exc:
        raise ModelError(f"{label}: {exc}") from None


# --------------------------------------------------------------------------------------------------
# The IR
# --------------------------------------------------------------------------------------------------
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
    if elements > MAX_ELEMENTS or (_nbytes(sparse.values.data_type, elements) or 0) > MAX_VALUE_BYTES:
        raise _Refused(f"absurd shape: sparse initializer {sparse.values.name!r} would have {elements:,} elements")
    if indices.ndim == 2 and len(dims) > 0:  # [NNZ, rank] coordinates
        indices = np.ravel_multi_index(tuple(indices.T), dims) if indices.size else indices.reshape(-1)
    indices = indices.reshape(-1)
    if indices.size != values.size or (indices.size and (indices.min() < 0 or indices.max() >= elements)):
        raise _Refused(f"malformed tensor: sparse initializer {sparse.values.name!r} has indices outside its "
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
    sparse = any(len(graph.sparse_initializer) for graph in _graphs(proto.graph))
    maps = any(_has_map(value.type) for graph in _graphs(proto.graph)
               for value in [*graph.input, *graph.output, *graph.value_info])
    if not sparse and not maps:
        return proto
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    try:
        for graph in _graphs(copy.graph):
            graph.initializer.extend(_dense(sparse) for sparse in graph.sparse_initializer)
            del graph.sparse_initializer[:]
            for value in [*graph.input, *graph.output, *graph.value_info]:
                if _has_map(value.type):
                    value.ClearField("type")
    except _Refused as exc:
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
            _take_shapes(model, _inferred(proto, data_prop=False))
        except Exception as exc:
            _shape_inference_failed(exc)
    NameFixPass()(model)
    return model


def load(path: str | os.PathLike, *, shapes: bool = True, check: bool = True) -> ir.Model:
    """Load a model file into the IR (:func:`read_proto`, then :func:`validate` when *check*)."""
    p, _ = _check_path(path)
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
            if tensor is not None and tensor.nbytes <= _INFERENCE_DATA_MAX_BYTES:
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


# --------------------------------------------------------------------------------------------------
# Saving
# --------------------------------------------------------------------------------------------------
def target_ir_version(model: ir.Model) -> int:
    """The IR version to write: what the opsets need, at least 4, at most what onnxruntime accepts."""
    opsets = [onnx.helper.make_opsetid(d, v) for d, v in model.opset_imports.items()]
    try:
        needed = onnx.helper.find_min_ir_version_for(opsets, ignore_unknown=True)
    except Exception:
        needed = _MIN_IR_VERSION
    current = model.ir_version or _MIN_IR_VERSION
    return min(max(needed, _MIN_IR_VERSION, min(current, MAX_IR_VERSION)), MAX_IR_VERSION)


def prepare_for_save(model: ir.Model) -> ir.Model:
    """Fix what onnxruntime would reject: IR version, initializers listed as inputs (IR 3), order, names."""
    if (model.ir_version or 0) < 4:
        # Under IR 3 initializers must be graph inputs and are constants; from IR 4 on that would make
        # them overridable.  Dropping them from the inputs keeps their meaning.
        # ORT's optimizer may also drop a folded initializer yet keep its IR 3 input entry: an unused input
        # that was never meant to be fed.
        for graph in model.graphs():
            for value in list(graph.inputs):
                if value.is_initializer() or (not value.uses() and not value.is_graph_output()):
                    graph.inputs.remove(value)
    model.ir_version = target_ir_version(model)
    for graph in model.graphs():
        if not _topologically_sorted(graph):  # an order that is valid is kept: the file reads as analyzed
            graph.sort()
    NameFixPass()(model)
    return model


def _topologically_sorted(graph: ir.Graph) -> bool:
    """Whether every node comes after the producers of its inputs (values from outer graphs aside)."""
    seen: set[int] = set()
    inside = {id(node) for node in graph}
    for node in graph:
        for value in node.inputs:
            producer = value.producer() if value is not None else None
            if producer is not None and id(producer) in inside and id(producer) not in seen:
                return False
        seen.add(id(node))
    return True


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike, *, make_parent: bool = True) -> Iterator[pathlib.Path]:
    """Yield a temporary path beside *target*; on success it replaces *target* in one rename.  Unless
    *make_parent*, a missing folder is an error (a writer on a thread must not bring back a removed one)."""
    target = pathlib.Path(target)
    if make_parent:
        target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = pathlib.Path(tmp)
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp_path, 0o666 & ~mask)  # mkstemp makes 0600; outputs get the usual umask-based mode
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()


def _has_large_strings(model: ir.Model) -> bool:
    return any(value.const_value is not None and value.const_value.dtype == ir.DataType.STRING
               and value.const_value.nbytes >= 256 for graph in model.graphs() for value in graph.initializers.values())


def save(model: ir.Model, path: str | os.PathLike, *, external_data: str | None = None) -> pathlib.Path:
    """Save atomically (:func:`prepare_for_save` first), weights inside the file up to
    :data:`SINGLE_FILE_MAX_BYTES`, beyond it (or when *external_data* names a file) in ``<name>.data``
    beside it, which onnx_ir writes first, atomically too."""
    path = pathlib.Path(path)
    prepare_for_save(model)
    total = sum(value.const_value.nbytes for graph in model.graphs() for value in graph.initializers.values()
                if value.const_value is not None)
    if external_data is None and total > SINGLE_FILE_MAX_BYTES:
        external_data = path.name + ".data"
    with atomic_path(path) as tmp:
        if external_data is not None and _has_large_strings(model):
            # onnx_ir would move string tensors to the data file, which cannot hold them; onnx keeps them inline
            onnx.save_model(ir.serde.serialize_model(model), tmp, save_as_external_data=True,
                            all_tensors_to_one_file=True, location=external_data, size_threshold=256)
        elif external_data is not None:
            ir.save(model, tmp, external_data=external_data)
        else:  # external weights (memory-mapped from other files) are read in for the call, then put back
            values = [value for graph in model.graphs() for value in graph.initializers.values()]
            tensors = [value.const_value for value in values]
            try:
                ir.external_data.load_to_model(model)
                ir.save(model, tmp)
            finally:
                for value, tensor in zip(values, tensors, strict=True):
                    value.const_value = tensor
    return path
