"""An interpreter of saved ML Programs: the ``mlProgram`` of ``model.mlmodel`` plus ``weights/weight.bin``.

It walks one function's block (``main``, or the one named in a multifunction program) as written (its opset's specialization), resolves every argument
(a variable or an immediate value), reads ``const`` values from the protobuf or from the weight file,
runs the op's numpy kernel (:mod:`.mil_ops`) and rounds each result to the type the program declares
for it.  Ops without a kernel, and anything the interpreter cannot read, raise
:class:`~mobile_ep.CompileError` naming the op.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mobile_ep import CompileError

from .blobs import BlobReader
from .mil_ops import KERNELS, OpCall

__all__ = ["MILInterpreter", "mil_numpy_dtype"]

_DTYPES: dict[str, Any] = {
    "BOOL": np.bool_, "FLOAT16": np.float16, "FLOAT32": np.float32, "FLOAT64": np.float64,
    "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "UINT8": np.uint8,
    "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64, "STRING": object,
}


def mil_numpy_dtype(code: int) -> Any:
    """The numpy type of a ``MIL_pb2.DataType`` value."""
    from coremltools.proto import MIL_pb2

    name = MIL_pb2.DataType.Name(code)
    if name not in _DTYPES:
        raise CompileError(f"coreml emulator: MIL data type {name} is not supported")
    return _DTYPES[name]


def _tensor_type(value_type: Any, where: str) -> tuple[Any, tuple[int | None, ...]]:
    which = value_type.WhichOneof("type")
    if which != "tensorType":
        raise CompileError(f"coreml emulator: {where}: {which} values are not supported")
    tensor = value_type.tensorType
    dims: list[int | None] = []
    for dim in tensor.dimensions:
        dims.append(int(dim.constant.size) if dim.WhichOneof("dimension") == "constant" else None)
    return mil_numpy_dtype(tensor.dataType), tuple(dims)


#: Ops whose value is known when the program loads (no inputs; evaluated once).
_CONSTANT_OPS = frozenset({"const", "constexpr_affine_dequantize"})


class MILInterpreter:
    """Executes one function (by default ``main``) of a saved ML Program with numpy."""

    def __init__(self, model: Any, weights: bytes | None, function_name: str = "main") -> None:
        program = model.mlProgram
        if function_name not in program.functions:
            raise CompileError(f"coreml emulator: the ML Program has no {function_name} function")
        function = program.functions[function_name]
        self.opset = function.opset
        if self.opset not in function.block_specializations:
            raise CompileError(f"coreml emulator: the {function_name} function has no block for its opset "
                               f"{self.opset}")
        try:
            self.ios = int(self.opset.replace("CoreML", "")) + 10
        except ValueError:
            raise CompileError(f"coreml emulator: unknown opset {self.opset!r}") from None
        self.block = function.block_specializations[self.opset]
        self.inputs = {nv.name: _tensor_type(nv.type, f"input {nv.name!r}") for nv in function.inputs}
        self.blobs = BlobReader(weights) if weights is not None else None
        self._consts: dict[str, Any] = {}
        for op in self.block.operations:
            if op.type == "const":
                self._consts[op.outputs[0].name] = self._value(op.attributes["val"], op)
            elif op.type == "constexpr_affine_dequantize":
                self._consts[op.outputs[0].name] = self._affine_dequantize(op)
        #: Op types the program uses, in order of first use (for reports and errors).
        self.op_types = list(dict.fromkeys(op.type for op in self.block.operations))
        unknown = [t for t in self.op_types if t not in _CONSTANT_OPS and t not in KERNELS]
        if unknown:
            first = next(op for op in self.block.operations if op.type == unknown[0])
            raise CompileError(
                f"coreml emulator: the saved program uses op {unknown[0]!r} (operation "
                f"{_op_name(first)!r}), which the emulator does not implement"
                + (f"; also {', '.join(repr(u) for u in unknown[1:])}" if len(unknown) > 1 else ""))

    # -- values ---------------------------------------------------------------------------------------
    def _affine_dequantize(self, op: Any) -> np.ndarray:
        """``constexpr_affine_dequantize`` (iOS 16): ``(quantized_data - zero_point) · scale`` in float32, the scale
        and zero point per tensor or along ``axis``; evaluated once, when the program loads."""
        data = self._value(op.attributes["quantized_data"], op)
        zero = np.asarray(self._value(op.attributes["zero_point"], op))
        scale = np.asarray(self._value(op.attributes["scale"], op), np.float32)
        axis = int(np.asarray(self._value(op.attributes["axis"], op)).reshape(-1)[0]) if "axis" in op.attributes \
            else 0
        if scale.size > 1 or zero.size > 1:
            shape = [1] * data.ndim
            shape[axis % data.ndim] = max(scale.size, zero.size)
            scale = scale.reshape(shape) if scale.size > 1 else scale.reshape(())
            zero = zero.reshape(shape) if zero.size > 1 else zero.reshape(())
        return ((data.astype(np.int32) - zero.astype(np.int32)).astype(np.float32) * scale).astype(np.float32)

    def _value(self, value: Any, op: Any) -> Any:
        where = f"{op.type} {_op_name(op)!r}"
        dtype, shape = _tensor_type(value.type, where)
        if any(d is None for d in shape):
            raise CompileError(f"coreml emulator: {where}: a constant with an unknown dim")
        kind = value.WhichOneof("value")
        if kind == "blobFileValue":
            if self.blobs is None:
                raise CompileError(f"coreml emulator: {where} reads {value.blobFileValue.fileName}, which the "
                                   "package does not hold")
            if not value.blobFileValue.fileName.endswith("weights/weight.bin"):
                raise CompileError(f"coreml emulator: {where}: unknown weight file "
                                   f"{value.blobFileValue.fileName!r}")
            return self.blobs.read(int(value.blobFileValue.offset), np.dtype(dtype), shape)  # type: ignore[arg-type]
        if kind != "immediateValue":
            raise CompileError(f"coreml emulator: {where}: a value with no data")
        immediate = value.immediateValue
        if immediate.WhichOneof("value") != "tensor":
            raise CompileError(f"coreml emulator: {where}: {immediate.WhichOneof('value')} values are not supported")
        tensor = immediate.tensor
        field = tensor.WhichOneof("value")
        if dtype is object:
            strings = list(tensor.strings.values)
            return strings[0] if not shape and len(strings) == 1 else np.array(strings, dtype=object).reshape(shape)
        if field == "bytes":
            raw = np.frombuffer(tensor.bytes.values, dtype=np.dtype(dtype).newbyteorder("<"))
        elif field in ("floats", "ints", "bools", "longInts", "doubles"):
            raw = np.asarray(list(getattr(tensor, field).values))
        elif field is None:
            raw = np.zeros(0)
        else:
            raise CompileError(f"coreml emulator: {where}: immediate {field} values are not supported")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if raw.size != count:
            raise CompileError(f"coreml emulator: {where}: {raw.size} values for a tensor of shape {list(shape)}")
        return raw.astype(dtype).reshape(shape)

    # -- running ----------------------------------------------------------------------------------------
    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env: dict[str, Any] = dict(self._consts)
        for name, (dtype, dims) in self.inputs.items():
            if name not in feeds:
                raise CompileError(f"coreml emulator: no value for the program input {name!r}")
            array = np.asarray(feeds[name])
            if array.dtype != dtype:
                raise CompileError(f"coreml emulator: input {name!r} is {array.dtype}, the program takes "
                                   f"{np.dtype(dtype).name}")
            if len(dims) != array.ndim or any(d is not None and d != s for d, s in zip(dims, array.shape,
                                                                                       strict=True)):
                raise CompileError(f"coreml emulator: input {name!r} has shape {list(array.shape)}, the program "
                                   f"takes {['?' if d is None else d for d in dims]}")
            env[name] = array
        for op in self.block.operations:
            if op.type in _CONSTANT_OPS:
                continue
            self._execute(op, env)
        missing = [name for name in self.block.outputs if name not in env]
        if missing:
            raise CompileError(f"coreml emulator: the block's outputs {missing} are never produced")
        return {name: env[name] for name in self.block.outputs}

    def _execute(self, op: Any, env: dict[str, Any]) -> None:
        name = _op_name(op)
        inputs: dict[str, list[Any]] = {}
        for param, argument in op.inputs.items():
            values = []
            for binding in argument.arguments:
                if binding.WhichOneof("binding") == "name":
                    if binding.name not in env:
                        raise CompileError(f"coreml emulator: {op.type} {name!r} reads {binding.name!r} before it "
                                           "is produced")
                    values.append(env[binding.name])
                else:
                    values.append(self._value(binding.value, op))
            inputs[param] = values
        outputs = [_tensor_type(out.type, f"{op.type} {name!r} output {out.name!r}") for out in op.outputs]
        call = OpCall(op.type, name, inputs, outputs, self.ios)
        try:
            result = KERNELS[op.type](call)
        except CompileError:
            raise
        except Exception as exc:  # a kernel failing on these values: name the op
            raise CompileError(f"coreml emulator: {op.type} {name!r} failed: {type(exc).__name__}: {exc}") from exc
        results = result if isinstance(result, (list, tuple)) else [result]
        if len(results) != len(op.outputs):
            raise call.fail(f"produced {len(results)} outputs, the program declares {len(op.outputs)}")
        for out, value, (dtype, dims) in zip(op.outputs, results, outputs, strict=True):
            array = np.asarray(value)
            if array.dtype != dtype:
                with np.errstate(all="ignore"):
                    array = array.astype(dtype)
            if len(dims) != array.ndim or any(d is not None and d != s for d, s in zip(dims, array.shape,
                                                                                       strict=True)):
                raise call.fail(f"output {out.name!r} has shape {list(array.shape)}, the program declares "
                                f"{['?' if d is None else d for d in dims]}")
            env[out.name] = array


def _op_name(op: Any) -> str:
    attribute = op.attributes.get("name")
    if attribute is not None and attribute.immediateValue.tensor.strings.values:
        return str(attribute.immediateValue.tensor.strings.values[0])
    return op.outputs[0].name if op.outputs else "?"
