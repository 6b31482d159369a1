"""An NNAPI model as plain data: what ``ANeuralNetworksModel_*`` calls build, plus compilation options.

:mod:`mobile_ep_nnapi.serialize` writes and reads it (docs/format.md), :mod:`mobile_ep_nnapi.emulator`
runs it, and the C++ adapter rebuilds it with the NNAPI C API on a device.  Operands are numbered in the
order they are added, operations refer to them by number, as in NNAPI.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from mobile_ep import CompileError

from .nnapi import (
    MAX_FEATURE_LEVEL,
    OPERAND_FEATURE_LEVEL,
    OPERATION_FEATURE_LEVEL,
    SCALAR_CODES,
    DevicePolicy,
    OperandCode,
    OperationCode,
    Preference,
    element_size,
    numpy_dtype,
)

__all__ = ["ChannelQuant", "Operand", "Operation", "NnapiModel"]


@dataclasses.dataclass(frozen=True)
class ChannelQuant:
    """``ANeuralNetworksSymmPerChannelQuantParams`` of a TENSOR_QUANT8_SYMM_PER_CHANNEL operand."""

    channel_dim: int
    scales: tuple[float, ...]


@dataclasses.dataclass
class Operand:
    """``ANeuralNetworksOperandType`` (+ per-channel parameters); ``dims`` empty for a scalar."""

    type: int
    dims: tuple[int, ...] = ()
    scale: float = 0.0
    zero_point: int = 0
    channel_quant: ChannelQuant | None = None

    @property
    def code(self) -> OperandCode:
        return OperandCode(self.type)

    @property
    def is_scalar(self) -> bool:
        return self.type in SCALAR_CODES

    def nbytes(self) -> int:
        """Bytes of a value of this operand (scalars are one element)."""
        return element_size(self.type) * (1 if self.is_scalar else math.prod(self.dims))

    def describe(self) -> str:
        text = f"{self.code.name}{list(self.dims) if not self.is_scalar else ''}"
        if self.scale:
            text += f" scale={self.scale:g} zp={self.zero_point}"
        return text


@dataclasses.dataclass
class Operation:
    type: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]

    @property
    def code(self) -> OperationCode:
        return OperationCode(self.type)


@dataclasses.dataclass
class NnapiModel:
    """A whole NNAPI model and how to compile it.

    ``values`` holds the constant operands' bytes (little-endian, as ``setOperandValue`` takes them);
    ``input_names`` / ``output_names`` name the model's inputs and outputs (the ONNX tensors).
    """

    feature_level: int = 5
    relax_fp16: bool = False
    preference: int = Preference.FAST_SINGLE_ANSWER
    device_policy: int = DevicePolicy.ANY
    operands: list[Operand] = dataclasses.field(default_factory=list)
    values: dict[int, bytes] = dataclasses.field(default_factory=dict)
    operations: list[Operation] = dataclasses.field(default_factory=list)
    inputs: list[int] = dataclasses.field(default_factory=list)
    outputs: list[int] = dataclasses.field(default_factory=list)
    input_names: list[str] = dataclasses.field(default_factory=list)
    output_names: list[str] = dataclasses.field(default_factory=list)

    # -- building ------------------------------------------------------------------------------------
    def add_operand(self, operand: Operand) -> int:
        self.operands.append(operand)
        return len(self.operands) - 1

    def set_value(self, index: int, array: np.ndarray | bytes) -> None:
        operand = self.operands[index]
        if isinstance(array, bytes):
            data = array
        else:
            data = np.ascontiguousarray(np.asarray(array, dtype=numpy_dtype(operand.type))).astype(
                np.dtype(numpy_dtype(operand.type)).newbyteorder("<"), copy=False).tobytes()
        self.values[index] = data

    def add_operation(self, code: int, inputs: tuple[int, ...] | list[int], outputs: tuple[int, ...] | list[int]) -> None:
        self.operations.append(Operation(int(code), tuple(inputs), tuple(outputs)))

    def value(self, index: int) -> np.ndarray:
        """A constant operand's value as a numpy array of its shape ([] for a scalar)."""
        operand = self.operands[index]
        dtype = np.dtype(numpy_dtype(operand.type)).newbyteorder("<")
        array = np.frombuffer(self.values[index], dtype=dtype).astype(dtype.newbyteorder("="))
        return array.reshape(() if operand.is_scalar else operand.dims)

    # -- checking ------------------------------------------------------------------------------------
    def validate(self) -> NnapiModel:
        """Raise :class:`CompileError` for anything NNAPI's model validation would refuse structurally."""
        if not 1 <= self.feature_level <= MAX_FEATURE_LEVEL:
            raise CompileError(f"feature level {self.feature_level} is not 1..{MAX_FEATURE_LEVEL}")
        if self.preference not in {int(p) for p in Preference}:
            raise CompileError(f"execution preference {self.preference} is not 0, 1 or 2")
        if self.device_policy not in {int(p) for p in DevicePolicy}:
            raise CompileError(f"device policy {self.device_policy} is not 0, 1 or 2")
        count = len(self.operands)
        for index, operand in enumerate(self.operands):
            try:
                code = OperandCode(operand.type)
            except ValueError:
                raise CompileError(f"operand {index}: unknown operand type {operand.type}") from None
            if code == OperandCode.MODEL:
                raise CompileError(f"operand {index}: MODEL operands (IF/WHILE bodies) are not supported")
            if OPERAND_FEATURE_LEVEL[code] > self.feature_level:
                raise CompileError(f"operand {index}: {code.name} needs feature level {OPERAND_FEATURE_LEVEL[code]}, "
                                   f"the model targets {self.feature_level}")
            if operand.is_scalar and operand.dims:
                raise CompileError(f"operand {index}: scalar {code.name} has dimensions")
            if not all(isinstance(d, int) and 0 <= d < 2**31 for d in operand.dims):
                raise CompileError(f"operand {index}: dimensions {operand.dims} out of range")
            if not math.isfinite(operand.scale) or operand.scale < 0:
                raise CompileError(f"operand {index}: scale {operand.scale} is not a finite non-negative number")
            if (operand.channel_quant is not None) != (code == OperandCode.TENSOR_QUANT8_SYMM_PER_CHANNEL):
                raise CompileError(f"operand {index}: per-channel parameters go with TENSOR_QUANT8_SYMM_PER_CHANNEL only")
            if operand.channel_quant is not None:
                cq = operand.channel_quant
                if not 0 <= cq.channel_dim < len(operand.dims) or len(cq.scales) != operand.dims[cq.channel_dim]:
                    raise CompileError(f"operand {index}: per-channel parameters do not fit dims {operand.dims}")
        for index, data in self.values.items():
            if not 0 <= index < count:
                raise CompileError(f"a constant value is given for operand {index}, which does not exist")
            if len(data) != self.operands[index].nbytes():
                raise CompileError(f"operand {index}: constant value has {len(data)} bytes, "
                                   f"{self.operands[index].describe()} needs {self.operands[index].nbytes()}")
        defined = set(self.values) | set(self.inputs)
        for number, op in enumerate(self.operations):
            try:
                code = OperationCode(op.type)
            except ValueError:
                raise CompileError(f"operation {number}: unknown operation type {op.type}") from None
            if OPERATION_FEATURE_LEVEL[code] > self.feature_level:
                raise CompileError(f"operation {number}: {code.name} needs feature level {OPERATION_FEATURE_LEVEL[code]}, "
                                   f"the model targets {self.feature_level}")
            for i in (*op.inputs, *op.outputs):
                if not 0 <= i < count:
                    raise CompileError(f"operation {number} ({code.name}): operand {i} does not exist")
            missing = [i for i in op.inputs if i not in defined]
            if missing:
                raise CompileError(f"operation {number} ({code.name}) reads operand(s) {missing} before any operation "
                                   "writes them (operations must be in topological order)")
            for i in op.outputs:
                if i in defined:
                    raise CompileError(f"operation {number} ({code.name}) writes operand {i}, which already has a value")
                defined.add(i)
        for kind, indices in (("input", self.inputs), ("output", self.outputs)):
            for i in indices:
                if not 0 <= i < count:
                    raise CompileError(f"model {kind} operand {i} does not exist")
                if i in self.values:
                    raise CompileError(f"model {kind} operand {i} is a constant")
                if self.operands[i].is_scalar:
                    raise CompileError(f"model {kind} operand {i} is a scalar; NNAPI model I/O are tensors here")
            if len(set(indices)) != len(indices):
                raise CompileError(f"a model {kind} is listed twice")
        if set(self.inputs) & set(self.outputs):
            raise CompileError("an operand is both a model input and a model output")
        undefined = [i for i in self.outputs if i not in defined]
        if undefined:
            raise CompileError(f"model output operand(s) {undefined} are never written")
        if len(self.input_names) != len(self.inputs) or len(self.output_names) != len(self.outputs):
            raise CompileError("model input/output names do not match the inputs/outputs")
        return self
