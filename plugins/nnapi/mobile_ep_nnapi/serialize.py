"""The serialized NNAPI model: a versioned, little-endian binary (specification: ``plugins/nnapi/docs/format.md``).

:func:`write` turns an :class:`~mobile_ep_nnapi.model.NnapiModel` into bytes; :func:`read` turns bytes back
into a model, refusing anything truncated, inconsistent or out of range with a
:class:`~mobile_ep.CompileError` that says where.  The C++ adapter (``adapter/src/nnapi_model_loader.cc``)
reads the same format with the same checks.
"""

from __future__ import annotations

import struct

import numpy as np

from mobile_ep import CompileError

from .model import ChannelQuant, NnapiModel, Operand

__all__ = ["MAGIC", "VERSION", "FORMAT", "DATA_ALIGNMENT", "VALUE_ALIGNMENT", "MAX_RANK", "write", "read"]

MAGIC = b"MEPNNAPI"
#: (major, minor): a reader refuses another major version; minor versions only add optional data.
VERSION = (1, 0)
#: ``CompiledPartition.format`` of payloads holding this binary.
FORMAT = f"nnapi-model/{VERSION[0]}"
#: The data area starts at a multiple of this many bytes from the start of the blob ...
DATA_ALIGNMENT = 64
#: ... and every constant value at a multiple of this many bytes from the start of the data area.
VALUE_ALIGNMENT = 16
#: The highest operand rank the format accepts.
MAX_RANK = 8

_HEADER = struct.Struct("<8sHHIIIiIIIIIIIQ")
assert _HEADER.size == 64
_FLAG_RELAX_FP16 = 1
_OPERAND = struct.Struct("<iIfiI")
_OPERAND_PER_CHANNEL = 1
_CONSTANT = struct.Struct("<IIQQ")
_OPERATION = struct.Struct("<iII")


def _pad(size: int, alignment: int) -> int:
    return (-size) % alignment


def write(model: NnapiModel) -> bytes:
    """The model as bytes (validated first)."""
    model.validate()
    body = bytearray()
    for operand in model.operands:
        flags = _OPERAND_PER_CHANNEL if operand.channel_quant is not None else 0
        body += _OPERAND.pack(operand.type, len(operand.dims), operand.scale, operand.zero_point, flags)
        body += struct.pack(f"<{len(operand.dims)}I", *operand.dims)
        if operand.channel_quant is not None:
            cq = operand.channel_quant
            body += struct.pack(f"<II{len(cq.scales)}f", cq.channel_dim, len(cq.scales), *cq.scales)
    data = bytearray()
    constants = []
    for index in sorted(model.values):
        value = model.values[index]
        data += b"\0" * _pad(len(data), VALUE_ALIGNMENT)
        constants.append((index, len(data), len(value)))
        data += value
    for index, offset, length in constants:
        body += _CONSTANT.pack(index, 0, offset, length)
    for op in model.operations:
        body += _OPERATION.pack(op.type, len(op.inputs), len(op.outputs))
        body += struct.pack(f"<{len(op.inputs) + len(op.outputs)}I", *op.inputs, *op.outputs)
    body += struct.pack(f"<{len(model.inputs)}I", *model.inputs)
    body += struct.pack(f"<{len(model.outputs)}I", *model.outputs)
    for name in (*model.input_names, *model.output_names):
        encoded = name.encode("utf-8")
        body += struct.pack("<I", len(encoded)) + encoded + b"\0" * _pad(len(encoded), 4)
    data_offset = _HEADER.size + len(body)
    data_offset += _pad(data_offset, DATA_ALIGNMENT)
    header = _HEADER.pack(
        MAGIC, VERSION[0], VERSION[1], _HEADER.size, _FLAG_RELAX_FP16 if model.relax_fp16 else 0,
        model.feature_level, model.preference, model.device_policy, len(model.operands), len(model.operations),
        len(model.inputs), len(model.outputs), len(constants), data_offset, len(data),
    )
    blob = header + bytes(body)
    return blob + b"\0" * (data_offset - len(blob)) + bytes(data)


class _Reader:
    def __init__(self, blob: bytes, end: int) -> None:
        self.blob = blob
        self.pos = 0
        self.end = end

    def take(self, fmt: str | struct.Struct, what: str) -> tuple:
        s = fmt if isinstance(fmt, struct.Struct) else struct.Struct("<" + fmt)
        if self.pos + s.size > self.end:
            raise CompileError(f"serialized NNAPI model is truncated: {what} at byte {self.pos} needs {s.size} bytes, "
                               f"{max(self.end - self.pos, 0)} left")
        values = s.unpack_from(self.blob, self.pos)
        self.pos += s.size
        return values

    def count(self, n: int, size: int, what: str) -> int:
        """Refuse a count that cannot fit in what is left (before allocating anything for it)."""
        if n * size > self.end - self.pos:
            raise CompileError(f"serialized NNAPI model is corrupt: {n} {what} cannot fit in the "
                               f"{self.end - self.pos} bytes left at byte {self.pos}")
        return n


def read(blob: bytes) -> NnapiModel:
    """Parse and validate a serialized model; :class:`CompileError` for anything malformed."""
    blob = bytes(blob)
    if len(blob) < _HEADER.size:
        raise CompileError(f"serialized NNAPI model is truncated: {len(blob)} bytes, the header alone is {_HEADER.size}")
    (magic, major, minor, header_size, flags, feature_level, preference, policy, n_operands, n_operations,
     n_inputs, n_outputs, n_constants, data_offset, data_size) = _HEADER.unpack_from(blob)
    if magic != MAGIC:
        raise CompileError(f"not a serialized NNAPI model (magic {magic!r}, expected {MAGIC!r})")
    if major != VERSION[0]:
        raise CompileError(f"serialized NNAPI model version {major}.{minor} is not supported (this reader: "
                           f"{VERSION[0]}.x)")
    if header_size < _HEADER.size or header_size > len(blob):
        raise CompileError(f"serialized NNAPI model has a bad header size {header_size}")
    if flags & ~_FLAG_RELAX_FP16:
        raise CompileError(f"serialized NNAPI model has unknown flags {flags:#x}")
    if data_offset % DATA_ALIGNMENT or data_offset < header_size:
        raise CompileError(f"serialized NNAPI model: data offset {data_offset} is not a multiple of "
                           f"{DATA_ALIGNMENT} after the header")
    if data_offset + data_size != len(blob):
        raise CompileError(f"serialized NNAPI model is {'truncated' if data_offset + data_size > len(blob) else 'too long'}"
                           f": {len(blob)} bytes, the header says {data_offset + data_size}")
    r = _Reader(blob, data_offset)
    r.pos = header_size
    model = NnapiModel(feature_level=feature_level, relax_fp16=bool(flags & _FLAG_RELAX_FP16),
                       preference=preference, device_policy=policy)
    r.count(n_operands, _OPERAND.size, "operands")
    for index in range(n_operands):
        code, rank, scale, zero_point, oflags = r.take(_OPERAND, f"operand {index}")
        if rank > MAX_RANK:
            raise CompileError(f"serialized NNAPI model: operand {index} has rank {rank} (at most {MAX_RANK})")
        if oflags & ~_OPERAND_PER_CHANNEL:
            raise CompileError(f"serialized NNAPI model: operand {index} has unknown flags {oflags:#x}")
        dims = r.take(f"{rank}I", f"operand {index} dims")
        channel_quant = None
        if oflags & _OPERAND_PER_CHANNEL:
            channel_dim, n_scales = r.take("II", f"operand {index} per-channel parameters")
            r.count(n_scales, 4, "per-channel scales")
            channel_quant = ChannelQuant(channel_dim, tuple(float(s) for s in r.take(f"{n_scales}f", f"operand {index} scales")))
        model.operands.append(Operand(code, tuple(dims), float(scale), zero_point, channel_quant))
    r.count(n_constants, _CONSTANT.size, "constant values")
    for number in range(n_constants):
        index, reserved, offset, length = r.take(_CONSTANT, f"constant value {number}")
        if reserved:
            raise CompileError(f"serialized NNAPI model: constant value {number} has a non-zero reserved field")
        if offset % VALUE_ALIGNMENT:
            raise CompileError(f"serialized NNAPI model: constant value {number} at data offset {offset} is not "
                               f"{VALUE_ALIGNMENT}-byte aligned")
        if offset + length > data_size:
            raise CompileError(f"serialized NNAPI model: constant value {number} ({length} bytes at data offset "
                               f"{offset}) lies outside the {data_size}-byte data area")
        if index in model.values:
            raise CompileError(f"serialized NNAPI model: operand {index} has two constant values")
        model.values[index] = blob[data_offset + offset:data_offset + offset + length]
    r.count(n_operations, _OPERATION.size, "operations")
    for number in range(n_operations):
        code, n_in, n_out = r.take(_OPERATION, f"operation {number}")
        r.count(n_in + n_out, 4, f"operand numbers of operation {number}")
        ids = r.take(f"{n_in + n_out}I", f"operation {number} operands")
        model.add_operation(code, ids[:n_in], ids[n_in:])
    r.count(n_inputs + n_outputs, 4, "model inputs and outputs")
    model.inputs = list(r.take(f"{n_inputs}I", "model inputs"))
    model.outputs = list(r.take(f"{n_outputs}I", "model outputs"))
    names = []
    for number in range(n_inputs + n_outputs):
        (length,) = r.take("I", f"name {number} length")
        r.count(length, 1, "name bytes")
        raw = blob[r.pos:r.pos + length]
        r.pos += length + _pad(length, 4)
        if r.pos > r.end:
            raise CompileError(f"serialized NNAPI model is truncated in name {number}")
        try:
            names.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise CompileError(f"serialized NNAPI model: name {number} is not UTF-8") from None
    model.input_names, model.output_names = names[:n_inputs], names[n_inputs:]
    if any(blob[r.pos:data_offset]):
        raise CompileError(f"serialized NNAPI model: unexpected bytes between byte {r.pos} and the data area")
    return model.validate()


def describe(model: NnapiModel) -> str:
    """A human-readable listing (for debugging and ``mobile-ep`` reports)."""
    lines = [f"NNAPI model: feature level {model.feature_level}, relax_fp16={model.relax_fp16}, "
             f"preference={model.preference}, device_policy={model.device_policy}"]
    for i, operand in enumerate(model.operands):
        value = ""
        if i in model.values and operand.nbytes() <= 64:
            value = f" = {np.array2string(model.value(i).reshape(-1), separator=',')}"
        elif i in model.values:
            value = f" = <{len(model.values[i])} bytes>"
        lines.append(f"  %{i}: {operand.describe()}{value}")
    for op in model.operations:
        lines.append(f"  {op.code.name}({', '.join(f'%{i}' for i in op.inputs)}) -> "
                     f"{', '.join(f'%{i}' for i in op.outputs)}")
    lines.append(f"  inputs {list(zip(model.input_names, model.inputs, strict=True))}, "
                 f"outputs {list(zip(model.output_names, model.outputs, strict=True))}")
    return "\n".join(lines)
