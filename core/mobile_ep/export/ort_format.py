"""ORT format: the EP-aware model converted by onnxruntime itself, made byte-for-byte deterministic; and
how a model file is handed to an onnxruntime session (also the sessions that only write a model:
:func:`lean_session_options`)."""

from __future__ import annotations

import mmap
import os
import pathlib

import onnx

from mobile_ep import model_io as mir
from mobile_ep.errors import ModelError
from mobile_ep.model_io import saving
from mobile_ep.sessions import lean_session_options

#: The flatbuffers file identifier of an ORT format model (bytes 4-8 of the file; onnxruntime's ort.fbs).
_ORT_FILE_IDENTIFIER = b"ORTM"

__all__ = ["is_ort_format", "write_ort", "ort_format_ops", "ort_format_fits", "ort_format_refusal", "ort_model_source", "model_bytes", "lean_session_options",
           "canonicalize_ort_file"]


def write_ort(onnx_path: str | os.PathLike, ort_path: str | os.PathLike) -> pathlib.Path:
    """Convert to ORT format the way ``convert_onnx_models_to_ort --optimization_style Runtime`` does.

    All optimization levels run, but ORT's minimal-build optimizations (Conv+activation fusion, QDQ
    fusions, ...) are only *recorded*, not applied: on the device they are replayed for the nodes the
    execution provider did not take.  So every node the EP can claim stays a plain ONNX op, and the CPU
    part still gets ORT's fusions.  The NCHWc transformer is disabled as for any non-x86 target.
    """
    from mobile_ep import sessions

    target = pathlib.Path(ort_path)
    with mir.atomic_path(target, make_parent=False) as tmp:  # (on a thread: its folder may be gone)
        # Mobile targets are ARM: keep int8 QDQ as is (ORT's converter sets this for --target_platform arm).
        so = sessions.options(level="all", write=tmp, lean=True, config={  # (only written, never run: lean)
            "session.save_model_format": "ORT", "optimization.minimal_build_optimizations": "save",
            "session.qdqisint8allowed": "1"})
        try:
            sessions.open_session(onnx_path, so, disabled_optimizers=["NchwcTransformer"])
        except Exception as exc:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelError(f"onnxruntime could not convert {onnx_path} to ORT format: {message}") from None
        canonicalize_ort_file(tmp)  # onnxruntime's hash-map order differs per process: same model, same bytes
    return target


def ort_format_ops(ort_path: str | os.PathLike) -> set[str]:
    """The op types (``domain:op`` for non-default domains) an ORT format model's main graph holds."""
    from onnxruntime.tools.ort_format_model.ort_flatbuffers_py.fbs import InferenceSession

    data = pathlib.Path(ort_path).read_bytes()
    session = InferenceSession.InferenceSession.GetRootAsInferenceSession(data, 0)
    graph = session.Model().Graph()
    ops = set()
    for i in range(graph.NodesLength()):
        node = graph.Nodes(i)
        domain = node.Domain().decode() if node.Domain() else ""
        op = node.OpType().decode()
        ops.add(op if domain in ("", "ai.onnx") else f"{domain}:{op}")
    return ops


def ort_format_fits(path: str | os.PathLike) -> bool:
    """Whether a model :func:`mobile_ep.model_io.save` wrote at *path*, weights included, fits in one ORT format
    file (flatbuffers: 2 GB; :data:`mobile_ep.model_io.saving.SINGLE_FILE_MAX_BYTES`): its size and that of the
    ``<name>.data`` file ``save`` puts larger weights in."""
    p = pathlib.Path(path)
    data = p.with_name(p.name + ".data")
    total = p.stat().st_size + (data.stat().st_size if data.exists() else 0)
    return total <= saving.SINGLE_FILE_MAX_BYTES


#: Element types onnxruntime's ORT format cannot hold (its flatbuffers schema has no tensor type for them).
_UNSUPPORTED_ELEM_TYPES = {onnx.TensorProto.INT4: "int4", onnx.TensorProto.UINT4: "uint4",
                           getattr(onnx.TensorProto, "FLOAT4E2M1", -1): "float4e2m1"}


def ort_format_refusal(path: str | os.PathLike) -> str | None:
    """Why the ORT format cannot hold the model at *path* (optional-typed values, 4-bit tensors), or None."""
    proto = onnx.load_model(str(path), format="protobuf", load_external_data=False)

    def refused_type(type_proto) -> str | None:
        kind = type_proto.WhichOneof("value")
        if kind == "optional_type":
            return "optional types"
        if kind in ("sequence_type", "optional_type"):
            return refused_type(getattr(type_proto, kind).elem_type)
        if kind == "map_type":
            return refused_type(type_proto.map_type.value_type)
        if kind in ("tensor_type", "sparse_tensor_type"):
            name = _UNSUPPORTED_ELEM_TYPES.get(getattr(type_proto, kind).elem_type)
            return f"{name} tensors" if name else None
        return None

    for graph in mir.graphs(proto.graph):
        for value in [*graph.input, *graph.output, *graph.value_info]:
            why = refused_type(value.type)
            if why:
                return f"{why} ({value.name!r})"
        tensors = [*graph.initializer, *(s.values for s in graph.sparse_initializer)]
        tensors += [a.t for n in graph.node for a in n.attribute if a.HasField("t")]
        for tensor in tensors:
            name = _UNSUPPORTED_ELEM_TYPES.get(tensor.data_type)
            if name:
                return f"{name} tensors ({tensor.name!r})"
    return None


def is_ort_format(path: str | os.PathLike) -> bool:
    """Whether the file at *path* is an ORT format model (its flatbuffers file identifier)."""
    with open(path, "rb") as f:
        return f.read(8)[4:8] == _ORT_FILE_IDENTIFIER


def ort_model_source(path: str | os.PathLike, options, proto: onnx.ModelProto | None = None) -> str | bytes:
    """What to hand ``onnxruntime.InferenceSession`` for the model at *path* (a file already read with
    :func:`mobile_ep.model_io.read_proto`, or one of ours; *proto*: that reading, if at hand).

    The path itself, unless the file's IR version is newer than onnxruntime reads (recent ``onnx`` writes
    IR 14, which onnxruntime 1.31 refuses): then the model's bytes with the IR version lowered to
    :data:`mobile_ep.model_io.MAX_IR_VERSION`, and *options* (a ``SessionOptions``) told to read external
    data from the model's folder.
    """
    p = pathlib.Path(path)
    if is_ort_format(p):
        return str(p)  # an ORT format model: onnxruntime reads it as it is
    if proto is None:
        proto = onnx.load_model(str(p), format="protobuf", load_external_data=False)
    if proto.ir_version <= mir.MAX_IR_VERSION:
        return str(p)
    return model_bytes(proto, p.parent, options)


def model_bytes(proto: onnx.ModelProto, folder: pathlib.Path, options) -> bytes:
    """*proto* serialized for ``onnxruntime.InferenceSession``, its IR version lowered to
    :data:`mobile_ep.model_io.MAX_IR_VERSION` when newer (*proto* itself is left as it was), and *options* (a
    ``SessionOptions``) told to read its external data from *folder*."""
    if proto.ir_version > mir.MAX_IR_VERSION:
        lowered = onnx.ModelProto()
        lowered.CopyFrom(proto)
        lowered.ir_version = mir.MAX_IR_VERSION
        proto = lowered
    options.add_session_config_entry("session.model_external_initializers_file_folder_path", str(folder.resolve()))
    return proto.SerializeToString()


def canonicalize_ort_file(path: str | os.PathLike) -> None:
    """Rewrite an ORT format file so that the same model always gives the same bytes.

    onnxruntime serializes its kernel-type-string resolver from hash maps whose order changes from one
    process to the next, so two conversions of one model differ in a few hundred bytes before the model
    itself.  The session table and the resolver are built again here, sorted (flatbuffers' ``Builder`` and
    the schema's generated functions, which onnxruntime ships).  The model, which onnxruntime writes first
    and so sits at the end of the buffer, is copied byte for byte at the same distance from the end, which
    keeps every offset and alignment in it valid; it is streamed, never held in memory.  Files of another
    layout are left as they are.
    """
    import flatbuffers
    from onnxruntime.tools.ort_format_model.ort_flatbuffers_py.fbs import (
        ArgTypeAndIndex,
        InferenceSession,
        KernelTypeStrArgsEntry,
        KernelTypeStrResolver,
        OpIdKernelTypeStrArgsEntry,
    )

    p = pathlib.Path(path)
    total = p.stat().st_size
    if total < 8:
        return
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if not InferenceSession.InferenceSession.InferenceSessionBufferHasIdentifier(data, 0):
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
    # flatbuffers counts offsets and alignments from the end of the buffer: the new head is built as if the
    # model followed it directly, with a gap of zeros in between that keeps the file's length a multiple of
    # the old file's alignment (and so every byte of the model at its alignment).
    tail = total - model_pos
    align = 8
    while align < 4096 and total % (align * 2) == 0:
        align *= 2
    gap = -tail % align
    b = flatbuffers.Builder(4096)
    b.Prep(align, 0)

    def vector(start, offsets: list[int]) -> int:
        start(b, len(offsets))
        for offset in reversed(offsets):
            b.PrependUOffsetTRelative(offset)
        return b.EndVector()

    entry_offsets = []
    for op_id, kernel_args in sorted(entries):
        item_offsets = []
        for kernel_type_str, args in kernel_args:
            arg_offsets = []
            for arg_type, index in args:
                ArgTypeAndIndex.Start(b)
                ArgTypeAndIndex.AddIndex(b, index)
                ArgTypeAndIndex.AddArgType(b, arg_type)
                arg_offsets.append(ArgTypeAndIndex.End(b))
            args_vector = vector(KernelTypeStrArgsEntry.StartArgsVector, arg_offsets)
            name = b.CreateString(kernel_type_str)
            KernelTypeStrArgsEntry.Start(b)
            KernelTypeStrArgsEntry.AddArgs(b, args_vector)
            KernelTypeStrArgsEntry.AddKernelTypeStr(b, name)
            item_offsets.append(KernelTypeStrArgsEntry.End(b))
        items_vector = vector(OpIdKernelTypeStrArgsEntry.StartKernelTypeStrArgsVector, item_offsets)
        op = b.CreateString(op_id)
        OpIdKernelTypeStrArgsEntry.Start(b)
        OpIdKernelTypeStrArgsEntry.AddKernelTypeStrArgs(b, items_vector)
        OpIdKernelTypeStrArgsEntry.AddOpId(b, op)
        entry_offsets.append(OpIdKernelTypeStrArgsEntry.End(b))
    entries_vector = vector(KernelTypeStrResolver.StartOpKernelTypeStrArgsVector, entry_offsets)
    KernelTypeStrResolver.Start(b)
    KernelTypeStrResolver.AddOpKernelTypeStrArgs(b, entries_vector)
    resolver_offset = KernelTypeStrResolver.End(b)
    version_offset = b.CreateString(version.decode()) if version is not None else None
    InferenceSession.Start(b)
    InferenceSession.AddKernelTypeStrResolver(b, resolver_offset)
    InferenceSession.AddModel(b, -(gap + table - model_pos))  # negative: past the builder's end, in the model
    if version_offset is not None:
        InferenceSession.AddOrtVersion(b, version_offset)
    b.Finish(InferenceSession.End(b), file_identifier=b"ORTM")
    with mir.atomic_path(p, make_parent=False) as tmp, open(tmp, "wb") as out, open(p, "rb") as source:
        out.write(b.Output())
        out.write(bytes(gap))
        source.seek(model_pos)
        while chunk := source.read(16 * 2**20):
            out.write(chunk)
