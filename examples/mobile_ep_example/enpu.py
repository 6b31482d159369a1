"""ENPU program format, version 1: what the example NPU's driver loads.

All integers little-endian.  Tensors are float32, NCHW, with static shapes::

    header     "ENPU" u16 version=1 u16 flags=0 u32 n_tensors u32 n_ops u32 n_inputs u32 n_outputs
    tensors    n_tensors x (u8 kind [0 activation, 1 constant] u8 dtype [1 float32] u16 rank
                            u32 dims[rank] [constant: u32 offset u32 nbytes into the weights])
    ops        n_ops x (u16 opcode u8 n_in u8 n_out u16 n_params u16 reserved
                        u32 in[n_in] u32 out[n_out] i32 params[n_params])
    inputs     u32 tensor[n_inputs]      (the order a caller passes them)
    outputs    u32 tensor[n_outputs]
    weights    u32 size, then the constant tensors' bytes (each 16-byte aligned)

Op parameters: CONV2D ``stride_h stride_w pad_top pad_left pad_bottom pad_right dilation_h
dilation_w group`` (inputs x, w[, b]); MAXPOOL2D ``kernel_h kernel_w stride_h stride_w pad_top
pad_left pad_bottom pad_right dilation_h dilation_w``; RELU, ADD, MUL none (ADD and MUL broadcast
like numpy).  Output shapes are in the tensor table.  ``runtime/enpu_runtime.h`` is the C view.
"""

from __future__ import annotations

import dataclasses
import enum
import struct

import numpy as np

__all__ = ["FORMAT", "VERSION", "FormatError", "Op", "Tensor", "Operation", "Program", "write", "read"]

MAGIC = b"ENPU"
VERSION = 1
#: The ``format`` of the payloads holding this program format.
FORMAT = f"enpu/{VERSION}"
_ALIGN = 16


class FormatError(ValueError):
    """The bytes are not a valid ENPU program."""


class Op(enum.IntEnum):
    RELU = 1
    ADD = 2
    MUL = 3
    CONV2D = 4
    MAXPOOL2D = 5


#: (inputs, outputs, parameters) each opcode takes; inputs as (min, max).
SIGNATURES = {
    Op.RELU: ((1, 1), 1, 0),
    Op.ADD: ((2, 2), 1, 0),
    Op.MUL: ((2, 2), 1, 0),
    Op.CONV2D: ((2, 3), 1, 9),
    Op.MAXPOOL2D: ((1, 1), 1, 10),
}


@dataclasses.dataclass
class Tensor:
    shape: tuple[int, ...]
    #: The value of a constant tensor (float32); ``None`` for activations.
    data: np.ndarray | None = None


@dataclasses.dataclass
class Operation:
    op: Op
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    params: tuple[int, ...] = ()


@dataclasses.dataclass
class Program:
    tensors: list[Tensor] = dataclasses.field(default_factory=list)
    operations: list[Operation] = dataclasses.field(default_factory=list)
    inputs: list[int] = dataclasses.field(default_factory=list)
    outputs: list[int] = dataclasses.field(default_factory=list)

    def add_tensor(self, shape: tuple[int, ...], data: np.ndarray | None = None) -> int:
        if data is not None:
            data = np.ascontiguousarray(data, dtype=np.float32).reshape(shape)
        self.tensors.append(Tensor(tuple(int(d) for d in shape), data))
        return len(self.tensors) - 1

    def add_op(self, op: Op, inputs: tuple[int, ...], outputs: tuple[int, ...], params: tuple[int, ...] = ()) -> None:
        self.operations.append(Operation(op, tuple(inputs), tuple(outputs), tuple(int(p) for p in params)))


def write(program: Program) -> bytes:
    weights = bytearray()
    tensors = bytearray()
    for tensor in program.tensors:
        kind = 0 if tensor.data is None else 1
        tensors += struct.pack("<BBH", kind, 1, len(tensor.shape))
        tensors += struct.pack(f"<{len(tensor.shape)}I", *tensor.shape)
        if tensor.data is not None:
            weights += b"\0" * (-len(weights) % _ALIGN)
            blob = np.ascontiguousarray(tensor.data, dtype="<f4").tobytes()
            tensors += struct.pack("<II", len(weights), len(blob))
            weights += blob
    ops = bytearray()
    for operation in program.operations:
        ops += struct.pack("<HBBHH", operation.op, len(operation.inputs), len(operation.outputs),
                           len(operation.params), 0)
        ops += struct.pack(f"<{len(operation.inputs)}I{len(operation.outputs)}I{len(operation.params)}i",
                           *operation.inputs, *operation.outputs, *operation.params)
    header = struct.pack("<4sHHIIII", MAGIC, VERSION, 0, len(program.tensors), len(program.operations),
                         len(program.inputs), len(program.outputs))
    io = struct.pack(f"<{len(program.inputs)}I{len(program.outputs)}I", *program.inputs, *program.outputs)
    return bytes(header + tensors + ops + io + struct.pack("<I", len(weights)) + weights)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def take(self, fmt: str) -> tuple[int, ...]:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise FormatError(f"truncated at byte {self.pos} (needs {size} more)")
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return values


def read(data: bytes) -> Program:
    """Parse and validate a program: every index, size and signature is checked."""
    r = _Reader(data)
    magic, version, flags, n_tensors, n_ops, n_inputs, n_outputs = r.take("<4sHHIIII")
    if magic != MAGIC:
        raise FormatError("not an ENPU program (bad magic)")
    if version != VERSION:
        raise FormatError(f"ENPU format version {version} is not supported (this reader: {VERSION})")
    raw_tensors = []
    for _ in range(n_tensors):
        kind, dtype, rank = r.take("<BBH")
        if kind not in (0, 1) or dtype != 1 or rank > 8:
            raise FormatError(f"bad tensor entry (kind {kind}, dtype {dtype}, rank {rank})")
        shape = r.take(f"<{rank}I")
        raw_tensors.append((shape, r.take("<II") if kind == 1 else None))
    program = Program()
    for _ in range(n_ops):
        opcode, n_in, n_out, n_params, _reserved = r.take("<HBBHH")
        try:
            op = Op(opcode)
        except ValueError:
            raise FormatError(f"unknown opcode {opcode}") from None
        (lo, hi), outs, params = SIGNATURES[op]
        if not lo <= n_in <= hi or n_out != outs or n_params != params:
            raise FormatError(f"{op.name}: bad signature ({n_in} inputs, {n_out} outputs, {n_params} params)")
        values = r.take(f"<{n_in}I{n_out}I{n_params}i")
        program.operations.append(Operation(op, values[:n_in], values[n_in:n_in + n_out], values[n_in + n_out:]))
    program.inputs = list(r.take(f"<{n_inputs}I"))
    program.outputs = list(r.take(f"<{n_outputs}I"))
    (size,) = r.take("<I")
    weights = r.data[r.pos:r.pos + size]
    if len(weights) != size or r.pos + size != len(r.data):
        raise FormatError(f"weights: expected {size} bytes, found {len(r.data) - r.pos}")
    for shape, constant in raw_tensors:
        data = None
        if constant is not None:
            offset, nbytes = constant
            if nbytes != 4 * int(np.prod(shape, dtype=np.int64)) or offset + nbytes > size:
                raise FormatError(f"constant of shape {shape} does not fit the weights")
            data = np.frombuffer(weights[offset:offset + nbytes], dtype="<f4").reshape(shape).astype(np.float32)
        program.tensors.append(Tensor(tuple(shape), data))
    indices = [*program.inputs, *program.outputs,
               *(i for operation in program.operations for i in (*operation.inputs, *operation.outputs))]
    if any(i >= n_tensors for i in indices):
        raise FormatError("a tensor index is out of range")
    return program
