"""The guard: a model file read and parsed (external data not loaded), then refused in one line if it would
crash, hang or leak in later stages and onnx's checker lets it through: files that cannot be one protobuf
message, subgraphs nested too deep, declared shapes too large to allocate, external data outside the model's
folder or past the end of its file.  The guard runs before anything opens a file the model refers to."""

from __future__ import annotations

import math
import os
import pathlib
import stat

import onnx

from mobile_ep.errors import ModelError
from mobile_ep.model_io.protos import DATA_TYPES, nbytes, node_label, subgraphs, type_name

__all__ = ["MAX_ELEMENTS", "MAX_VALUE_BYTES", "MAX_SUBGRAPH_DEPTH", "MAX_PROTO_BYTES", "KNOWN_DOMAINS", "Refused",
           "check_values", "inspect_proto", "check_path", "read_proto"]

_MIN_READ_IR_VERSION = 3  # ONNX 1.1; the checker refuses older files with opset imports anyway

#: A declared or inferred tensor value (not stored data) with more elements than this is refused.
MAX_ELEMENTS = 2**31
#: ... and so is one of more bytes than this (2 GiB: more than protobuf, a phone or ORT Mobile handle).
MAX_VALUE_BYTES = 2**31
#: Subgraphs (If/Loop/Scan bodies) nested deeper than this are refused.
MAX_SUBGRAPH_DEPTH = 16
#: A model file larger than this cannot be one protobuf message: weights must be external data.
MAX_PROTO_BYTES = 2**31 - 1

#: Domains onnxruntime implements (a node in any other domain cannot load without a custom-op library).
KNOWN_DOMAINS = frozenset({
    "", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training", "ai.onnx.training",
    "com.microsoft", "com.microsoft.nchwc", "com.microsoft.experimental", "com.ms.internal.nhwc",
    "org.pytorch.aten",
})

# onnxruntime reads a tensor from *memory* (offset = address) when its location is one of these markers.
_ORT_MEMORY_MARKERS = ("_ORT_MEM_ADDR_", "__ORT_MEM_ADDR__")

_T = onnx.TensorProto
_TYPED_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")


class Refused(Exception):
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
    if elem_type and elem_type not in DATA_TYPES:
        raise Refused(f"invalid ONNX model: {what} {value.name!r} has an unknown element type {elem_type}")
    elements = 1
    for d in tensor_type.shape.dim:
        dim = d.dim_value  # (0 when unset: a dim_param or nothing)
        if dim > 0:
            elements *= dim
        elif dim == -1:  # "unknown", as exporters (paddle2onnx, older tf2onnx) write it and ORT reads it
            d.ClearField("dim_value")
        elif dim < 0:
            raise Refused(f"absurd shape: {what} {value.name!r} has a negative dimension ({dim})")
        elif d.HasField("dim_value"):
            elements = 0
    if elements > MAX_VALUE_BYTES // 16 and (  # (below, any type fits: 16 bytes an element at most)
            elements > MAX_ELEMENTS or (nbytes(elem_type, elements) or 0) > MAX_VALUE_BYTES):
        raise Refused(f"absurd shape: {what} {value.name!r} would have {elements:,} elements "
                       f"({type_name(elem_type)}); at most {MAX_ELEMENTS:,} elements and {MAX_VALUE_BYTES:,} "
                       "bytes are accepted")


def check_values(graph: onnx.GraphProto, main: bool, inputs: bool = True) -> None:
    for value in graph.input if inputs else ():
        _check_value(value, "graph input" if main else "subgraph input")
    for value in graph.output:
        _check_value(value, "graph output" if main else "subgraph output")
    for value in graph.value_info:
        _check_value(value, "value")


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
            raise Refused("not an ONNX model (no graph or IR version in the file)")
        if not _MIN_READ_IR_VERSION <= proto.ir_version <= onnx.IR_VERSION:
            raise Refused(f"unsupported IR version {proto.ir_version} (supported: {_MIN_READ_IR_VERSION} to "
                           f"{onnx.IR_VERSION})")
        self.opsets()
        if not proto.graph.node:
            raise Refused("empty graph: the model has no nodes")
        if not proto.graph.output:
            raise Refused("invalid ONNX model: the graph has no outputs")
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
                raise Refused(f"invalid ONNX model: opset of domain {opset.domain or 'ai.onnx'!r} imported twice")
            seen.add(domain)
            if domain == "" and not 1 <= opset.version <= latest:
                raise Refused(f"unsupported opset: the model imports ai.onnx opset {opset.version}; "
                               f"supported are 1 to {latest}")
            if opset.version < 1:
                raise Refused(f"unsupported opset: the model imports {opset.domain!r} opset {opset.version}")

    def graph(self, graph: onnx.GraphProto, depth: int) -> None:
        check_values(graph, main=depth == 0)
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
                raise Refused(f"unknown domain: node {node_label(node, index)} is in domain {node.domain!r}, "
                               "which neither ONNX nor onnxruntime implements")
            for attribute in node.attribute:
                tensors = [attribute.t] if attribute.HasField("t") else []
                tensors += attribute.tensors
                sparse = [attribute.sparse_tensor] if attribute.HasField("sparse_tensor") else []
                for pair in [*sparse, *attribute.sparse_tensors]:
                    tensors += [pair.values, pair.indices]
                for tensor in tensors:
                    self.tensor(tensor, f"attribute {attribute.name!r} of node {node_label(node, index)}")
            for sub in subgraphs(node) if node.attribute else ():
                if depth + 1 > MAX_SUBGRAPH_DEPTH:
                    raise Refused(f"subgraphs nested more than {MAX_SUBGRAPH_DEPTH} deep (node "
                                   f"{node_label(node, index)})")
                self.graph(sub, depth + 1)

    def tensor(self, tensor: onnx.TensorProto, where: str) -> None:
        """Data type, dims and data size; the rest of a tensor's form is onnx's checker's."""
        if tensor.data_type not in DATA_TYPES:
            raise Refused(f"malformed tensor: {where} has an unknown data type {tensor.data_type}")
        for dim in tensor.dims:
            if dim < 0:
                raise Refused(f"malformed tensor: {where} has a negative dimension ({dim})")
        elements = math.prod(tensor.dims)
        expected = nbytes(tensor.data_type, elements)
        shape = f"{list(tensor.dims)} of {type_name(tensor.data_type)}"
        if tensor.data_location == _T.EXTERNAL or len(tensor.external_data):
            self.external(tensor, where, expected)
        elif tensor.HasField("raw_data"):
            if expected is not None and len(tensor.raw_data) != expected:
                raise Refused(f"malformed tensor: {where} holds {len(tensor.raw_data):,} bytes but its shape "
                               f"{shape} needs {expected:,}")
        else:
            counts = [len(getattr(tensor, field)) for field in _TYPED_FIELDS if len(getattr(tensor, field))]
            per_element = 2 if tensor.data_type in (_T.COMPLEX64, _T.COMPLEX128) else 1
            if len(counts) == 1 and (expected is None or expected >= elements):  # (sub-byte types are packed)
                if counts[0] != elements * per_element:
                    raise Refused(f"malformed tensor: {where} holds {counts[0]:,} values but its shape {shape} "
                                   f"needs {elements * per_element:,}")

    def external(self, tensor: onnx.TensorProto, where: str, expected: int | None) -> None:
        def refuse(reason: str) -> None:
            raise Refused(f"external data of {where} refused: {reason}")

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
                   f"{type_name(tensor.data_type)} ({expected:,} bytes)")
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
    except Refused as exc:
        raise ModelError(f"{label}: {exc}") from None


def check_path(path: str | os.PathLike) -> tuple[pathlib.Path, os.stat_result]:
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
    p, st = check_path(path)
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
