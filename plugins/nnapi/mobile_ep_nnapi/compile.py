"""Compiling a partition into an NNAPI model: the builder every rule's ``lower`` writes into.

:func:`compile_partition` makes an :class:`NnapiBuilder` for the partition, creates the model inputs (in
ONNX layout, in the order of :func:`mobile_ep.contract.compile.runtime_inputs`), lets
:func:`mobile_ep.contract.compile.lower_units` call each rule's ``lower`` (which re-asserts support first), then
makes the model outputs and serializes the model.

**Layout.**  Every ONNX value may have operands in several layouts, each a permutation of its ONNX dims
(``operand = onnx_value.transpose(perm)``).  Layout-sensitive ops (Conv, pooling, LRN, DepthToSpace,
Resize, BatchNormalization, ...) ask for NHWC ``(0, 2, 3, 1)``; elementwise ops work in whatever layout
their inputs already have; ops that need ONNX order ask for it.  A TRANSPOSE is added only where a
value is needed in a layout it does not have yet, once per value and layout; when the two layouts differ
only by dims of size 1 a RESHAPE does instead; an ONNX Transpose whose result is a layout its input
already has costs nothing.  Model inputs and outputs are in ONNX layout, so in a CNN the transposes sit
at the partition's boundaries.  With the backend option ``use_nchw`` the layout-sensitive ops take NCHW
operands and NNAPI's layout flag (feature level 3) instead.

**Activations.**  A Relu, or a Clip to (0, 6) / (-1, 1), whose input is used only by it is folded into
the producer's fused-activation code when the producer supports one (ADD, SUB, MUL, DIV, CONV_2D,
DEPTHWISE_CONV_2D, GROUPED_CONV_2D, FULLY_CONNECTED, the pools).

**Feature levels.**  Every operation, operand type and optional signature argument is gated by the
target's feature level (option ``api_level``): lowering a unit that would need more raises
:class:`~mobile_ep.CompileError` naming what and which level.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence

import numpy as np
import onnx_ir as ir

from mobile_ep import (
    CompiledPartition,
    CompileError,
    DataType,
    NodeUnit,
    PartitionView,
    RuleContext,
    TensorSpec,
    UnitIO,
)
from mobile_ep.contract.compile import lower_units, runtime_inputs

from . import serialize
from .model import ChannelQuant, NnapiModel, Operand
from .nnapi import (
    OPERAND_FEATURE_LEVEL,
    OPERATION_FEATURE_LEVEL,
    DevicePolicy,
    FuseCode,
    OperandCode,
    OperationCode,
    Preference,
)

__all__ = ["NHWC", "NCHW_OF_NHWC", "NnapiBuilder", "Ref", "compile_partition", "identity"]

#: The NHWC layout of a rank-4 ONNX (NCHW) value.
NHWC = (0, 2, 3, 1)
#: NHWC -> NCHW.
NCHW_OF_NHWC = (0, 3, 1, 2)

_FUSABLE_OPS = frozenset({"Relu", "Clip"})
_SIGNED = {DataType.FLOAT: OperandCode.TENSOR_FLOAT32, DataType.INT32: OperandCode.TENSOR_INT32,
           DataType.BOOL: OperandCode.TENSOR_BOOL8}


def identity(rank: int) -> tuple[int, ...]:
    return tuple(range(rank))


def _inverse(perm: Sequence[int]) -> tuple[int, ...]:
    result = [0] * len(perm)
    for i, p in enumerate(perm):
        result[p] = i
    return tuple(result)


class Ref(tuple):
    """An operand of the model holding an ONNX value in a layout: ``(index, perm)``."""

    __slots__ = ()

    def __new__(cls, index: int, perm: tuple[int, ...]) -> Ref:
        return super().__new__(cls, (index, perm))

    @property
    def index(self) -> int:
        return self[0]

    @property
    def perm(self) -> tuple[int, ...]:
        return self[1]

    @property
    def nhwc(self) -> bool:
        return self[1] == NHWC


class NnapiBuilder:
    """The NNAPI model under construction for one partition (what rules' ``lower`` methods write into)."""

    def __init__(self, ctx: RuleContext, partition: PartitionView) -> None:
        options = ctx.options
        self.ctx = ctx
        self.options = options
        self.feature_level: int = options.feature_level
        #: NCHW operands for layout-sensitive ops (option use_nchw, NNAPI's layout flag, FL3).
        self.use_nchw: bool = bool(options.use_nchw)
        policy = DevicePolicy.CPU_DISABLED if options.cpu_disabled else (
            DevicePolicy.CPU_ONLY if options.cpu_only else DevicePolicy.ANY)
        self.model = NnapiModel(
            feature_level=self.feature_level,
            relax_fp16=bool(options.use_fp16) and self.feature_level >= 2,
            preference=int(Preference[str(getattr(options, "preference", "FAST_SINGLE_ANSWER")).upper()]),
            device_policy=int(policy),
        )
        self.partition = partition
        self.members = {n for n in partition.nodes}
        self.outputs = set(partition.outputs)
        self._operands: dict[ir.Value, dict[tuple[int, ...], int]] = {}
        self._quant: dict[ir.Value, tuple[float, int]] = {}
        self._scalars: dict[tuple[int, bytes], int] = {}
        self.empty: set[ir.Value] = set()
        self.fused: set[ir.Node] = set()
        self.unit: NodeUnit | None = None
        self._collect_quantization(partition)

    # -- diagnostics -----------------------------------------------------------------------------------
    def fail(self, reason: str) -> CompileError:
        """A CompileError for the unit being lowered (``raise b.fail("...")``)."""
        return CompileError(reason)

    def require(self, level: int, what: str) -> None:
        """Refuse *what* unless the target reaches NNAPI feature level *level*."""
        if self.feature_level < level:
            from .rules._base import api_for

            raise self.fail(f"{what} needs NNAPI feature level {level} (Android API {api_for(level)}); the target is "
                            f"feature level {self.feature_level} (api_level {self.options.api_level})")

    @contextlib.contextmanager
    def lowering(self, unit: NodeUnit) -> Iterator[None]:
        """Name the unit in every CompileError raised while lowering it."""
        self.unit = unit
        try:
            yield
        except CompileError as exc:
            raise CompileError(f"{unit.op_type} node {unit.name!r}: {exc}") from None
        finally:
            self.unit = None

    # -- quantization ----------------------------------------------------------------------------------
    def _collect_quantization(self, partition: PartitionView) -> None:
        from .rules._quant import unit_inputs, unit_outputs

        for unit in partition.units:
            for io in (*unit_inputs(unit), *unit_outputs(unit)):
                if io is not None and io.scale is not None:
                    params = self.quant_params(io)
                    if params is not None and self.ctx.dtype(io.value) == DataType.UINT8:
                        known = self._quant.setdefault(io.value, params)
                        if known != params:
                            raise CompileError(f"value {io.value.name!r} is quantized with two different scales / zero "
                                               f"points ({known} and {params})")

    def quant_params(self, io: UnitIO) -> tuple[float, int] | None:
        """(scale, zero point) of a per-tensor quantized input/output, from its constant initializers."""
        if io.scale is None:
            return None
        scale = self.ctx.constant(io.scale)
        if scale is None or scale.size != 1:
            return None
        zp = 0
        if io.zero_point is not None:
            z = self.ctx.constant(io.zero_point)
            if z is None or z.size != 1:
                return None
            zp = int(np.asarray(z).reshape(-1)[0])
        return float(np.float32(np.asarray(scale, dtype=np.float32).reshape(-1)[0])), zp

    def quant(self, value: ir.Value) -> tuple[float, int] | None:
        return self._quant.get(value)

    def set_quant(self, value: ir.Value, params: tuple[float, int]) -> None:
        self._quant[value] = params

    # -- types and shapes ------------------------------------------------------------------------------
    def shape(self, value: ir.Value) -> tuple[int, ...]:
        shape = self.ctx.static_shape(value)
        if shape is None:
            raise self.fail(f"value {value.name!r} has no static shape")
        return shape

    def rank(self, value: ir.Value) -> int:
        return len(self.shape(value))

    def code_for(self, value: ir.Value) -> OperandCode:
        dtype = self.ctx.dtype(value)
        if dtype in _SIGNED:
            return _SIGNED[dtype]
        if dtype == DataType.UINT8:
            if value not in self._quant:
                raise self.fail(f"uint8 value {value.name!r} has no known scale and zero point")
            return OperandCode.TENSOR_QUANT8_ASYMM
        if dtype == DataType.INT64 and self.ctx.is_constant(value):
            return OperandCode.TENSOR_INT32
        name = dtype.name.lower() if dtype is not None else "unknown"
        raise self.fail(f"value {value.name!r} is {name}, which NNAPI cannot hold")

    @staticmethod
    def dims(shape: Sequence[int], perm: Sequence[int]) -> tuple[int, ...]:
        dims = tuple(int(shape[p]) for p in perm) if perm else tuple(int(d) for d in shape)
        return dims if dims else (1,)

    # -- operands --------------------------------------------------------------------------------------
    def operand(self, code: int, dims: Sequence[int] = (), scale: float = 0.0, zero_point: int = 0,
                channel_quant: ChannelQuant | None = None) -> int:
        code = OperandCode(code)
        level = OPERAND_FEATURE_LEVEL[code]
        if level > self.feature_level:
            self.require(level, f"operand type {code.name}")
        if any(d == 0 for d in dims):
            raise self.fail(f"a tensor of shape {list(dims)} has no elements (NNAPI reads a 0 dim as unknown)")
        return self.model.add_operand(Operand(int(code), tuple(int(d) for d in dims), float(scale), int(zero_point),
                                              channel_quant))

    def constant(self, array: np.ndarray, code: int, scale: float = 0.0, zero_point: int = 0,
                 channel_quant: ChannelQuant | None = None) -> int:
        array = np.asarray(array)
        if code in (OperandCode.INT32, OperandCode.FLOAT32, OperandCode.BOOL):
            key = (int(code), array.astype(np.float64).tobytes())
            if key in self._scalars:
                return self._scalars[key]
            index = self.operand(code)
            self.model.set_value(index, array.reshape(()))
            self._scalars[key] = index
            return index
        if code == OperandCode.TENSOR_INT32:
            if array.size and (array.max() > np.iinfo(np.int32).max or array.min() < np.iinfo(np.int32).min):
                raise self.fail("an int64 constant does not fit in int32")
        index = self.operand(code, array.shape if array.ndim else (1,), scale, zero_point, channel_quant)
        self.model.set_value(index, array.reshape(-1))
        return index

    def i32(self, value: int) -> int:
        return self.constant(np.int32(value), OperandCode.INT32)

    def f32(self, value: float) -> int:
        return self.constant(np.float32(value), OperandCode.FLOAT32)

    def flag(self, value: bool) -> int:
        return self.constant(np.bool_(value), OperandCode.BOOL)

    def i32s(self, values: Sequence[int]) -> int:
        return self.constant(np.asarray(list(values), dtype=np.int32).reshape(-1), OperandCode.TENSOR_INT32)

    def layout_flag(self, nchw: bool) -> list[int]:
        """The optional NCHW flag of layout-aware ops: absent for NHWC, ``true`` (FL3) for NCHW."""
        if not nchw:
            return []
        self.require(3, "NCHW layout (option use_nchw)")
        return [self.flag(True)]

    # -- values ----------------------------------------------------------------------------------------
    def has(self, value: ir.Value) -> bool:
        return value in self._operands or self.ctx.is_constant(value)

    def layouts(self, value: ir.Value) -> list[tuple[int, ...]]:
        return list(self._operands.get(value, {}))

    def bindings(self, value: ir.Value) -> dict[tuple[int, ...], int]:
        """The operands holding *value*, by layout."""
        return dict(self._operands.get(value, {}))

    def preferred(self, value: ir.Value) -> tuple[int, ...]:
        """The layout a layout-agnostic op should use for *value*: NHWC if it has one, else ONNX order."""
        layouts = self.layouts(value)
        if NHWC in layouts:
            return NHWC
        return identity(self.rank(value)) if not layouts else layouts[0]

    def bind(self, value: ir.Value, index: int, perm: tuple[int, ...] | None = None) -> Ref:
        """Record that operand *index* holds *value* in layout *perm* (ONNX order by default)."""
        perm = identity(self.rank(value)) if perm is None else tuple(perm)
        self._operands.setdefault(value, {})[perm] = index
        return Ref(index, perm)

    def alias(self, target: ir.Value, source: ir.Value) -> None:
        """*target* is *source* (Identity): share its operands."""
        if source in self.empty:
            self.empty.add(target)
            return
        if source not in self._operands:
            self.get(source)
        self._operands[target] = self._operands[source]
        if source in self._quant:
            self._quant[target] = self._quant[source]

    def tensor_code(self, value: ir.Value) -> tuple[OperandCode, float, int]:
        code = self.code_for(value)
        scale, zp = self._quant.get(value, (0.0, 0)) if code == OperandCode.TENSOR_QUANT8_ASYMM else (0.0, 0)
        return code, scale, zp

    def get(self, value: ir.Value | UnitIO | None, perm: tuple[int, ...] | str | None = "onnx") -> Ref:
        """An operand holding *value*: in ONNX order (default), ``"nhwc"``, ``"any"``, or an explicit perm.

        Constants become constant operands (their data permuted on the host); other values get a
        TRANSPOSE (or a RESHAPE, when only dims of size 1 move) from a layout they already have.
        """
        if isinstance(value, UnitIO):
            value = value.value
        if value is None:
            raise self.fail("an optional input the lowering needs is missing")
        if value in self.empty:
            raise self.fail(f"value {value.name!r} has no elements")
        rank = self.rank(value)
        if perm == "onnx":
            want = identity(rank)
        elif perm == "nhwc":
            if rank != 4:
                raise self.fail(f"value {value.name!r} has rank {rank}, not 4")
            want = NHWC
        elif perm == "any":
            want = self.preferred(value)
        else:
            want = tuple(perm)  # type: ignore[arg-type]
        have = self._operands.get(value, {})
        if want in have:
            return Ref(have[want], want)
        if self.ctx.is_constant(value):
            array = self.ctx.constant(value)
            assert array is not None
            code, scale, zp = self.tensor_code(value)
            data = np.transpose(array, want) if array.ndim > 1 else array
            if code == OperandCode.TENSOR_INT32:
                data = data.astype(np.int64)
                if data.size and (data.max() > np.iinfo(np.int32).max or data.min() < np.iinfo(np.int32).min):
                    raise self.fail(f"constant {value.name!r} does not fit in int32")
            index = self.operand(code, self.dims(array.shape, want), scale, zp)
            self.model.set_value(index, np.asarray(data).reshape(-1))
            return self.bind(value, index, want)
        if not have:
            raise self.fail(f"value {value.name!r} is not computed inside the partition (lowering order)")
        shape = self.shape(value)
        # Prefer a source layout that only needs a RESHAPE.
        best = None
        for src, index in have.items():
            t = tuple(_inverse(src)[w] for w in want)
            src_dims = self.dims(shape, src)
            moving = [axis for axis in t if src_dims[axis] != 1]
            if moving == sorted(moving):
                best = (src, index, t, True)
                break
            if best is None:
                best = (src, index, t, False)
        assert best is not None
        src, index, t, reshape = best
        code, scale, zp = self.tensor_code(value)
        out = self.operand(code, self.dims(shape, want), scale, zp)
        if reshape:
            self.op(OperationCode.RESHAPE, [index, self.i32s(self.dims(shape, want))], [out])
        else:
            self.op(OperationCode.TRANSPOSE, [index, self.i32s(t)], [out])
        return self.bind(value, out, want)

    def new(self, value: ir.Value | UnitIO, perm: tuple[int, ...] | str = "onnx", *,
            code: int | None = None, quant: tuple[float, int] | None = None) -> Ref:
        """A fresh operand for the output *value* in layout *perm* (bound to it)."""
        if isinstance(value, UnitIO):
            value = value.value
        rank = self.rank(value)
        perm = identity(rank) if perm == "onnx" else NHWC if perm == "nhwc" else tuple(perm)  # type: ignore[arg-type]
        if quant is not None:
            self._quant[value] = quant
        if code is None:
            code, scale, zp = self.tensor_code(value)
        else:
            scale, zp = self._quant.get(value, (0.0, 0)) if code == OperandCode.TENSOR_QUANT8_ASYMM else (0.0, 0)
        index = self.operand(code, self.dims(self.shape(value), perm), scale, zp)
        return self.bind(value, index, perm)

    def like(self, value: ir.Value, source: ir.Value, perm: tuple[int, ...]) -> Ref:
        """A fresh operand for *value* with *source*'s element type and quantization."""
        if source in self._quant:
            self._quant[value] = self._quant[source]
        code, _, _ = self.tensor_code(source)
        return self.new(value, perm, code=code)

    def elementwise_layout(self, values: Sequence[ir.Value | None], output: ir.Value) -> tuple[int, ...]:
        """The layout for an elementwise op: NHWC if the output is 4-D, an input already is NHWC and every other
        non-constant input is 4-D too (constants of lower rank are broadcast on the host); else ONNX order."""
        rank = self.rank(output)
        onnx = identity(rank)
        if rank != 4:
            return onnx
        dynamic = [v for v in values if v is not None and not self.ctx.is_constant(v)]
        if not any(NHWC in self.layouts(v) for v in dynamic):
            return onnx
        if any(self.rank(v) != 4 for v in dynamic):
            return onnx
        return NHWC

    def broadcast(self, value: ir.Value | UnitIO, perm: tuple[int, ...]) -> Ref:
        """*value* for a broadcasting op whose output has layout *perm*: a lower-rank constant is given
        leading 1s and permuted on the host; anything of the output's rank is fetched in *perm*."""
        if isinstance(value, UnitIO):
            value = value.value
        rank = self.rank(value)
        if rank == len(perm) or perm == identity(len(perm)):
            return self.get(value, perm if rank == len(perm) else "onnx")
        array = self.ctx.constant(value)
        if array is None:
            raise self.fail(f"input {value.name!r} of rank {rank} cannot be broadcast in layout {perm}")
        expanded = np.asarray(array).reshape((1,) * (len(perm) - rank) + tuple(array.shape))
        code, scale, zp = self.tensor_code(value)
        data = np.transpose(expanded, perm)
        if code == OperandCode.TENSOR_INT32:
            data = data.astype(np.int32)
        return Ref(self.constant(data, code, scale, zp), perm)

    def requantize(self, ref: Ref, dims: Sequence[int], source: tuple[float, int], target: tuple[float, int]) -> int:
        """An operand with *ref*'s values quantized as *target* (DEQUANTIZE + QUANTIZE); *ref* if equal."""
        if source == target:
            return ref.index
        self.require(3, "changing a tensor's scale or zero point (DEQUANTIZE + QUANTIZE)")
        real = self.operand(OperandCode.TENSOR_FLOAT32, dims)
        self.op(OperationCode.DEQUANTIZE, [ref.index], [real])
        out = self.operand(OperandCode.TENSOR_QUANT8_ASYMM, dims, target[0], target[1])
        self.op(OperationCode.QUANTIZE, [real], [out])
        return out

    def scratch(self, code: int, dims: Sequence[int], like: int | None = None) -> int:
        """An intermediate operand (not an ONNX value); quantized like operand *like* if given."""
        if like is not None:
            src = self.model.operands[like]
            return self.operand(code, dims, src.scale, src.zero_point)
        return self.operand(code, dims)

    # -- fused activations -----------------------------------------------------------------------------
    def fusable(self, value: ir.Value) -> tuple[FuseCode, ir.Value]:
        """The activation to fold into the producer of *value*: (code, the value the producer now defines)."""
        if value in self.outputs or self.ctx.dtype(value) != DataType.FLOAT:
            return FuseCode.NONE, value
        uses = list(value.uses())
        if len(uses) != 1:
            return FuseCode.NONE, value
        node = uses[0].node
        if node not in self.members or node.op_type not in _FUSABLE_OPS or node in self.fused:
            return FuseCode.NONE, value
        unit = self.ctx.unit_of(node)
        if unit.kind != "single" or not self.ctx.claims(node):
            return FuseCode.NONE, value
        if node.op_type == "Relu":
            code = FuseCode.RELU
        else:
            from .rules.clip import clip_bounds

            bounds = clip_bounds(unit, self.ctx)
            if bounds == (0.0, 6.0):
                code = FuseCode.RELU6
            elif bounds == (-1.0, 1.0):
                code = FuseCode.RELU1
            else:
                return FuseCode.NONE, value
        self.fused.add(node)
        return code, node.outputs[0]

    def new_fused(self, value: ir.Value, perm: tuple[int, ...] | str = "onnx") -> tuple[Ref, int]:
        """A fresh operand for *value*, or for the activation folded into it: (ref, fuse code operand)."""
        code, target = self.fusable(value)
        return self.new(target, perm), self.i32(int(code))

    # -- operations ------------------------------------------------------------------------------------
    def op(self, code: OperationCode, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        level = OPERATION_FEATURE_LEVEL[code]
        if level > self.feature_level:
            self.require(level, f"NNAPI {code.name}")
        self.model.add_operation(code, list(inputs), list(outputs))

    # -- model inputs and outputs ------------------------------------------------------------------------
    def add_inputs(self, values: Sequence[ir.Value]) -> None:
        for value in values:
            if 0 in self.shape(value):
                self.empty.add(value)
                continue
            ref = self.new(value, "onnx")
            self.model.inputs.append(ref.index)
            self.model.input_names.append(value.name or "")

    def add_outputs(self, values: Sequence[ir.Value]) -> None:
        taken = set(self.model.inputs)
        for value in values:
            if value in self.empty or 0 in self.shape(value):
                continue
            ref = self.get(value, "onnx")
            index = ref.index
            if index in taken or index in self.model.values:
                # A model output must be its own operand: copy (RESHAPE to the same dims).
                code, scale, zp = self.tensor_code(value)
                operand = self.model.operands[index]
                index = self.operand(code, operand.dims, scale, zp)
                self.op(OperationCode.RESHAPE, [ref.index, self.i32s(operand.dims)], [index])
            taken.add(index)
            self.model.outputs.append(index)
            self.model.output_names.append(value.name or "")


def compile_partition(backend: object, partition: PartitionView, ctx: RuleContext) -> CompiledPartition:
    """Lower *partition* into an NNAPI model and wrap the serialized model in a CompiledPartition."""
    from . import __version__

    builder = NnapiBuilder(ctx, partition)
    inputs = runtime_inputs(partition, ctx)
    try:
        builder.add_inputs(inputs)
        lower_units(partition, ctx, builder)
        builder.add_outputs(partition.outputs)
        data = serialize.write(builder.model)
    except CompileError as exc:
        raise CompileError(f"nnapi: {exc}") from None
    model = builder.model
    metadata = {
        "compiler": f"mobile-ep-nnapi {__version__}",
        "feature_level": str(model.feature_level),
        "relax_fp16": str(model.relax_fp16).lower(),
        "operations": str(len(model.operations)),
        "operands": str(len(model.operands)),
        "nnapi_ops": ",".join(sorted({op.code.name for op in model.operations})),
    }
    if model.relax_fp16:
        # float32 computed in float16 (10-bit mantissa): what a verification may expect.
        metadata.update({"rtol": "0.02", "atol": "0.01"})
    steps = [o.scale for i, o in enumerate(model.operands)
             if o.type == OperandCode.TENSOR_QUANT8_ASYMM and i not in model.values and i not in model.inputs]
    if steps:
        # Requantization rounds; drivers (and onnxruntime's own kernels) may land one step away.
        metadata["quantized"] = "true"
        metadata["atol"] = f"{max(max(steps) * 1.0001, float(metadata.get('atol', 0))):.9g}"
    return CompiledPartition(
        backend=getattr(backend, "name", "nnapi"),
        format=serialize.FORMAT,
        data=data,
        inputs=tuple(TensorSpec.of(v, ctx) for v in inputs),
        outputs=tuple(TensorSpec.of(v, ctx) for v in partition.outputs),
        metadata=metadata,
    )


def conv_padding(pads: Sequence[int], auto_pad: str, in_hw: Sequence[int], kernel: Sequence[int],
                 strides: Sequence[int], dilations: Sequence[int]) -> tuple[str, tuple[int, int, int, int]]:
    """ONNX padding as NNAPI's: ``("same"|"valid"|"explicit", (left, right, top, bottom))``.

    ``SAME_UPPER`` is NNAPI's implicit SAME (the odd pixel at the end), ``VALID`` its implicit VALID;
    explicit pads matching what SAME would give also use the implicit form.
    """
    explicit = []
    for axis in (0, 1):
        size, k, s, d = in_hw[axis], kernel[axis], strides[axis], dilations[axis]
        effective = (k - 1) * d + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out = math.ceil(size / s)
            total = max((out - 1) * s + effective - size, 0)
            small = total // 2
            before, after = (small, total - small) if auto_pad == "SAME_UPPER" else (total - small, small)
        elif auto_pad == "VALID":
            before = after = 0
        else:
            before, after = int(pads[axis]), int(pads[axis + 2])
        explicit.append((before, after))
    (top, bottom), (left, right) = explicit
    if auto_pad == "VALID" or (auto_pad == "NOTSET" and not any((top, bottom, left, right))):
        return "valid", (0, 0, 0, 0)
    same = []
    for axis in (0, 1):
        size, k, s, d = in_hw[axis], kernel[axis], strides[axis], dilations[axis]
        out = math.ceil(size / s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        same.append((total // 2, total - total // 2))
    if [tuple(e) for e in explicit] == same:
        return "same", (left, right, top, bottom)
    return "explicit", (left, right, top, bottom)
