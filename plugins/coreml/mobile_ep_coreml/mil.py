"""What Core ML rules lower into: a MIL program under construction with coremltools' Builder.

A rule's ``lower(unit, ctx, builder)`` reads its inputs with :meth:`MILBuilder.var` (a MIL variable, or a
numpy array for a constant), adds MIL ops through ``builder.mb`` (``coremltools.converters.mil.Builder``)
and records each ONNX output with :meth:`MILBuilder.set`.  The program is then converted and saved by
:mod:`mobile_ep_coreml.package`.

coremltools is imported here, lazily (:func:`coremltools`): importing the plugin, listing backends and
checking models never load it (it takes seconds and logs warnings about its macOS-only parts).

Core ML tensors are float32, float16, int32 or bool: ONNX int64 tensors are int32 inside the program
(as in ORT's CoreML EP) and their values are clipped to the int32 range; ONNX float64 is not claimed.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from mobile_ep import CompileError, RuleContext

from .rules._base import constant_value

__all__ = ["coremltools", "MILBuilder", "feature_name", "MIL_DTYPES", "numpy_for_mil"]

_CT: Any = None

#: ONNX element type -> MIL dtype name (what ``mb.cast`` takes) inside the program.
MIL_DTYPES: dict[ir.DataType, str] = {
    ir.DataType.FLOAT: "fp32",
    ir.DataType.FLOAT16: "fp16",
    ir.DataType.INT32: "int32",
    ir.DataType.INT64: "int32",
    ir.DataType.BOOL: "bool",
}

_INT32 = np.iinfo(np.int32)


class _NativeLibraryWarnings(logging.Filter):
    """Drops coremltools' import-time warnings that its macOS-only libraries are missing."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Failed to load _ML")


def coremltools() -> Any:
    """The ``coremltools`` module, imported on first use (without its macOS-only library warnings)."""
    global _CT
    if _CT is None:
        logger = logging.getLogger("coremltools")
        quiet = _NativeLibraryWarnings()
        logger.addFilter(quiet)
        try:
            import coremltools as ct
            import coremltools.converters.mil  # noqa: F401  (the Builder)
            import coremltools.proto.MIL_pb2  # noqa: F401
            import coremltools.proto.Model_pb2  # noqa: F401
        except ImportError as exc:  # pragma: no cover - a dependency of the plugin
            raise CompileError(f"coreml: compiling needs coremltools ({exc})") from None
        finally:
            logger.removeFilter(quiet)
        _CT = ct
    return _CT


#: Type names and keywords of MIL that coremltools renames when a variable or feature takes them.
_MIL_RESERVED = frozenset({"any", "bool", "program", "func", "tensor", "list", "dict", "tuple", "true", "false",
                           "string", "bf16", "fp16", "fp32", "fp64", "int8", "int16", "int32", "int64", "uint8",
                           "uint16", "uint32", "uint64", "state"})


def feature_name(name: str, taken: set[str]) -> str:
    """A Core ML feature / MIL variable name for an ONNX value name: an identifier, unique in *taken*."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", name) or "value"
    if not re.match(r"[A-Za-z]", base):  # (coremltools renames names starting with "_" too)
        base = "v_" + base
    if base in _MIL_RESERVED:  # names coremltools' sanitizer would rename
        base += "_"
    candidate, index = base, 1
    while candidate in taken:
        candidate = f"{base}_{index}"
        index += 1
    taken.add(candidate)
    return candidate


def numpy_for_mil(array: np.ndarray) -> np.ndarray:
    """A constant as MIL stores it: int64 as int32 (clipped), float64 as float32, other types unchanged."""
    array = np.asarray(array)
    if array.dtype == np.int64 or array.dtype == np.uint64 or array.dtype == np.uint32:
        return np.clip(array, _INT32.min, _INT32.max).astype(np.int32)
    if array.dtype in (np.int8, np.int16, np.uint8, np.uint16):
        return array.astype(np.int32)
    if array.dtype == np.float64:
        return array.astype(np.float32)
    return array


class MILBuilder:
    """A MIL function under construction, indexed by the ONNX values it holds.

    Use it inside :meth:`function`; ``mb`` is coremltools' ``Builder`` and ``types`` its MIL types.
    """

    def __init__(self, ctx: RuleContext, *, opset: Any, mlprogram: bool) -> None:
        ct = coremltools()
        from coremltools.converters.mil import Builder
        from coremltools.converters.mil.mil import types

        self.ct = ct
        self.mb = Builder
        self.types = types
        self.ctx = ctx
        self.opset = opset
        self.mlprogram = mlprogram
        self.function_obj: Any = None
        self._vars: dict[ir.Value, Any] = {}
        self._names: set[str] = set()
        #: (ONNX name, feature name) of the function inputs and outputs, in order.
        self.input_features: list[tuple[ir.Value, str]] = []
        self.output_features: list[tuple[ir.Value, str]] = []
        #: Inputs with dynamic dims: feature name -> per dim, its ONNX dim name (or a made-up key), None if static
        self.symbolic_inputs: dict[str, list[str | None]] = {}
        #: Feature names of the partition's outputs, reserved before lowering (the ops producing them get them).
        self._reserved: dict[ir.Value, str] = {}

    # -- the function ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def function(self, inputs: Sequence[ir.Value]) -> Iterator[Any]:
        """Open the ``main`` function with *inputs* as its placeholders (symbolic dims stay symbolic)."""
        from coremltools.converters.mil.mil import Function, get_new_symbol

        symbols: dict[str, Any] = {}
        specs: dict[str, Any] = {}
        scalars: set[str] = set()
        for value in inputs:
            name = feature_name(value.name or "input", self._names)
            dtype = self.ctx.dtype(value)
            if dtype not in MIL_DTYPES:
                raise CompileError(f"input {value.name!r} is {dtype.name if dtype else 'untyped'}; Core ML "
                                   "takes float32, float16, int32/int64 or bool tensors")
            shape = self._input_shape(value)
            dims: list[Any] = []
            labels: list[str | None] = []
            for index, dim in enumerate(shape):
                if isinstance(dim, int):
                    dims.append(dim)
                    labels.append(None)
                else:
                    key = dim or f"{name}:{index}"
                    if key not in symbols:
                        symbols[key] = get_new_symbol()
                    dims.append(symbols[key])
                    labels.append(key)
            if not dims:  # Core ML has no rank-0 inputs: feed [1] and squeeze it inside
                dims = [1]
                scalars.add(name)
            if any(label is not None for label in labels):
                self.symbolic_inputs[name] = labels
            specs[name] = self.mb.placeholder(shape=tuple(dims), dtype=self._mil_type(dtype))
            self.input_features.append((value, name))
        with Function(specs, opset_version=self.opset) as function:
            self.function_obj = function
            for value, name in self.input_features:
                var = function.inputs[name]
                if name in scalars:
                    var = self.mb.squeeze(x=var, name=self.tmp(name + "_scalar"))
                self._vars.setdefault(value, var)
            yield function

    def _input_shape(self, value: ir.Value) -> list[int | str | None]:
        if value.shape is None:
            raise CompileError(f"input {value.name!r} has no known shape")
        dims: list[int | str | None] = []
        for dim in value.shape:
            if isinstance(dim, int):
                dims.append(dim)
            else:
                dims.append(getattr(dim, "value", None) or None)
        return dims

    def set_outputs(self, outputs: Sequence[ir.Value]) -> None:
        """Make *outputs* the function's outputs, each a distinct variable named as its feature."""
        result = []
        used: set[int] = set()
        inputs = {id(v) for v in self.function_obj.inputs.values()}
        for value in outputs:
            var = self.var(value)
            want = self._reserved.get(value)
            if want is None:
                want = feature_name(value.name or "output", self._names)
            if isinstance(var, np.ndarray) or id(var) in used or id(var) in inputs or var.name != want:
                var = self.mb.identity(x=var, name=want)
            used.add(id(var))
            result.append(var)
            self.output_features.append((value, want))
        self.function_obj.set_outputs(result)

    # -- values -----------------------------------------------------------------------------------------
    def reserve_outputs(self, outputs: Sequence[ir.Value]) -> None:
        """Name the ops producing the partition's outputs after them (call before lowering)."""
        for value in outputs:
            self._reserved[value] = feature_name(value.name or "output", self._names)

    def var(self, value: ir.Value | None) -> Any:
        """The MIL variable holding *value*, or a numpy array (int64 as int32) when it is a constant."""
        if value is None:
            raise CompileError("an omitted optional input was read")
        if value in self._vars:
            return self._vars[value]
        data = self.const(value)
        if data is not None:
            return data
        raise CompileError(f"value {value.name!r} is read before it is produced inside the partition")

    def weight(self, value: ir.Value) -> Any:
        """A weight for an op: :meth:`var`, or - for an int8/uint8 weight convert's ``fold_qdq`` dequantized - the
        quantized data again, dequantized by ``constexpr_affine_dequantize`` when the program loads (ML Program,
        iOS 16+, float32 compute precision): Core ML's weight compression, holding the same float32 values."""
        from .qdq import quantization_of

        if value in self._vars:
            return self._vars[value]
        data = self.const(value)
        float32 = getattr(self.ctx.options, "compute_precision", "float32") == "float32"  # (fp16: plain constants)
        quantization = quantization_of(value) if data is not None and self.mlprogram and float32 else None
        if quantization is None or self.opset < coremltools().target.iOS16 or data.dtype != np.float32:
            return self.var(value)
        dtype = np.int8 if quantization["dtype"] == "int8" else np.uint8
        scale = np.asarray(quantization["scale"], np.float32)
        zero = np.asarray(quantization["zero_point"])
        axis = int(quantization["axis"]) % data.ndim if scale.size > 1 else 0
        shape = [1] * data.ndim
        shape[axis] = scale.size
        info = np.iinfo(dtype)
        quantized = np.clip(np.rint(data / scale.reshape(shape)) + zero.reshape(shape), info.min, info.max)
        if scale.size == 1:
            scale, zero = scale.reshape(()), zero.reshape(())
        var = self.mb.constexpr_affine_dequantize(quantized_data=quantized.astype(dtype),
                                                  zero_point=zero.astype(dtype), scale=scale, axis=axis,
                                                  name=self.tmp(value.name or "weight"))
        self._vars[value] = var
        return var

    def const(self, value: ir.Value | None) -> np.ndarray | None:
        """The constant value of *value* (an initializer or a Constant node's output) as MIL stores it."""
        data = constant_value(self.ctx, value)
        return None if data is None else numpy_for_mil(np.asarray(data))

    def set(self, value: ir.Value, var: Any) -> None:
        """Record *var* as the MIL variable of the ONNX value *value* (an op's output)."""
        if isinstance(var, np.ndarray):
            var = self.mb.const(val=var, name=self.name(value))
        self._vars[value] = var

    def name(self, value: ir.Value) -> str:
        """The name for the op producing *value*: its output feature name, or a fresh one."""
        reserved = self._reserved.get(value)
        if reserved is not None:
            return reserved
        return self.tmp(value.name or "v")

    def tmp(self, hint: str) -> str:
        """A fresh, unique name for an intermediate op."""
        return feature_name(hint, self._names)

    # -- facts ------------------------------------------------------------------------------------------
    def shape(self, value: ir.Value | None) -> tuple[int | None, ...]:
        shape = self.ctx.shape(value)
        if shape is None:
            raise CompileError(f"value {value.name if value else '?'!r} has no known shape")
        return shape

    def static_shape(self, value: ir.Value | None) -> tuple[int, ...]:
        shape = self.ctx.static_shape(value)
        if shape is None:
            raise CompileError(f"value {value.name if value else '?'!r} needs a static shape")
        return shape

    def rank(self, value: ir.Value | None) -> int:
        return len(self.shape(value))

    def dtype(self, value: ir.Value | None) -> ir.DataType:
        dtype = self.ctx.dtype(value)
        if dtype is None:
            raise CompileError(f"value {value.name if value else '?'!r} has no known element type")
        return dtype

    def mil_dtype(self, dtype: ir.DataType) -> str:
        if dtype not in MIL_DTYPES:
            raise CompileError(f"Core ML has no {dtype.name.lower()} tensors")
        return MIL_DTYPES[dtype]

    def _mil_type(self, dtype: ir.DataType) -> Any:
        return {"fp32": self.types.fp32, "fp16": self.types.fp16, "int32": self.types.int32,
                "bool": self.types.bool}[self.mil_dtype(dtype)]

    def np_dtype(self, value: ir.Value) -> type:
        """The numpy dtype *value* has inside the program (int64 is int32)."""
        return {"fp32": np.float32, "fp16": np.float16, "int32": np.int32, "bool": np.bool_}[
            self.mil_dtype(self.dtype(value))]

    def scalar(self, value: float | int, like: ir.Value) -> Any:
        """A scalar constant (a numpy scalar) of the dtype *like* has inside the program."""
        return self.np_dtype(like)(value)
