"""Loading, validating and saving models: the only module (with the exporters) touching ONNX protobufs.

Models live in memory as ``onnx_ir.Model``; external weights stay memory-mapped (onnx_ir's lazy
external tensors) and are never copied.  Every error a user can cause ends in a one-line
:class:`mobile_ep.ModelError`.

Files are treated as hostile: :func:`read_proto` parses and inspects the whole protobuf (structure,
shapes, tensors, external-data locations confined to the model's folder) before onnx's checker,
onnxruntime or onnx_ir open the file or anything it refers to, and every loader here calls it itself.
Saving is atomic (:func:`atomic_path`) and deterministic (:func:`canonicalize_ort_file` for ORT format).
"""

from __future__ import annotations

import contextlib
import functools
import math
import mmap
import os
import pathlib
import re
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import onnx
import onnx_ir as ir
from onnx_ir.passes.common import NameFixPass

from mobile_ep.errors import ModelError

__all__ = [
    "MAX_IR_VERSION",
    "load",
    "from_proto",
    "to_proto",
    "save",
    "infer_shapes",
    "ort_optimized",
    "OPTIMIZED_DATA",
    "UnwrittenWeights",
    "inline_small_weights",
    "target_ir_version",
    "atomic_path",
    "read_proto",
    "validate",
    "inspect_proto",
    "check_inferred_shapes",
    "prepare_for_save",
    "MAX_ELEMENTS",
    "MAX_VALUE_BYTES",
    "MAX_SUBGRAPH_DEPTH",
    "KNOWN_DOMAINS",
    "ort_model_source",
    "ort_format_fits",
    "SINGLE_FILE_MAX_BYTES",
    "canonicalize_ort_file",
    "lean_session_options",
    "release_memory",
]

#: Highest ONNX IR version onnxruntime 1.31 accepts (recent onnx releases write 14 by default).
MAX_IR_VERSION = 13
_MIN_IR_VERSION = 4  # IR 3 lists initializers as inputs; we always write 4+ with them removed.


# --------------------------------------------------------------------------------------------------
# Reading a model file: every structural problem becomes one line, before anything else opens it
# --------------------------------------------------------------------------------------------------
#: A declared or inferred tensor value (not stored data) with more elements than this is refused.
MAX_ELEMENTS = 2**31
#: ... and so is one of more bytes than this (2 GiB: more than protobuf, a phone or ORT Mobile handle).
MAX_VALUE_BYTES = 2**31
#: Subgraphs (If/Loop/Scan bodies) nested deeper than this are refused.
MAX_SUBGRAPH_DEPTH = 16
#: A model file larger than this cannot be one protobuf message: weights must be external data.
MAX_PROTO_BYTES = 2**31 - 1
_MIN_READ_IR_VERSION = 3  # ONNX 1.1; the checker refuses older files with opset imports anyway

#: Domains onnxruntime implements (a node in any other domain cannot load without a custom-op library).
KNOWN_DOMAINS = frozenset({
    "", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training", "ai.onnx.training",
    "com.microsoft", "com.microsoft.nchwc", "com.microsoft.experimental", "com.ms.internal.nhwc",
    "org.pytorch.aten",
})

# onnxruntime reads a tensor from *memory* (offset = address) when its location is one of these markers.
_ORT_MEMORY_MARKERS = ("_ORT_MEM_ADDR_", "__ORT_MEM_ADDR__")

_T = onnx.TensorProto
_ITEMSIZE = {
    _T.FLOAT: 4, _T.UINT8: 1, _T.INT8: 1, _T.UINT16: 2, _T.INT16: 2, _T.INT32: 4, _T.INT64: 8, _T.BOOL: 1,
    _T.FLOAT16: 2, _T.DOUBLE: 8, _T.UINT32: 4, _T.UINT64: 8, _T.COMPLEX64: 8, _T.COMPLEX128: 16, _T.BFLOAT16: 2,
}
for _name in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "FLOAT8E8M0"):
    if hasattr(_T, _name):
        _ITEMSIZE[getattr(_T, _name)] = 1
#: Sub-byte types: bits per element (packed in raw_data).
_BITS = {getattr(_T, n): b for n, b in (("UINT4", 4), ("INT4", 4), ("FLOAT4E2M1", 4), ("UINT2", 2), ("INT2", 2),
                                        ("FLOAT6E2M3", 6), ("FLOAT6E3M2", 6)) if hasattr(_T, n)}
_DATA_TYPES = frozenset(v.number for v in _T.DataType.DESCRIPTOR.values) - {_T.UNDEFINED}
# Which typed field holds which data type, and how many entries one element takes there.
_TYPED_FIELDS = {
    "float_data": {_T.FLOAT: 1, _T.COMPLEX64: 2},
    "int32_data": {t: 1 for t in (_T.INT32, _T.INT16, _T.INT8, _T.UINT16, _T.UINT8, _T.BOOL, _T.FLOAT16,
                                  _T.BFLOAT16, *[t for t, s in _ITEMSIZE.items() if s == 1])},
    "string_data": {_T.STRING: 1},
    "int64_data": {_T.INT64: 1},
    "double_data": {_T.DOUBLE: 1, _T.COMPLEX128: 2},
    "uint64_data": {_T.UINT32: 1, _T.UINT64: 1},
}
for _t in _BITS:  # packed sub-byte types may use int32_data (not counted: the packing varies)
    _TYPED_FIELDS["int32_data"][_t] = 0


def _type_name(data_type: int) -> str:
    try:
        return _T.DataType.Name(data_type)
    except ValueError:
        return str(data_type)


def _nbytes(data_type: int, elements: int) -> int | None:
    """Bytes *elements* values of *data_type* take in raw_data / external data (None: variable size)."""
    if data_type in _ITEMSIZE:
        return elements * _ITEMSIZE[data_type]
    if data_type in _BITS:
        return (elements * _BITS[data_type] + 7) // 8
    return None


def _shape_text(tensor: onnx.TensorProto) -> str:
    return f"{list(tensor.dims)} of {_type_name(tensor.data_type)}"


def _node_label(node: onnx.NodeProto, index: int) -> str:
    op = f"{node.domain}:{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type
    return f"{node.name!r} ({op})" if node.name else f"#{index} ({op})"


class _Inspector:
    """One pass over a parsed ModelProto that refuses what would crash, hang or mislead later stages.

    Pure except for ``lstat``/``realpath`` of external-data locations: nothing is opened.
    """

    def __init__(self, proto: onnx.ModelProto, folder: pathlib.Path | None, unwritten: str | None = None) -> None:
        self.proto = proto
        self.folder = folder
        self.unwritten = unwritten  # an external-data location whose file was never written (not looked for)
        self.function_domains = {f.domain for f in proto.functions}
        self._file_sizes: dict[str, int] = {}
        self._locations: set[str] = set()  # external-data locations already found acceptable

    def fail(self, message: str) -> None:
        raise _Refused(message)

    # -- header ------------------------------------------------------------------------------------
    def header(self) -> None:
        proto = self.proto
        if not proto.HasField("graph") or proto.ir_version == 0:
            self.fail("not an ONNX model (no graph or IR version in the file)")
        if not _MIN_READ_IR_VERSION <= proto.ir_version <= onnx.IR_VERSION:
            self.fail(f"unsupported IR version {proto.ir_version} (supported: {_MIN_READ_IR_VERSION} to "
                      f"{onnx.IR_VERSION})")
        if not proto.opset_import:
            self.fail("invalid ONNX model: it imports no opset")
        seen: set[str] = set()
        latest = onnx.defs.onnx_opset_version()
        for opset in proto.opset_import:
            domain = "" if opset.domain == "ai.onnx" else opset.domain
            if domain in seen:
                self.fail(f"invalid ONNX model: opset of domain {opset.domain or 'ai.onnx'!r} imported twice")
            seen.add(domain)
            if domain == "" and not 1 <= opset.version <= latest:
                self.fail(f"unsupported opset: the model imports ai.onnx opset {opset.version}; "
                          f"supported are 1 to {latest}")
            if opset.version < 1:
                self.fail(f"unsupported opset: the model imports {opset.domain!r} opset {opset.version}")
        if "" not in seen and any(not n.domain or n.domain == "ai.onnx" for n in proto.graph.node):
            self.fail("invalid ONNX model: it uses ai.onnx ops but does not import the ai.onnx opset")

    # -- graphs ------------------------------------------------------------------------------------
    def model(self) -> None:
        graph = self.proto.graph
        if not graph.node:
            self.fail("empty graph: the model has no nodes")
        if not graph.output:
            self.fail("invalid ONNX model: the graph has no outputs")
        self.graph(graph, [], 0, main=True)
        for function in self.proto.functions:
            self.function(function)
        self.function_recursion()
        for info in self.proto.training_info:  # not run, but its tensors may point at files
            for g in (info.initialization, info.algorithm):
                self.graph(g, [], 0, main=False, structure=False)

    def graph(self, graph: onnx.GraphProto, outer: list[set[str]], depth: int, *, main: bool,
              structure: bool = True) -> set[str]:
        """Check one graph; returns the outer-scope names it reads."""
        where = f"graph {graph.name!r}" if graph.name else "a graph"
        defined: set[str] = set()

        def define(name: str, what: str) -> None:
            if name in defined:
                self.fail(f"invalid ONNX model: {where}: {what} {name!r} is defined more than once")
            defined.add(name)

        inputs = set()
        for value in graph.input:
            self.value_info(value, "graph input" if main else "subgraph input")
            define(value.name, "input")
            inputs.add(value.name)
        for tensor in graph.initializer:
            self.tensor(tensor, f"initializer {tensor.name!r}")
            if tensor.name not in inputs:  # an initializer may give an input its default value
                define(tensor.name, "initializer")
        for sparse in graph.sparse_initializer:
            self.tensor(sparse.values, f"sparse initializer {sparse.values.name!r}")
            self.tensor(sparse.indices, f"indices of sparse initializer {sparse.values.name!r}")
            if sparse.values.name not in inputs:
                define(sparse.values.name, "initializer")
        for value in graph.value_info:
            self.value_info(value, "value")
        for value in graph.output:
            self.value_info(value, "graph output" if main else "subgraph output")
        producer: dict[str, int] = {}
        for index, node in enumerate(graph.node):
            if not node.op_type:
                self.fail(f"invalid ONNX model: {where}: node {node.name!r} has no op type")
            if node.domain not in KNOWN_DOMAINS and node.domain not in self.function_domains:
                self.fail(f"unknown domain: node {_node_label(node, index)} is in domain {node.domain!r}, "
                          "which neither ONNX nor onnxruntime implements")
            for name in node.output:
                if name:
                    define(name, "value")
                    producer[name] = index
        scope = [*outer, defined]
        free: set[str] = set()
        edges: list[list[int]] = [[] for _ in graph.node]
        indegree = [0] * len(graph.node)
        for index, node in enumerate(graph.node):
            reads = [name for name in node.input if name]
            for attribute in node.attribute:
                self.attribute(attribute, node, index)
                subgraphs = [attribute.g] if attribute.HasField("g") else []
                subgraphs += list(attribute.graphs)
                for sub in subgraphs:
                    if depth + 1 > MAX_SUBGRAPH_DEPTH:
                        self.fail(f"subgraphs nested more than {MAX_SUBGRAPH_DEPTH} deep (node "
                                  f"{_node_label(node, index)})")
                    reads += sorted(self.graph(sub, scope, depth + 1, main=False, structure=structure))
            if not structure:
                continue
            for name in dict.fromkeys(reads):
                if name in producer:
                    if producer[name] == index and name in node.output:
                        self.fail(f"invalid ONNX model: {where} has a cycle: node {_node_label(node, index)} "
                                  f"reads its own output {name!r}")
                    edges[producer[name]].append(index)
                    indegree[index] += 1
                elif name in defined:
                    continue
                elif any(name in names for names in outer):
                    free.add(name)
                else:
                    self.fail(f"invalid ONNX model: {where}: node {_node_label(node, index)} reads {name!r}, "
                              "which is never defined")
        if not structure:
            return free
        for value in graph.output:
            if value.name in defined:
                continue
            if any(value.name in names for names in outer):
                free.add(value.name)
            else:
                self.fail(f"invalid ONNX model: {where}: output {value.name!r} is never defined")
        self.acyclic(graph, edges, indegree, where)
        return free

    def acyclic(self, graph: onnx.GraphProto, edges: list[list[int]], indegree: list[int], where: str) -> None:
        ready = [i for i, d in enumerate(indegree) if d == 0]
        done = 0
        while ready:
            i = ready.pop()
            done += 1
            for j in edges[i]:
                indegree[j] -= 1
                if indegree[j] == 0:
                    ready.append(j)
        if done < len(indegree):
            stuck = [i for i, d in enumerate(indegree) if d > 0]
            names = ", ".join(_node_label(graph.node[i], i) for i in stuck[:3])
            more = f" and {len(stuck) - 3} more" if len(stuck) > 3 else ""
            self.fail(f"invalid ONNX model: {where} has a cycle through nodes {names}{more}")

    def function(self, function: onnx.FunctionProto) -> None:
        graph = onnx.GraphProto(name=f"function {function.name}")
        graph.node.extend(function.node)
        graph.input.extend(onnx.ValueInfoProto(name=n) for n in function.input)
        graph.output.extend(onnx.ValueInfoProto(name=n) for n in function.output)
        self.graph(graph, [], 0, main=False)

    def function_recursion(self) -> None:
        functions = {(f.domain, f.name, f.overload): f for f in self.proto.functions}
        calls = {key: {(n.domain, n.op_type, n.overload) for n in f.node} & functions.keys()
                 for key, f in functions.items()}
        state: dict[tuple, int] = {}

        def visit(key: tuple) -> None:  # iterative DFS would be overkill: at most len(functions) deep
            state[key] = 1
            for callee in sorted(calls[key]):
                if state.get(callee) == 1:
                    self.fail(f"invalid ONNX model: model-local function {callee[1]!r} calls itself "
                              "(recursion is not allowed)")
                if callee not in state:
                    visit(callee)
            state[key] = 2

        for key in sorted(functions):
            if key not in state:
                visit(key)

    # -- values, attributes, tensors -----------------------------------------------------------------
    def value_info(self, value: onnx.ValueInfoProto, what: str) -> None:
        type_proto = value.type
        while True:
            kind = type_proto.WhichOneof("value")
            if kind in ("tensor_type", "sparse_tensor_type"):
                tensor_type = getattr(type_proto, kind)
                break
            if kind == "sequence_type":
                type_proto = type_proto.sequence_type.elem_type
            elif kind == "optional_type":
                type_proto = type_proto.optional_type.elem_type
            elif kind == "map_type":
                type_proto = type_proto.map_type.value_type
            else:
                return
        if tensor_type.elem_type and tensor_type.elem_type not in _DATA_TYPES:
            self.fail(f"invalid ONNX model: {what} {value.name!r} has an unknown element type "
                      f"{tensor_type.elem_type}")
        if not tensor_type.HasField("shape"):
            return
        self.shape(tensor_type.elem_type, [d.dim_value if d.HasField("dim_value") else None
                                           for d in tensor_type.shape.dim], what, value.name)

    def shape(self, elem_type: int, dims: list[int | None], what: str, name: str) -> None:
        """Refuse a negative or absurd declared shape of the value *name* (*what*: its kind)."""
        elements = 1
        for dim in dims:
            if dim is None:
                continue
            if dim < 0:
                self.fail(f"absurd shape: {what} {name!r} has a negative dimension ({dim})")
            elements *= dim
        nbytes = _nbytes(elem_type, elements) or 0
        if elements > MAX_ELEMENTS or nbytes > MAX_VALUE_BYTES:
            self.fail(f"absurd shape: {what} {name!r} would have {elements:,} elements ({_type_name(elem_type)}); "
                      f"at most {MAX_ELEMENTS:,} elements and {MAX_VALUE_BYTES:,} bytes are accepted")

    def attribute(self, attribute: onnx.AttributeProto, node: onnx.NodeProto, index: int) -> None:
        if not (attribute.HasField("t") or attribute.tensors or attribute.HasField("sparse_tensor")
                or attribute.sparse_tensors):
            return  # most attributes hold no tensor: their label is only worth building for one that does
        where = f"attribute {attribute.name!r} of node {_node_label(node, index)}"
        if attribute.HasField("t"):
            self.tensor(attribute.t, where)
        for tensor in attribute.tensors:
            self.tensor(tensor, where)
        if attribute.HasField("sparse_tensor"):
            self.tensor(attribute.sparse_tensor.values, where)
            self.tensor(attribute.sparse_tensor.indices, where)
        for sparse in attribute.sparse_tensors:
            self.tensor(sparse.values, where)
            self.tensor(sparse.indices, where)

    def tensor(self, tensor: onnx.TensorProto, where: str) -> None:
        data_type = tensor.data_type
        if data_type not in _DATA_TYPES:
            self.fail(f"malformed tensor: {where} has an unknown data type {data_type}")
        elements = 1
        for dim in tensor.dims:
            if dim < 0:
                self.fail(f"malformed tensor: {where} has a negative dimension ({dim})")
            elements *= dim
        external = tensor.data_location == _T.EXTERNAL or len(tensor.external_data) > 0
        if external:
            self.external(tensor, where, elements)
            return
        expected = _nbytes(data_type, elements)
        filled = [f for f in _TYPED_FIELDS if len(getattr(tensor, f))]
        has_raw = tensor.HasField("raw_data")
        if len(filled) + has_raw > 1:
            self.fail(f"malformed tensor: {where} stores its data in more than one field "
                      f"({', '.join(filled + (['raw_data'] if has_raw else []))})")
        if has_raw:
            if expected is None:
                self.fail(f"malformed tensor: {where}: {_type_name(data_type)} data cannot be raw bytes")
            size = len(tensor.raw_data)
            if size != expected:
                self.fail(f"malformed tensor: {where} holds {size:,} bytes but its shape "
                          f"{_shape_text(tensor)} needs {expected:,}")
        elif filled:
            field = filled[0]
            per_element = _TYPED_FIELDS[field].get(data_type)
            if per_element is None:
                self.fail(f"malformed tensor: {where}: {_type_name(data_type)} data stored in {field}")
            count = len(getattr(tensor, field))
            if per_element and count != elements * per_element:
                self.fail(f"malformed tensor: {where} holds {count:,} values but its shape "
                          f"{_shape_text(tensor)} needs {elements * per_element:,}")
        elif elements:
            self.fail(f"malformed tensor: {where} has shape {_shape_text(tensor)} but holds no data")

    def external(self, tensor: onnx.TensorProto, where: str, elements: int) -> None:
        def refuse(reason: str) -> None:
            self.fail(f"external data of {where} refused: {reason}")

        info: dict[str, str] = {}
        for entry in tensor.external_data:
            if entry.key in info:
                refuse(f"key {entry.key!r} given twice")
            info[entry.key] = entry.value
        location = info.get("location", "")
        if location not in self._locations:  # tensors share a few files: each name is judged once
            self.location(location, refuse)
            self._locations.add(location)
        if tensor.data_type == _T.STRING:
            refuse("string tensors cannot be stored as external data")
        offset = info.get("offset", "0")
        length = info.get("length")
        for key, text in (("offset", offset), ("length", length)):
            if text is not None and not (text.isascii() and text.isdigit()):
                refuse(f"{key} {text!r} is not a non-negative integer")
        expected = _nbytes(tensor.data_type, elements)
        if length is not None and expected is not None and int(length) != expected:
            refuse(f"length {int(length):,} does not match its shape {list(tensor.dims)} of "
                   f"{_type_name(tensor.data_type)} ({expected:,} bytes)")
        if self.folder is None or location == self.unwritten:
            return  # an in-memory model, or weights onnxruntime did not write: nothing is read from disk here
        size = self.external_file(location, refuse)
        start = int(offset)
        needed = int(length) if length is not None else (expected or 0)
        if start > size or start + needed > size:
            refuse(f"offset {start:,} + length {needed:,} is past the end of {location!r} ({size:,} bytes)")

    @staticmethod
    def location(location: str, refuse) -> None:
        """Refuse an external-data location that is not a plain path relative to the model's folder."""
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

    def external_file(self, location: str, refuse) -> int:
        """The size of an external-data file, after proving it is a regular file inside the folder."""
        if location in self._file_sizes:
            return self._file_sizes[location]
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
        self._file_sizes[location] = st.st_size
        return st.st_size


class _Refused(Exception):
    pass


def inspect_proto(proto: onnx.ModelProto, *, folder: str | os.PathLike | None = None, label: str = "model") -> None:
    """Refuse, with a one-line :class:`ModelError`, a model that would crash, hang or leak in later stages.

    Checks the header (IR version, opsets), every graph and subgraph (SSA names, undefined inputs, cycles,
    nesting depth, unknown domains, recursive functions), declared shapes (negative or absurd), every
    tensor (data type, dims, data size) and every external-data reference: relative, no ``..``, a
    regular file inside *folder* (after resolving symlinks), offset and length inside the file.  Only
    ``lstat`` and ``realpath`` touch the disk: nothing is opened.  With *folder* None external files are
    not looked at (the other external-data rules still apply).
    """
    _inspect(proto, folder, label)


def _inspect(proto: onnx.ModelProto, folder: str | os.PathLike | None, label: str,
             unwritten: str | None = None) -> _Inspector:
    inspector = _Inspector(proto, pathlib.Path(folder) if folder is not None else None, unwritten)
    try:
        inspector.header()
        inspector.model()
    except _Refused as exc:
        raise ModelError(f"{label}: {exc}") from None
    except RecursionError:
        raise ModelError(f"{label}: subgraphs nested too deeply") from None
    return inspector


#: Files inspected in this process (check and convert read their input up to three times): the file's
#: identity -> the identity of the external-data files the inspection looked at.  A file read again,
#: unchanged and with unchanged external files, is not inspected again.
_INSPECTED: dict[tuple, tuple] = {}


def _identity(path: str | os.PathLike, st: os.stat_result) -> tuple:
    return (os.path.realpath(path), st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _external_identity(folder: pathlib.Path, locations) -> tuple | None:
    """(location, identity) of each external-data file, by ``lstat`` (a symlink put in its place shows)."""
    try:
        return tuple((location, _identity(folder / location, os.lstat(folder / location)))
                     for location in sorted(locations))
    except OSError:
        return None


def _check_path(path: str | os.PathLike) -> pathlib.Path:
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
    return p


def read_proto(path: str | os.PathLike, *, load_external_data: bool = False,
               unwritten: str | None = None) -> onnx.ModelProto:
    """Parse and inspect a model file, turning every failure into a one-line ModelError.

    Everything :func:`inspect_proto` checks is checked here, external-data locations included, before
    any other code (onnx's checker, onnxruntime, onnx_ir) opens the file or anything it refers to.
    *unwritten*: an external-data location that is known not to exist (:func:`ort_optimized` with
    ``weights=False``); its references are checked, but no file is looked for.
    """
    p = _check_path(path)
    try:
        identity = (_identity(p, p.stat()), os.path.abspath(p.parent))  # external data is relative to p.parent
        data = p.read_bytes()
    except OSError as exc:
        raise ModelError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if not data:
        raise ModelError(f"{p}: empty file, not an ONNX model")
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as exc:  # DecodeError, and whatever else the parser raises on hostile bytes
        text = str(exc)
        if "MaxDepth" in text or "recursion" in text.lower():
            raise ModelError(f"{p}: not a valid ONNX model (protobuf parse failed: messages nested too deeply, "
                             "e.g. subgraphs inside subgraphs)") from None
        raise ModelError(f"{p}: not a valid ONNX model (protobuf parse failed: "
                         f"{text or 'truncated or corrupt'})") from None
    del data
    seen = _INSPECTED.get(identity)
    if seen is None or _external_identity(p.parent, [location for location, _ in seen]) != seen:
        inspector = _inspect(proto, p.parent, str(p), unwritten)
        external = _external_identity(p.parent, inspector._file_sizes)
        if len(_INSPECTED) > 256:
            _INSPECTED.clear()
        if external is not None and unwritten is None:  # (a file with weights missing is judged each time)
            _INSPECTED[identity] = external
    if load_external_data:
        onnx.external_data_helper.load_external_data_for_model(proto, str(p.parent))
    return proto


#: Attribute types :func:`_session_output` leaves to the full inspection (tensors, subgraphs).
_DEEP_ATTRIBUTES = frozenset({onnx.AttributeProto.TENSOR, onnx.AttributeProto.TENSORS, onnx.AttributeProto.GRAPH,
                              onnx.AttributeProto.GRAPHS, onnx.AttributeProto.SPARSE_TENSOR,
                              onnx.AttributeProto.SPARSE_TENSORS, onnx.AttributeProto.TYPE_PROTO,
                              onnx.AttributeProto.TYPE_PROTOS})


def _data_locations(tensor: onnx.TensorProto) -> list[str]:
    """The ``location`` entries of *tensor*'s external-data references (none for data kept inside)."""
    return [entry.value for entry in tensor.external_data if entry.key == "location"]


def _session_output(p: pathlib.Path) -> tuple[onnx.ModelProto, bytes, list | None] | None:
    """The optimized model :func:`ort_optimized` had onnxruntime write without its weights, parsed, the
    bytes it was parsed from and its nodes as ``_speedups.node_fields`` reads them (None without the C
    extension), or None (then :func:`read_proto` reads it) for anything but the plain form of such a file.

    The header and every initializer are inspected as :func:`read_proto` would (data type, dims, data
    size, external-data references, which must all be :data:`OPTIMIZED_DATA`); the graph's structure
    (names, cycles, declared shapes) is not inspected again: onnxruntime derived it from an input that
    :func:`read_proto` and :func:`validate` accepted, in the caller's private folder, and the registry
    vouches that the file is unchanged since.  A file with subgraphs, functions, training graphs, sparse
    initializers, tensor, graph or type attributes, or external data elsewhere gets the full inspection.
    With the C extension, the nodes it reads have plain attributes only (the others are looked at here),
    and initializers in the plain forms onnxruntime writes are checked off the bytes
    (``_speedups.plain_initializers``); any other is inspected here.
    """
    try:
        data = p.read_bytes()
        proto = onnx.ModelProto()
        proto.ParseFromString(data)
    except Exception:
        return None  # read_proto says what is wrong
    if proto.functions or proto.training_info or proto.graph.sparse_initializer:
        return None
    speedups = None
    node_fields = None if speedups is None else speedups.node_fields(data)
    graph_nodes = proto.graph.node
    if node_fields is None or len(node_fields) != len(graph_nodes):
        unread: Iterable[int] = range(len(graph_nodes))
    else:  # (a node read in C has plain attributes only)
        unread = [i for i, read in enumerate(node_fields) if read is None]
    for i in unread:
        for attribute in graph_nodes[i].attribute:
            if attribute.type in _DEEP_ATTRIBUTES:
                return None
    inspector = _Inspector(proto, None, OPTIMIZED_DATA)
    try:
        inspector.header()
        if speedups is None or speedups.plain_initializers(data, _ELEMENT_BITS, OPTIMIZED_DATA) is not True:
            for tensor in proto.graph.initializer:
                if any(location != OPTIMIZED_DATA for location in _data_locations(tensor)):
                    return None
                inspector.tensor(tensor, f"initializer {tensor.name!r}")
    except _Refused as exc:
        raise ModelError(f"{p}: {exc}") from None
    return proto, data, node_fields


def _checker_message(exc: BaseException) -> str:
    text = str(exc).strip()
    if not text:
        return "validation failed"
    first = text.splitlines()[0].strip()
    context = re.search(r"Name: (\S*) OpType: (\S+)", text)
    if context:
        name, op = context.groups()
        first += f" (node {name!r}, {op})" if name else f" ({op} node)"
    return first


def validate(path: str | os.PathLike, proto: onnx.ModelProto | None = None) -> onnx.ModelProto:
    """Inspect the file, then onnx's checker (by path, so external data is checked beside the model).

    The inspection (:func:`read_proto`) comes first, so the checker only ever opens external files
    already proven to be regular files inside the model's folder.  Then values whose inferred shape is
    absurd are refused (:func:`check_inferred_shapes`) before onnxruntime can fold them.  *proto*: the
    file as :func:`read_proto` already returned it (not parsed again).  Returns the parsed model.
    """
    p = _check_path(path)
    if proto is None:
        proto = read_proto(p)
    _run_checker(p, str(path))
    check_inferred_shapes(proto, str(path), size=p.stat().st_size)
    return proto


def _run_checker(p: pathlib.Path, label: str) -> None:
    try:
        onnx.checker.check_model(str(p), full_check=False)
    except onnx.checker.ValidationError as exc:
        raise ModelError(f"{label}: invalid ONNX model: {_checker_message(exc)}") from None
    except Exception as exc:  # the checker itself may raise other errors on hostile input
        raise ModelError(f"{label}: invalid ONNX model: {type(exc).__name__}: {_checker_message(exc)}") from None


def _shell(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A new model with *proto*'s IR version, opsets, functions, graph name, nodes, inputs, outputs and
    value infos (what shape inference reads, initializers aside)."""
    shell = onnx.ModelProto(ir_version=proto.ir_version)
    shell.opset_import.extend(proto.opset_import)
    shell.functions.extend(proto.functions)
    graph, source = shell.graph, proto.graph
    graph.name = source.name
    graph.node.extend(source.node)
    graph.input.extend(source.input)
    graph.output.extend(source.output)
    graph.value_info.extend(source.value_info)
    return shell


#: :func:`_skeleton` leaves out the data of initializers larger than this (too large to be a shape).
_SKELETON_DATA_MAX_BYTES = 1 << 16
#: Up to this file size a model is serialized and scanned in C (``_speedups.needs_skeleton``) to learn
#: whether :func:`_skeleton` would copy it; larger ones (weights inside) are scanned in Python, not
#: serialized whole for nothing.
_SKELETON_SCAN_MAX_BYTES = 1 << 26


def _skeleton(proto: onnx.ModelProto, limit: int = _SKELETON_DATA_MAX_BYTES) -> onnx.ModelProto:
    """A copy of *proto* without the data of large initializers (shape inference needs only small ones).

    *proto* itself when the copy would hold all it holds that shape inference reads (no initializer to
    leave out, no sparse initializers or training graphs): copying the nodes costs as much as inferring.

    Not :func:`_inference_input`, which serves inference *without* data propagation and must give what
    onnx_ir's pass gives (initializers over 1000 bytes turned into data-less inputs): here data
    propagation reads the values of initializers, so they stay initializers, and only those too large to
    be a shape (over *limit* bytes) lose their data.
    """
    source = proto.graph
    if (not len(source.sparse_initializer) and not len(proto.training_info)
            and not any(_without_data(tensor, limit) for tensor in source.initializer)):
        return proto
    skeleton = _shell(proto)
    graph = skeleton.graph
    for tensor in source.initializer:
        if _without_data(tensor, limit):
            graph.initializer.append(onnx.TensorProto(name=tensor.name, data_type=tensor.data_type,
                                                      dims=tensor.dims))
        else:
            graph.initializer.append(tensor)
    return skeleton


def _without_data(tensor: onnx.TensorProto, limit: int) -> bool:
    """Whether :func:`_skeleton` leaves the data of *tensor* out."""
    return tensor.data_location == _T.EXTERNAL or (_nbytes(tensor.data_type, math.prod(tensor.dims)) or 0) > limit


def check_inferred_shapes(proto: onnx.ModelProto, label: str = "model", *, size: int | None = None) -> None:
    """Refuse values whose *inferred* shape is absurd (e.g. ConstantOfShape of 10^12 elements).

    onnxruntime folds constants while it loads a model: a tiny file could make it allocate terabytes.
    Shape inference with data propagation, on a copy without large weights, finds such values first.  Its
    result is read off the serialized bytes (``_speedups.shapes_within``, when built); only a model with
    something that read leaves open (an absurd-looking value, a sequence or map type) is parsed and
    inspected here.  *size*: the bytes of the file *proto* was read from, when known (up to
    :data:`_SKELETON_SCAN_MAX_BYTES`, whether a copy without large weights is needed is read off the
    serialized model in C).
    """
    speedups = None
    try:
        whole = None  # the model as it is, serialized, when _skeleton would give it as it is
        if speedups is not None and size is not None and size <= _SKELETON_SCAN_MAX_BYTES:
            whole = proto.SerializeToString()
            if speedups.needs_skeleton(whole, _ELEMENT_BITS, _SKELETON_DATA_MAX_BYTES) is not False:
                whole = None
        data = _infer_serialized(whole, True) if whole is not None else _inferred_bytes(_skeleton(proto))
    except Exception as exc:
        raise ModelError(f"{label}: invalid ONNX model: shape inference failed: {_checker_message(exc)}") from None
    if speedups is not None and speedups.shapes_within(data, _ELEMENT_LIMITS):
        return  # (read off the bytes: nothing the inspection below would refuse)
    try:
        _inspect_values(onnx.load_from_string(data))
    except _Refused as exc:
        raise ModelError(f"{label}: {exc}") from None


def _inspect_values(model: onnx.ModelProto) -> None:
    """The inspection of every value info and output of every graph of *model* (:class:`_Refused` for the
    first it refuses): what ``_speedups.shapes_within`` stands in for."""
    inspector = _Inspector(model, None)
    for graph in _all_graphs(model.graph):
        for value in [*graph.value_info, *graph.output]:
            inspector.value_info(value, "value")


def _inferred_bytes(proto: onnx.ModelProto, data_prop: bool = True) -> bytes:
    """ONNX shape inference of *proto* (non-strict, with data propagation unless *data_prop* is False), as
    the serialized model: onnx's own ``infer_shapes`` parses it into a ModelProto, which the callers seldom
    need (:func:`check_inferred_shapes`, :func:`_deserialize_plain` read the bytes)."""
    return _infer_serialized(proto.SerializeToString(), data_prop)


def _infer_serialized(data: bytes, data_prop: bool) -> bytes:
    """:func:`_inferred_bytes` of the serialized model *data*."""
    try:
        from onnx.onnx_cpp2py_export import shape_inference as cpp
    except ImportError:  # (not where it was: the public function, and the model parsed again)
        return onnx.shape_inference.infer_shapes(onnx.ModelProto.FromString(data), check_type=False,
                                                 strict_mode=False, data_prop=data_prop).SerializeToString()
    return cpp.infer_shapes(data, False, False, data_prop)


def _element_limits() -> tuple[int, ...]:
    """For each ONNX element type number, the most elements a value of it may have (:data:`MAX_ELEMENTS`,
    :data:`MAX_VALUE_BYTES`); -1 for numbers of no known type.  Entry 0: a value without an element type."""
    limits = [-1] * (max(_DATA_TYPES) + 1)
    limits[0] = MAX_ELEMENTS
    for data_type in _DATA_TYPES:
        if data_type in _ITEMSIZE:
            by_bytes = MAX_VALUE_BYTES // _ITEMSIZE[data_type]
        elif data_type in _BITS:
            by_bytes = MAX_VALUE_BYTES * 8 // _BITS[data_type]
        else:  # (strings: no fixed size)
            by_bytes = MAX_ELEMENTS
        limits[data_type] = min(MAX_ELEMENTS, by_bytes)
    return tuple(limits)


#: What ``_speedups.shapes_within`` is given: :func:`_element_limits`.
_ELEMENT_LIMITS = _element_limits()
#: What ``_speedups.inference_input``, ``needs_skeleton`` and ``plain_initializers`` are given: the bits an
#: element of each ONNX element type number takes (:func:`_nbytes`), -1 for numbers of no fixed size.
_ELEMENT_BITS = tuple(8 * _ITEMSIZE[t] if t in _ITEMSIZE else _BITS.get(t, -1) for t in range(max(_DATA_TYPES) + 1))


def _all_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    stack = [graph]
    while stack:
        g = stack.pop()
        yield g
        for node in g.node:
            for attribute in node.attribute:
                if attribute.HasField("g"):
                    stack.append(attribute.g)
                stack.extend(attribute.graphs)


def from_proto(proto: onnx.ModelProto, *, base_dir: str | os.PathLike | None = None, shapes: bool = True,
               unwritten: UnwrittenWeights | None = None, serialized: bytes | None = None,
               node_fields: list | None = None) -> ir.Model:
    """An IR model from a ModelProto, with inferred shapes and a name on every node and value.

    Shapes are inferred on the protobuf before it becomes IR (the IR is built once, not serialized and
    built again as :func:`infer_shapes` must); *proto* is left as it was.  *unwritten*: where *proto* was
    read from a file :func:`ort_optimized` wrote without weights, the lazy tensors for them, made as the IR
    is built when it is built the quick way (else :meth:`UnwrittenWeights.attach` puts them in after).
    *serialized*: the bytes *proto* was parsed from, if at hand, and *node_fields* what
    ``_speedups.node_fields`` read of them, if already read (:func:`_deserialize_plain`).
    """
    inferred = _infer_bytes(proto, serialized) if shapes else None
    try:
        with _gc_paused():
            model = _deserialize_plain(proto, inferred, unwritten, serialized, node_fields)
            named = model is not None and _named(proto.graph)
            if model is None:
                with _annotated(proto, None if inferred is None else onnx.load_from_string(inferred)):
                    model = ir.serde.deserialize_model(proto)
    except Exception as exc:
        raise ModelError(f"cannot read the model's graph: {type(exc).__name__}: {exc}") from None
    if base_dir is not None:
        _set_base_dir(model, pathlib.Path(base_dir))
    if not named:
        NameFixPass()(model)
    return model


def _named(graph: onnx.GraphProto) -> bool:
    """Whether onnx_ir's NameFixPass would leave the model of this one graph as it is: every node named,
    no two alike, no output left unnamed (value names are unique: :func:`_deserialize_plain` checked)."""
    names = [node.name for node in graph.node]
    return all(names) and len(set(names)) == len(names) and all(name for node in graph.node for name in node.output)


_A = onnx.AttributeProto
#: Attribute types :func:`_deserialize_plain` builds itself, with the constructor onnx_ir's uses.
_PLAIN_ATTRIBUTES = {
    _A.INT: (ir.AttributeType.INT, lambda a: a.i),
    _A.FLOAT: (ir.AttributeType.FLOAT, lambda a: a.f),
    _A.INTS: (ir.AttributeType.INTS, lambda a: a.ints),
    _A.FLOATS: (ir.AttributeType.FLOATS, lambda a: a.floats),
    _A.STRING: (ir.AttributeType.STRING, lambda a: a.s.decode("utf-8")),  # (not UTF-8: left to onnx_ir)
    _A.STRINGS: (ir.AttributeType.STRINGS, lambda a: [s.decode("utf-8") for s in a.strings]),
    _A.TENSOR: (ir.AttributeType.TENSOR, lambda a: ir.serde.deserialize_tensor(a.t)),
    _A.TENSORS: (ir.AttributeType.TENSORS, lambda a: [ir.serde.deserialize_tensor(t) for t in a.tensors]),
}
_DATA_TYPES_BY_NUMBER = {int(t): t for t in ir.DataType}


def _plain_attr_maker() -> Callable[[str, ir.AttributeType, object, str | None], ir.Attr]:
    """``ir.Attr(name, type, value, doc_string=doc)`` for the values ``_speedups.node_fields`` reads (an int, a
    float, a str, or a tuple of them, as the constructor would store them), in a sixth of the time: the
    instance's slots set directly.  Only when that builds the very objects the constructor builds (the slots
    are the ones known, and samples of every plain type made both ways hold the same fields, and nothing
    else in the instance's ``__dict__``); else the constructor itself."""
    slots = ("_metadata", "_name", "_ref_attr_name", "_type", "_value", "doc_string")
    cls = ir.Attr
    known = [s for k in cls.__mro__ for s in getattr(k, "__slots__", ())]
    if sorted(known) != sorted(slots):
        return lambda name, kind, value, doc: cls(name, kind, value, doc_string=doc)
    new = object.__new__

    def make(name: str, kind: ir.AttributeType, value: object, doc: str | None) -> ir.Attr:
        attribute = new(cls)
        attribute._metadata = None
        attribute._name = name
        attribute._ref_attr_name = None
        attribute._type = kind
        attribute._value = value
        attribute.doc_string = doc
        return attribute

    T = ir.AttributeType
    samples = [("i", T.INT, 3, None), ("f", T.FLOAT, 0.5, "d"), ("s", T.STRING, "t", None),
               ("ii", T.INTS, (1, -2), None), ("ff", T.FLOATS, (1.5,), None), ("ss", T.STRINGS, ("a", "b"), "d"),
               ("e", T.INTS, (), None)]
    fields = lambda a: [(s, getattr(a, s)) for s in slots] + [dict(vars(a)) if hasattr(a, "__dict__") else None]  # noqa: E731
    try:
        same = all(fields(make(*sample)) == fields(cls(*sample[:3], doc_string=sample[3])) for sample in samples)
    except Exception:
        same = False
    return make if same else (lambda name, kind, value, doc: cls(name, kind, value, doc_string=doc))


#: :func:`_plain_attr_maker`.
_make_plain_attr = _plain_attr_maker()


def _optional(proto, field: str):
    """*proto*'s *field*, or None when it is not set (onnx_ir's reading of optional fields)."""
    return getattr(proto, field) if proto.HasField(field) else None


class _NotPlain(Exception):
    """:func:`_deserialize_plain` meets something it leaves to onnx_ir."""


def _deserialize_plain(proto: onnx.ModelProto, inferred: onnx.ModelProto | bytes | None = None,
                       unwritten: UnwrittenWeights | None = None, serialized: bytes | None = None,
                       node_fields: list | None = None) -> ir.Model | None:
    """``onnx_ir.serde.deserialize_model(proto)`` for a model of one plain graph, in less time, or
    None (then onnx_ir deserializes it) for anything else: subgraphs, functions, sparse or type
    attributes, attribute references, quantization annotations, device configurations, values of other
    than tensor type, names declared twice or read before any definition, string attributes that are
    not UTF-8.

    *inferred*: *proto* after shape inference, whose value infos and output types are used instead of
    *proto*'s (what deserializing *proto* inside :func:`_annotated` gives, without copying them in); as a
    ModelProto or serialized (as :func:`_infer_bytes` gives it: its types are then read off the bytes
    when they are plain, ``_speedups.value_types``, and values of the same dims share one frozen shape).
    *unwritten*: the initializers whose data went to the null device get its lazy tensors (what
    :meth:`UnwrittenWeights.attach` would put in their place afterwards).  *serialized*: the bytes *proto*
    was parsed from, when the caller has them: the graph's inputs and nodes are read off them
    (``_speedups.input_types``, ``_speedups.node_fields``: *node_fields*, when the caller has read them), in
    a fraction of the time of reading each field
    from *proto* (onnxruntime's output for an IR 3 model also keeps an input for every initializer it folded
    away: hundreds on the light_* models).

    The same objects, made by the same constructors with the same arguments
    (tests/test_plain_deserialize.py compares the two on every ONNX node test and the light_* models,
    as shipped and optimized); what it skips is the general case's
    machinery: an error-capturing wrapper around every call, enum look-ups per attribute and dimension,
    a field-presence test per optional field.
    """
    graph = proto.graph
    if (proto.functions or len(getattr(proto, "configuration", ())) or graph.quantization_annotation
            or graph.sparse_initializer):
        return None
    read = None
    speedups = None
    input_types = None
    if speedups is not None and serialized is not None:
        input_types = speedups.input_types(serialized)
        if node_fields is None:
            node_fields = speedups.node_fields(serialized)
    if isinstance(inferred, bytes):
        read = speedups.value_types(inferred) if speedups is not None else None
        if read is None:
            inferred = onnx.load_from_string(inferred)
    if read is not None:
        value_info, outputs = read
        typed = _shared_shapes_typer()
    else:
        types = graph if inferred is None else inferred.graph
        value_info = {info.name: info for info in types.value_info}
        outputs = [(info.name, info) for info in types.output]
        typed = _plain_type
    if [name for name, _ in outputs] != [v.name for v in graph.output]:
        return None
    try:
        return _plain_model(proto, value_info, outputs, typed, unwritten, input_types, node_fields)
    except (_NotPlain, UnicodeDecodeError):
        return None


def _plain_type(info: onnx.ValueInfoProto, value: ir.Value) -> None:
    """The type, shape, doc string and metadata of *info* on *value* (onnx_ir's deserialize_value_info_proto)."""
    type_proto = info.type
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        tensor_type = type_proto.tensor_type
        if tensor_type.HasField("shape"):
            dims, denotations = [], []
            for dim in tensor_type.shape.dim:
                which = dim.WhichOneof("value")
                dims.append(dim.dim_value if which == "dim_value" else
                            ir.SymbolicDim(dim.dim_param if which == "dim_param" else None))
                denotations.append(_optional(dim, "denotation"))
            value.shape = ir.Shape(dims, denotations=denotations, frozen=True)
        else:
            value.shape = None
        denotation = _optional(type_proto, "denotation")
        if tensor_type.HasField("elem_type"):
            dtype = _DATA_TYPES_BY_NUMBER.get(tensor_type.elem_type)
            if dtype is None:
                raise _NotPlain  # onnx_ir's error names it
            value.type = ir.TensorType(dtype, denotation=denotation)
        else:
            value.type = None
    elif kind is None:
        value.shape = None
        value.type = None
    else:
        raise _NotPlain
    metadata = ir.serde.deserialize_metadata_props(info.metadata_props)
    if metadata is not None:
        value.metadata_props.update(metadata)
    value.doc_string = _optional(info, "doc_string")


def _shared_shapes_typer() -> Callable[[tuple, ir.Value], None]:
    """What :func:`_plain_type` does, for a type as ``_speedups.value_types`` read it: ``(element type or
    None, dims or None)``.  Values of the same dims get the same frozen shape (immutable: onnx_ir makes
    frozen shapes to be shared), made once."""
    shapes: dict[tuple, ir.Shape] = {}
    types = _DATA_TYPES_BY_NUMBER

    def typed(entry: tuple, value: ir.Value) -> None:
        elem, dims = entry
        if dims is None:
            value.shape = None
        else:
            shape = shapes.get(dims)
            if shape is None:  # (str dims become symbolic dims, None ones unknown: as _plain_type makes them)
                shape = shapes[dims] = ir.Shape(dims, frozen=True)
            value.shape = shape
        if elem is None:
            value.type = None
        else:
            dtype = types.get(elem)
            if dtype is None:
                raise _NotPlain  # onnx_ir's error names it
            value.type = ir.TensorType(dtype)

    return typed


def _plain_model(proto: onnx.ModelProto, value_info: Mapping[str, object], outputs: Sequence[tuple[str, object]],
                 typed: Callable[[object, ir.Value], None], unwritten: UnwrittenWeights | None = None,
                 input_types: Sequence[tuple | None] | None = None,
                 node_fields: Sequence[tuple | None] | None = None) -> ir.Model:
    """*proto* as onnx_ir builds it, with the value infos *value_info* (by name) and the outputs *outputs*
    (name and type, in order), whose types *typed* puts on values (and *unwritten*'s lazy tensors for the
    weights it stands for).  *input_types*, *node_fields*: the graph's inputs and nodes as
    ``_speedups.input_types`` and ``_speedups.node_fields`` read them off *proto*'s bytes (an entry None:
    read from *proto*)."""
    graph = proto.graph
    Value = ir.Value
    inputs = []
    values: dict[str, ir.Value] = {}
    if input_types is None or len(input_types) != len(graph.input):
        input_types = [None] * len(graph.input)
    typed_input = _shared_shapes_typer() if typed is _plain_type else typed  # (for the entries read off the bytes)
    for i, entry in enumerate(input_types):
        if entry is None:  # (not read off the bytes: read from the parsed input)
            info = graph.input[i]
            value = Value(name=info.name)
            _plain_type(info, value)
        else:
            value = Value(name=entry[0])
            typed_input(entry[1], value)
        inputs.append(value)
        values[value.name] = value
    initializers = []
    lazy = None if unwritten is None else unwritten.lazy_tensor
    for tensor_proto in graph.initializer:
        tensor = (lazy(tensor_proto) if lazy is not None and tensor_proto.data_location == _T.EXTERNAL else None
                  ) or ir.serde.deserialize_tensor(tensor_proto)
        name = tensor.name
        if not name:
            raise _NotPlain  # onnx_ir warns and skips it
        if name in values:
            value = values[name]
            value.const_value = tensor
        else:
            value = Value(None, index=None, name=name, type=ir.TensorType(tensor.dtype), shape=tensor.shape,
                          const_value=tensor)
            if name in value_info:
                typed(value_info[name], value)
            values[name] = value
        initializers.append(value)
    graph_nodes = graph.node
    if node_fields is None or len(node_fields) != len(graph_nodes):
        node_fields = [None] * len(graph_nodes)
    for i, read in enumerate(node_fields):
        for name in graph_nodes[i].output if read is None else read[1]:
            if not name:
                continue
            if name in values:
                raise _NotPlain  # onnx_ir refuses it, in its words
            value = values[name] = Value(name=name)
            if name in value_info:
                typed(value_info[name], value)
    plain = _PLAIN_ATTRIBUTES
    Attr = ir.Attr
    make_attr = _make_plain_attr
    Node = ir.Node
    nodes = []
    for i, read in enumerate(node_fields):
        if read is not None:  # (read off the bytes: a node without metadata, of plain attributes)
            input_names, output_names, name, op_type, domain, overload, doc_string, read_attributes = read
            try:
                node_inputs = [values[name] if name else None for name in input_names]
            except KeyError:
                raise _NotPlain from None
            nodes.append(Node(
                domain, op_type, node_inputs,
                [make_attr(key, plain[kind][0], value, doc) for key, kind, value, doc in read_attributes],
                overload=overload, outputs=[values[name] if name else Value(name="") for name in output_names],
                name=name, doc_string=doc_string, metadata_props=None))
            continue
        node = graph_nodes[i]
        try:
            node_inputs = [values[name] if name else None for name in node.input]
        except KeyError:
            raise _NotPlain from None  # an undefined input: onnx_ir makes a value for it, with a warning
        attributes = []
        for attribute in node.attribute:
            found = plain.get(attribute.type)
            if found is None or attribute.ref_attr_name:
                raise _NotPlain
            attributes.append(Attr(attribute.name, found[0], found[1](attribute),
                                   doc_string=_optional(attribute, "doc_string")))
        if len(getattr(node, "device_configurations", ())):
            raise _NotPlain
        nodes.append(Node(
            node.domain, node.op_type, node_inputs, attributes, overload=node.overload,
            outputs=[values[name] if name else Value(name="") for name in node.output], name=node.name,
            doc_string=_optional(node, "doc_string"),
            metadata_props=ir.serde.deserialize_metadata_props(node.metadata_props)))
    graph_outputs = []
    for name, entry in outputs:
        value = values.get(name)
        if value is None:
            raise _NotPlain  # an output nothing produces: onnx_ir warns
        typed(entry, value)
        graph_outputs.append(value)
    ir_graph = ir.Graph(inputs, graph_outputs, nodes=nodes, initializers=initializers,
                        doc_string=_optional(graph, "doc_string"), name=_optional(graph, "name"),
                        metadata_props=ir.serde.deserialize_metadata_props(graph.metadata_props))
    ir_graph.opset_imports.update({opset.domain: opset.version for opset in proto.opset_import})
    return ir.Model(
        ir_graph, ir_version=proto.ir_version, producer_name=_optional(proto, "producer_name"),
        producer_version=_optional(proto, "producer_version"), domain=_optional(proto, "domain"),
        model_version=_optional(proto, "model_version"), doc_string=_optional(proto, "doc_string"),
        metadata_props=ir.serde.deserialize_metadata_props(proto.metadata_props))


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause Python's cycle collector while building a big IR (nothing it builds is garbage; each full
    collection would walk the whole model again: 40-80% of the time on a 40k-node graph)."""
    import gc

    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _infer_bytes(proto: onnx.ModelProto, serialized: bytes | None = None) -> bytes | None:
    """ONNX shape inference (non-strict, no data propagation) of *proto*, its weights not copied, as the
    serialized model.

    The input is what :func:`infer_shapes` gives ONNX for the same model: every initializer is also an
    input, those over 1000 bytes without their data (:func:`_inference_input`; written in C off
    *serialized*, the bytes *proto* was parsed from, when the caller has them: ``_speedups.inference_input``).
    ``None`` (with the pass's warning) if it fails.
    """
    import logging

    speedups = None
    try:
        data = None if speedups is None or serialized is None else speedups.inference_input(
            serialized, _ELEMENT_BITS, _INFERENCE_DATA_MAX_BYTES)
        if data is not None:
            return _infer_serialized(data, data_prop=False)
        return _inferred_bytes(_inference_input(proto), data_prop=False)
    except Exception as exc:  # as the pass does, with its logger and message: shapes are left as they are
        logging.getLogger("onnx_ir.passes.common.shape_inference").warning(
            "Shape inference failed: %s. Model is left unchanged", exc_info=exc)
        return None


#: What :func:`_inference_input` keeps of a model and of its graph; the other fields are left out.
_INFERENCE_MODEL_FIELDS = frozenset({"ir_version", "opset_import", "functions", "graph"})
_INFERENCE_GRAPH_FIELDS = frozenset({"name", "node", "input", "output", "value_info"})
#: Up to this many bytes of weights left out, :func:`_inference_input` copies the whole model at once.
_WHOLE_COPY_MAX_BYTES = 1 << 16


def _inference_input(proto: onnx.ModelProto) -> onnx.ModelProto:
    """The model :func:`_infer_bytes` gives ONNX: *proto*'s opsets, functions, nodes, inputs, outputs and
    value infos, every initializer also an input, those over 1000 bytes (or external) without their data.

    When what is left out is small (an optimized model's weights are external), the model is copied in
    one call and the rest cleared: a tenth of the time of copying it field by field.
    """
    source = proto.graph
    kept: list[onnx.TensorProto] = []
    left_out = 0  # bytes of embedded data the copy would hold for nothing
    for tensor in source.initializer:
        size = (sum(len(s) for s in tensor.string_data) if tensor.data_type == _T.STRING
                else _nbytes(tensor.data_type, math.prod(tensor.dims)))
        if tensor.data_location == _T.EXTERNAL:
            continue
        if size is not None and size <= _INFERENCE_DATA_MAX_BYTES:
            kept.append(tensor)
        else:
            left_out += size if size is not None else _WHOLE_COPY_MAX_BYTES + 1
    if left_out <= _WHOLE_COPY_MAX_BYTES and not len(proto.training_info) and not len(source.sparse_initializer):
        skeleton = onnx.ModelProto()
        skeleton.CopyFrom(proto)
        for field in onnx.ModelProto.DESCRIPTOR.fields_by_name:
            if field not in _INFERENCE_MODEL_FIELDS:
                skeleton.ClearField(field)
        graph = skeleton.graph
        for field in onnx.GraphProto.DESCRIPTOR.fields_by_name:
            if field not in _INFERENCE_GRAPH_FIELDS:
                graph.ClearField(field)
        skeleton.ir_version = proto.ir_version  # set, as below, even when *proto* leaves them unset
        graph.name = source.name
    else:
        skeleton = _shell(proto)
        graph = skeleton.graph
    listed = {value.name for value in source.input}
    for tensor in source.initializer:
        if tensor.name not in listed:
            listed.add(tensor.name)
            # onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims), built in place
            info = graph.input.add()
            info.name = tensor.name
            tensor_type = info.type.tensor_type
            tensor_type.elem_type = tensor.data_type
            tensor_type.shape.SetInParent()  # a scalar has a shape, with no dims
            for dim in tensor.dims:
                tensor_type.shape.dim.add().dim_value = dim
    graph.initializer.extend(kept)
    return skeleton


@contextlib.contextmanager
def _annotated(proto: onnx.ModelProto, inferred: onnx.ModelProto | None) -> Iterator[None]:
    """*proto* with the value infos, output types and subgraphs of *inferred*, restored afterwards."""
    if inferred is None:
        yield
        return
    graph, result = proto.graph, inferred.graph
    saved = onnx.GraphProto()  # copies (the repeated fields are emptied below)
    saved.value_info.extend(graph.value_info)
    saved.output.extend(graph.output)
    changed_nodes: dict[int, onnx.NodeProto] = {}
    for index, node in enumerate(graph.node):
        if any(a.HasField("g") or len(a.graphs) for a in node.attribute):
            original = onnx.NodeProto()
            original.CopyFrom(node)
            changed_nodes[index] = original
            node.CopyFrom(result.node[index])
    del graph.value_info[:]
    graph.value_info.extend(result.value_info)
    del graph.output[:]
    graph.output.extend(result.output)
    try:
        yield
    finally:
        del graph.value_info[:]
        graph.value_info.extend(saved.value_info)
        del graph.output[:]
        graph.output.extend(saved.output)
        for index, original in changed_nodes.items():
            graph.node[index].CopyFrom(original)


def _set_base_dir(model: ir.Model, base_dir: pathlib.Path) -> None:
    for graph in model.graphs():
        for value in graph.initializers.values():
            tensor = value.const_value
            if isinstance(tensor, ir.ExternalTensor):
                tensor.base_dir = base_dir  # type: ignore[misc]


#: Initializers larger than this go to ONNX's shape inference as inputs, without their data (onnx_ir's rule).
_INFERENCE_DATA_MAX_BYTES = 1000


def _call_onnx_api(func, model: ir.Model):
    """``func(proto)`` on the model without its large weights (which are not copied); the model is unchanged.

    What ``onnx_ir.passes.common._c_api_utils.call_onnx_api`` does, in linear time: it tests every
    initializer's membership in the graph's input *list*, which is quadratic (40,000 initializers take
    about a minute, 100,000 about ten).
    """
    graph = model.graph
    initializer_values = tuple(graph.initializers.values())
    tensors = {v.name: v.const_value for v in initializer_values}
    original_inputs_len = len(graph.inputs)
    inputs = set(graph.inputs)
    for initializer in initializer_values:
        if initializer.const_value is not None:
            if initializer.shape is None:
                initializer.shape = initializer.const_value.shape  # type: ignore[assignment]
            if initializer.dtype is None:
                initializer.dtype = initializer.const_value.dtype
        if initializer not in inputs:
            graph.inputs.append(initializer)
            inputs.add(initializer)
        if initializer.const_value is None:
            graph.initializers.pop(initializer.name)  # type: ignore[arg-type]
        elif initializer.const_value.nbytes > _INFERENCE_DATA_MAX_BYTES:
            initializer.const_value = None
            graph.initializers.pop(initializer.name)  # type: ignore[arg-type]
    proto = ir.serde.serialize_model(model)
    try:
        return func(proto)
    finally:
        for initializer in initializer_values:
            initializer.const_value = tensors[initializer.name]
            if initializer.const_value is not None:
                graph.register_initializer(initializer)
            else:
                graph.initializers.add(initializer)
        kept = graph.inputs[:original_inputs_len]
        graph.inputs.clear()
        graph.inputs.extend(kept)


def infer_shapes(model: ir.Model) -> ir.Model:
    """ONNX shape inference into the IR, as onnx_ir's ``ShapeInferencePass`` (non-strict, no data
    propagation) does, in linear time; weights are not copied."""
    import logging

    from onnx_ir.passes.common.shape_inference import _merge_func

    infer = functools.partial(onnx.shape_inference.infer_shapes, check_type=False, strict_mode=False,
                              data_prop=False)
    try:
        inferred = _call_onnx_api(infer, model)
    except Exception as exc:  # as the pass does, with its logger and message: the model is left as it is
        logging.getLogger("onnx_ir.passes.common.shape_inference").warning(
            "Shape inference failed: %s. Model is left unchanged", exc_info=exc)
        return model
    _merge_func(model, inferred)
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


def load(path: str | os.PathLike, *, shapes: bool = True, check: bool = True) -> ir.Model:
    """Load a model file into the IR; one-line ModelError for anything wrong with it.

    A model that :func:`ort_optimized` wrote without its weights (``weights=False``) gets them on demand
    (:class:`UnwrittenWeights`).
    """
    p = _check_path(path)
    unwritten = _UNWRITTEN.get(p)
    read = None if unwritten is None else _session_output(p)
    proto, data, node_fields = (None, None, None) if read is None else read
    flat = proto is not None  # (no subgraphs: _session_output takes only such files)
    if proto is None:
        proto = read_proto(p, unwritten=None if unwritten is None else OPTIMIZED_DATA)
    if check:
        _run_checker(p, str(p))
        check_inferred_shapes(proto, str(p), size=p.stat().st_size)
    if unwritten is None:
        return from_proto(proto, base_dir=p.parent, shapes=shapes)
    model = from_proto(proto, shapes=shapes, unwritten=unwritten, serialized=data, node_fields=node_fields)
    unwritten.attach(model, base_dir=p.parent, graphs=[model.graph] if flat else None)  # (when onnx_ir built it)
    return model


def to_proto(model: ir.Model) -> onnx.ModelProto:
    return ir.serde.serialize_model(model)


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
def atomic_path(target: str | os.PathLike) -> Iterator[pathlib.Path]:
    """Yield a temporary path beside *target*; on success it replaces *target* in one rename."""
    target = pathlib.Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = pathlib.Path(tmp)
    os.chmod(tmp_path, _file_mode())  # mkstemp makes 0600; outputs get the usual umask-based mode
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()


def _file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


#: Above this, weights fit neither in one protobuf (2 GB) nor in an ORT format file (flatbuffers, 2 GB):
#: a saved ``.onnx`` keeps them in ``<name>.data`` beside it.
SINGLE_FILE_MAX_BYTES = 1_800_000_000
#: Below this, weights are embedded the simple way (in memory); above it they are streamed into the file.
_STREAM_EMBED_BYTES = 64 * 2**20


def save(model: ir.Model, path: str | os.PathLike, *, external_data: str | None = None) -> pathlib.Path:
    """Save atomically, with a valid IR version, never holding all the weights in memory.

    Weights above :data:`SINGLE_FILE_MAX_BYTES` in total go to external data (``<name>.data``, or the
    name given), written first and also atomically, so the model never refers to a half-written file.
    Smaller models are one file; large weights are streamed into it from their memory-mapped sources.
    """
    path = pathlib.Path(path)
    prepare_for_save(model)
    total = _total_initializer_bytes(model)
    with atomic_path(path) as tmp:
        if external_data is None and total > SINGLE_FILE_MAX_BYTES:
            external_data = path.name + ".data"
        if external_data is not None:
            data_target = path.parent / external_data
            with atomic_path(data_target) as tmp_data:
                ir.save(model, tmp, external_data=tmp_data.name)
                # onnx_ir wrote the data file next to tmp under the temporary name: fix the reference.
                _rename_external(tmp, tmp_data.name, external_data)
        elif total > _STREAM_EMBED_BYTES:
            with tempfile.TemporaryDirectory(prefix="mobile-ep-save-") as scratch:
                staged = pathlib.Path(scratch) / "model.onnx"
                ir.save(model, staged, external_data="model.onnx.data")
                if not _embed_external_data(staged, tmp):
                    ir.external_data.load_to_model(model)
                    ir.save(model, tmp)
        else:
            # Small: embed weights that still live in another file (e.g. a temp dir) in memory.
            ir.external_data.load_to_model(model)
            ir.save(model, tmp)
    if external_data is None:  # every weight is in the file: its size is the whole model's
        if len(_SAVED_WHOLE) > 256:
            _SAVED_WHOLE.clear()
        _SAVED_WHOLE.add(_identity(path, path.stat()))
    return path


#: Files :func:`save` wrote with every weight inside, by identity (:func:`_identity`: a file changed since
#: is not found): :func:`ort_format_fits` measures them by their size.
_SAVED_WHOLE: set[tuple] = set()


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _embed_external_data(source: pathlib.Path, target: pathlib.Path) -> bool:
    """Write *source* (a model whose main-graph initializers are external) as one file, streaming the data.

    Protobuf lets fields come in any order, so the file is: the model without its graph, then the graph
    field, whose bytes are the graph without initializers followed by each initializer, whose bytes are
    the tensor without its external reference followed by ``raw_data`` copied from the data file in
    chunks.  Returns False (nothing written) when other tensors (subgraphs, attributes) are external.
    """
    proto = onnx.load(str(source), load_external_data=False)
    graph = proto.graph
    main = {id(t) for t in graph.initializer}
    if any(t.data_location == _T.EXTERNAL and id(t) not in main
           for t in onnx.external_data_helper._get_all_tensors(proto)):
        return False
    pieces: list[tuple[bytes, tuple[pathlib.Path, int, int] | None, int]] = []
    for tensor in graph.initializer:
        if tensor.data_location != _T.EXTERNAL:
            data = tensor.SerializeToString()
            pieces.append((data, None, len(data)))
            continue
        info = {e.key: e.value for e in tensor.external_data}
        offset, length = int(info.get("offset", "0")), int(info["length"])
        head = _T()
        head.CopyFrom(tensor)
        head.ClearField("external_data")
        head.ClearField("data_location")
        prefix = head.SerializeToString() + b"\x4a" + _varint(length)  # raw_data: field 9, length-delimited
        pieces.append((prefix, (source.parent / info["location"], offset, length), len(prefix) + length))
    rest = onnx.GraphProto()
    rest.CopyFrom(graph)
    rest.ClearField("initializer")
    rest_bytes = rest.SerializeToString()
    graph_size = len(rest_bytes) + sum(1 + len(_varint(size)) + size for _, _, size in pieces)
    proto.ClearField("graph")
    with open(target, "wb") as out:
        out.write(proto.SerializeToString())
        out.write(b"\x3a" + _varint(graph_size))  # graph: field 7
        out.write(rest_bytes)
        for prefix, data, size in pieces:
            out.write(b"\x2a" + _varint(size))  # initializer: field 5
            out.write(prefix)
            if data is not None:
                data_path, offset, length = data
                with open(data_path, "rb") as f:
                    f.seek(offset)
                    while length:
                        chunk = f.read(min(length, 16 * 2**20))
                        if not chunk:
                            raise ModelError(f"{data_path}: shorter than its tensors")
                        out.write(chunk)
                        length -= len(chunk)
    return True


#: How a tensor's ``location`` entry is encoded (``StringStringEntryProto.key``, field 1, 8 bytes): every
#: tensor stored as external data has one, so a file without these bytes keeps all its weights inside.
_LOCATION_KEY = b"\n\x08location"


def _may_have_external_data(path: pathlib.Path) -> bool:
    """False only if the file at *path* cannot refer to external data (a scan of its bytes, no parse)."""
    with open(path, "rb") as f:
        try:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return data.find(_LOCATION_KEY) >= 0
        except ValueError:  # an empty file cannot be mapped
            return False


def ort_format_fits(path: str | os.PathLike) -> bool:
    """Whether the model at *path*, weights included, fits in one ORT format file (flatbuffers: < 2 GB).

    A file that holds all its weights (one :func:`save` wrote so, or one without any external-data entry)
    is measured by its size; only one that may refer to external data is parsed to add up its tensors.
    """
    p = pathlib.Path(path)
    st = p.stat()
    total = st.st_size
    if total > SINGLE_FILE_MAX_BYTES:
        return False
    if _identity(p, st) in _SAVED_WHOLE or not _may_have_external_data(p):
        return True
    proto = onnx.load(str(p), load_external_data=False)
    for tensor in onnx.external_data_helper._get_all_tensors(proto):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            info = {e.key: e.value for e in tensor.external_data}
            length = info.get("length")
            total += int(length) if length and length.isdigit() else (_nbytes(tensor.data_type,
                                                                               math.prod(tensor.dims)) or 0)
    return total <= SINGLE_FILE_MAX_BYTES


def _total_initializer_bytes(model: ir.Model) -> int:
    total = 0
    for graph in model.graphs():
        for value in graph.initializers.values():
            if value.const_value is not None:
                total += value.const_value.nbytes
    return total


def _rename_external(model_path: pathlib.Path, old: str, new: str) -> None:
    proto = onnx.load(str(model_path), load_external_data=False)
    for tensor in onnx.external_data_helper._get_all_tensors(proto):
        for entry in tensor.external_data:
            if entry.key == "location" and entry.value == old:
                entry.value = new
    onnx.save(proto, str(model_path))


def lean_session_options(options):
    """Set up a ``SessionOptions`` for a session made only to write an optimized model, never run.

    One thread, no memory arena or pattern planning, no weight pre-packing: what a session does *after*
    optimizing (getting ready to run) becomes cheap (a third to a half of the session's time on the
    light_* models), and pre-packing no longer holds a second copy of the weights.  The model written is
    the same, byte for byte.
    """
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = False
    options.enable_mem_pattern = False
    options.add_session_config_entry("session.disable_prepacking", "1")
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


#: Initializers of at least this size go to the optimized model's external data file: the ``.onnx`` stays
#: small (parsed in a few ms), the weights are memory-mapped when, and only when, something reads them.
#: Smaller tensors (shapes, axes, scales: what capability rules read) stay inline.
OPTIMIZED_EXTERNAL_MIN_BYTES = 1024
#: The name of that external data file, beside ``optimized.onnx``.
OPTIMIZED_DATA = "optimized.onnx.data"


def ort_optimized(path: str | os.PathLike, out_dir: str | os.PathLike, *, level: str = "basic",
                  inspected: bool = False, weights: bool = True) -> pathlib.Path:
    """The model as an onnxruntime session sees it after optimization at *level* (basic by default).

    Every ORT session applies the basic level, so this is the graph execution providers partition.
    The file is inspected (:func:`read_proto`) before onnxruntime opens it or its external data.  A model
    of a newer IR version than onnxruntime reads is given to it from memory with the IR version lowered
    (its external data still read from the model's folder).  *inspected*: the caller has just read the
    file with :func:`read_proto` (or :func:`validate`); it is not parsed again.

    *weights* False: onnxruntime writes the initializers of :data:`OPTIMIZED_EXTERNAL_MIN_BYTES` and more
    to the null device instead of :data:`OPTIMIZED_DATA` (through a symbolic link, removed afterwards).
    Writing them is most of what saving costs (a 2 GB model's session takes half the time without) and
    needs as much free disk as the weights; analysis seldom reads them.  :func:`load` reads the file
    with :class:`UnwrittenWeights` standing in for them.  Where no such link can be made, they are written.
    """
    import onnxruntime as ort

    levels = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    p = _check_path(path)
    if not inspected:
        read_proto(p)  # inspected here, whoever called us, before onnxruntime opens anything
    out = pathlib.Path(out_dir) / "optimized.onnx"
    so = ort.SessionOptions()
    so.graph_optimization_level = levels[level]
    so.optimized_model_filepath = str(out)
    so.log_severity_level = 4  # errors come back as exceptions: keep stderr to our one line
    so.add_session_config_entry("session.optimized_model_external_initializers_file_name", OPTIMIZED_DATA)
    so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes",
                                str(OPTIMIZED_EXTERNAL_MIN_BYTES))
    lean_session_options(so)
    model = ort_model_source(p, so)
    sink = None if weights else _null_sink(out.parent / OPTIMIZED_DATA)
    try:
        ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    except Exception as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{path}: onnxruntime cannot load the model: {message}") from None
    finally:
        # onnxruntime removes the link when done (the file it wrote seems empty); were a file there now,
        # the weights would be in it
        unwritten = sink is not None and (sink.is_symlink() or not os.path.lexists(sink))
        if unwritten and sink.is_symlink():
            sink.unlink()
    if unwritten:
        _UNWRITTEN.register(out, UnwrittenWeights(p, out, level))
    del model
    release_memory()
    return out


def _null_sink(target: pathlib.Path) -> pathlib.Path | None:
    """*target* made a symbolic link to the null device, or None where that cannot be done (or is not
    tried: outside POSIX systems, or where *target* already exists)."""
    if os.name != "posix" or not os.path.exists(os.devnull) or os.path.lexists(target):
        return None
    try:
        os.symlink(os.devnull, target)
    except (OSError, NotImplementedError):  # e.g. Windows without the privilege to make links
        return None
    return target


class UnwrittenWeights:
    """The large initializers of a model :func:`ort_optimized` wrote with ``weights=False``, on demand.

    :meth:`attach` puts a lazy tensor (``onnx_ir.LazyTensor``: name, type and shape known, data read on
    first use) in place of each initializer whose data went to the null device.  The first read of any
    of them runs the same onnxruntime session on the same input again, this time writing the weights
    (into ``weights/`` beside the model); every read then maps its tensor from there.  onnxruntime's
    optimizations are deterministic, and each tensor's name, type and shape are checked against the
    first session's.  The input must be the file it was (inspected again, as any input is): one
    changed in between is an error.
    """

    def __init__(self, source: pathlib.Path, model: pathlib.Path, level: str) -> None:
        self.source = source
        self.model = model
        self.level = level
        self._identity = _identity(source, source.stat())
        self._written: tuple[pathlib.Path, dict[str, onnx.TensorProto]] | None = None
        self._lock = threading.Lock()

    def attach(self, model: ir.Model, *, base_dir: pathlib.Path | None = None,
               graphs: Sequence[ir.Graph] | None = None) -> None:
        """Put lazy tensors in *model* (loaded from the optimized file) for the weights not written.

        *base_dir*: the folder of any other external tensor (:func:`from_proto`'s *base_dir*, set in the
        same walk).  *graphs*: all the graphs of *model*, when the caller knows them.
        """
        for graph in model.graphs() if graphs is None else graphs:
            for value in graph.initializers.values():
                tensor = value.const_value
                if not isinstance(tensor, ir.ExternalTensor):
                    continue
                if tensor.location != OPTIMIZED_DATA:
                    if base_dir is not None:
                        tensor.base_dir = base_dir  # type: ignore[misc]
                else:
                    value.const_value = self._lazy(tensor.name, tensor.dtype, tensor.shape, tensor.doc_string,
                                                   dict(tensor.metadata_props))

    def lazy_tensor(self, proto: onnx.TensorProto) -> ir.LazyTensor | None:
        """The lazy tensor :meth:`attach` would put in place of the initializer *proto* (external data), or
        None when its data is not in :data:`OPTIMIZED_DATA` (not one of those written to the null device)."""
        if _data_locations(proto) != [OPTIMIZED_DATA]:
            return None
        return self._lazy(proto.name or None, ir.DataType(proto.data_type), ir.Shape(proto.dims),
                          _optional(proto, "doc_string"),
                          ir.serde.deserialize_metadata_props(proto.metadata_props) or {})

    def _lazy(self, name: str | None, dtype: ir.DataType, shape: ir.Shape, doc_string: str | None,
              metadata_props: dict[str, str]) -> ir.LazyTensor:
        return ir.LazyTensor(functools.partial(self.tensor, name, dtype, shape), dtype=dtype, shape=shape, cache=True,
                             name=name, doc_string=doc_string, metadata_props=metadata_props)

    def tensor(self, name: str, dtype: ir.DataType, shape: ir.Shape) -> ir.TensorProtocol:
        """The initializer *name* as onnxruntime wrote it (its type and shape must be *dtype* and *shape*)."""
        with self._lock:
            if self._written is None:
                try:
                    same = _identity(self.source, self.source.stat()) == self._identity
                except OSError:
                    same = False
                if not same:
                    raise ModelError(f"{self.source}: the model changed while it was being analyzed")
                folder = self.model.parent / "weights"
                folder.mkdir(exist_ok=True)
                written = ort_optimized(self.source, folder, level=self.level)
                self._written = folder, {t.name: t for t in read_proto(written).graph.initializer}
        folder, tensors = self._written
        found = tensors.get(name)
        if found is None:
            raise ModelError(f"{self.source}: onnxruntime's second optimization has no initializer {name!r}")
        result = ir.serde.deserialize_tensor(found, folder)
        if result.dtype != dtype or result.shape != shape:
            raise ModelError(f"{self.source}: onnxruntime's second optimization wrote initializer {name!r} as "
                             f"{result.dtype.name}{list(result.shape)}, the first as {dtype.name}{list(shape)}")
        return result


class _Registry:
    """Optimized model files written without weights -> their :class:`UnwrittenWeights`; an entry holds
    only while the file is the one written (same identity), and the oldest go beyond 64."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[tuple, UnwrittenWeights]] = {}
        self._lock = threading.Lock()

    def register(self, path: pathlib.Path, weights: UnwrittenWeights) -> None:
        key = os.path.realpath(path)
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (_identity(path, path.stat()), weights)
            while len(self._entries) > 64:
                del self._entries[next(iter(self._entries))]

    def get(self, path: pathlib.Path) -> UnwrittenWeights | None:
        key = os.path.realpath(path)
        with self._lock:
            entry = self._entries.get(key)
        if entry is None:
            return None
        try:
            same = entry[0] == _identity(path, path.stat())
        except OSError:
            same = False
        return entry[1] if same and not os.path.lexists(path.parent / OPTIMIZED_DATA) else None


_UNWRITTEN = _Registry()


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


#: :func:`release_memory` leaves less free heap than this in the process: giving it back costs more time
#: than it is worth (about 10 ms for the 180-195 MB free after light_resnet50's or light_shufflenet's
#: session, 1-3 ms for 6-60 MB after the other light_* models), and the next allocations reuse it instead
#: of faulting fresh pages in.  It is memory the session had just used, so a check's peak stays the
#: session's own; what a large model's session frees (VGG-19: 550 MB of weights; million-node graphs:
#: gigabytes) is still given back.
RELEASE_MIN_FREE_BYTES = 256 * 2**20


def release_memory() -> None:
    """Give the memory a finished onnxruntime session freed back to the system (glibc's ``malloc_trim``).

    glibc keeps freed heap memory in the process: after a session over a large graph, hundreds of MB
    (gigabytes at a million nodes) stay in the RSS and whatever is built next adds to them.  Less than
    :data:`RELEASE_MIN_FREE_BYTES` free (``mallinfo2``, glibc 2.33+) is kept.  Elsewhere (other C
    libraries, macOS, Windows) this does nothing.
    """
    try:
        libc = _libc()
    except (OSError, AttributeError):
        return
    if _free_heap_bytes(libc) >= RELEASE_MIN_FREE_BYTES:
        libc.malloc_trim(0)


@functools.cache
def _libc():
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                         "fsmblks", "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.malloc_trim  # noqa: B018  (AttributeError here, not later, for a C library without it)
    if hasattr(libc, "mallinfo2"):
        libc.mallinfo2.restype = MallInfo2
    return libc


def _free_heap_bytes(libc) -> int:
    """Free bytes in glibc's heap (``mallinfo2().fordblks``); before glibc 2.33, enough to trim as before."""
    mallinfo2 = getattr(libc, "mallinfo2", None)
    return RELEASE_MIN_FREE_BYTES if mallinfo2 is None else mallinfo2().fordblks


def ort_model_source(path: str | os.PathLike, options) -> str | bytes:
    """What to hand ``onnxruntime.InferenceSession`` for the model at *path* (an already inspected file).

    The path itself, unless the file's IR version is newer than onnxruntime reads (recent ``onnx``
    writes IR 14, which onnxruntime 1.31 refuses): then the model's bytes with the IR version lowered to
    :data:`MAX_IR_VERSION`, and *options* (a ``SessionOptions``) told to read external data from the
    model's folder.
    """
    p = pathlib.Path(path)
    with open(p, "rb") as f:
        head = f.read(11)
    if head[4:8] == b"ORTM":  # an ORT format (flatbuffer) model: onnxruntime reads it as it is
        return str(p)
    version = _peek_ir_version(p, head)
    if version is not None and version <= MAX_IR_VERSION:
        return str(p)
    proto = onnx.load(str(p), load_external_data=False)
    if proto.ir_version <= MAX_IR_VERSION:
        return str(p)
    proto.ir_version = MAX_IR_VERSION
    options.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                     str(p.parent.resolve()))
    return proto.SerializeToString()


def _peek_ir_version(p: pathlib.Path, head: bytes | None = None) -> int | None:
    """The IR version from the first bytes of a model file (None when it is not the first field); *head*:
    its first 11 bytes, when already read."""
    if head is None:
        with open(p, "rb") as f:
            head = f.read(11)
    if not head.startswith(b"\x08"):  # ir_version is field 1; serializers write it first
        return None
    value = 0
    for shift, byte in zip(range(0, 70, 7), head[1:], strict=False):
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
    return None


class _TailBuilder:
    """A minimal back-to-front flatbuffer writer whose buffer ends with *tail* bytes it never holds.

    Offsets count from the end of the whole buffer, as flatbuffers' builders do, so objects in the tail
    (already written by onnxruntime) can be referred to by their distance from the end.
    """

    def __init__(self, tail: int, minalign: int) -> None:
        self.tail = tail
        self.minalign = minalign
        self.data = bytearray()  # the bytes in front of the tail, built back to front
        self.slots: dict[int, int] = {}
        self.start = 0

    def offset(self) -> int:
        return self.tail + len(self.data)

    def _prepend(self, raw: bytes) -> None:
        self.data[0:0] = raw

    def prep(self, size: int, additional: int) -> None:
        self.minalign = max(self.minalign, size)
        pad = (-(self.offset() + additional)) % size
        self._prepend(b"\0" * pad)

    def uoffset(self, target: int) -> None:
        self.prep(4, 0)
        self._prepend((self.offset() + 4 - target).to_bytes(4, "little"))

    def string(self, text: str) -> int:
        raw = text.encode()
        self.prep(4, len(raw) + 1)
        self._prepend(len(raw).to_bytes(4, "little") + raw + b"\0")
        return self.offset()

    def vector(self, offsets: list[int]) -> int:
        self.prep(4, 4 * len(offsets))
        for target in reversed(offsets):
            self.uoffset(target)
        self._prepend(len(offsets).to_bytes(4, "little"))
        return self.offset()

    def begin(self) -> None:
        self.slots = {}
        self.start = self.offset()

    def field_offset(self, slot: int, target: int) -> None:
        self.uoffset(target)
        self.slots[slot] = self.offset()

    def field_scalar(self, slot: int, value: int, size: int, signed: bool = False) -> None:
        self.prep(size, 0)
        self._prepend(value.to_bytes(size, "little", signed=signed))
        self.slots[slot] = self.offset()

    def end(self) -> int:
        self.prep(4, 0)
        self._prepend(b"\0\0\0\0")  # soffset to the vtable, patched below
        table = self.offset()
        fields = [table - self.slots[i] if i in self.slots else 0 for i in range(max(self.slots, default=-1) + 1)]
        vtable = [4 + 2 * len(fields), table - self.start, *fields]
        self._prepend(b"".join(v.to_bytes(2, "little") for v in vtable))
        vtable_offset = self.offset()
        position = len(self.data) - (table - self.tail)
        self.data[position:position + 4] = (vtable_offset - table).to_bytes(4, "little", signed=True)
        return table

    def finish(self, root: int, identifier: bytes) -> bytes:
        self.prep(self.minalign, 4 + len(identifier))
        self._prepend(identifier)
        self.uoffset(root)
        return bytes(self.data)


def canonicalize_ort_file(path: str | os.PathLike) -> None:
    """Rewrite an ORT format file so that the same model always gives the same bytes.

    onnxruntime serializes its kernel-type-string resolver from hash maps whose order changes from one
    process to the next, so two conversions of one model differ in a few hundred bytes before the model
    itself.  Those tables are rebuilt here in sorted order; the model (written first by onnxruntime, so
    at the end of the buffer) is copied byte for byte at the same distance from the end, which keeps every
    offset and alignment in it valid.  The model is streamed, never held in memory.  Files of another
    layout are left as they are.
    """
    import mmap

    from onnxruntime.tools.ort_format_model.ort_flatbuffers_py.fbs import InferenceSession

    p = pathlib.Path(path)
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        total = len(data)
        if total < 8 or data[4:8] != b"ORTM":
            return
        session = InferenceSession.InferenceSession.GetRootAs(data, 0)
        model, resolver = session.Model(), session.KernelTypeStrResolver()
        if model is None or resolver is None or session._tab.Offset(8):  # 8: the deprecated session_state
            return
        # The model's region starts at its table or at its vtable, which flatbuffers writes just before it.
        table = model._tab.Pos
        model_pos = min(table, table - int.from_bytes(data[table:table + 4], "little", signed=True))
        version = session.OrtVersion()
        entries = []
        for i in range(resolver.OpKernelTypeStrArgsLength()):
            entry = resolver.OpKernelTypeStrArgs(i)
            kernel_args = []
            for j in range(entry.KernelTypeStrArgsLength()):
                item = entry.KernelTypeStrArgs(j)
                args = [(item.Args(k).ArgType(), item.Args(k).Index()) for k in range(item.ArgsLength())]
                kernel_args.append((item.KernelTypeStr().decode(), args))
            entries.append((entry.OpId().decode(), sorted(kernel_args)))
    if model_pos < 8:
        return
    entries.sort()
    tail = total - model_pos
    align = 8
    while align < 4096 and total % (align * 2) == 0:
        align *= 2
    b = _TailBuilder(tail, align)
    entry_offsets = []
    for op_id, kernel_args in entries:
        item_offsets = []
        for kernel_type_str, args in kernel_args:
            arg_offsets = []
            for arg_type, index in args:
                b.begin()
                b.field_scalar(1, index, 4)
                b.field_scalar(0, arg_type, 1, signed=True)
                arg_offsets.append(b.end())
            args_vector = b.vector(arg_offsets)
            name = b.string(kernel_type_str)
            b.begin()
            b.field_offset(1, args_vector)
            b.field_offset(0, name)
            item_offsets.append(b.end())
        items_vector = b.vector(item_offsets)
        op = b.string(op_id)
        b.begin()
        b.field_offset(1, items_vector)
        b.field_offset(0, op)
        entry_offsets.append(b.end())
    entries_vector = b.vector(entry_offsets)
    b.begin()
    b.field_offset(0, entries_vector)
    resolver_offset = b.end()
    version_offset = b.string(version.decode()) if version is not None else None
    b.begin()
    b.field_offset(3, resolver_offset)
    b.field_offset(1, total - table)
    if version_offset is not None:
        b.field_offset(0, version_offset)
    root = b.end()
    head = b.finish(root, b"ORTM")
    with atomic_path(p) as tmp, open(tmp, "wb") as out, open(p, "rb") as source:
        out.write(head)
        source.seek(model_pos)
        while chunk := source.read(16 * 2**20):
            out.write(chunk)
