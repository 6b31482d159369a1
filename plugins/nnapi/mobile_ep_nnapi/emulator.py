"""A numpy emulator of NNAPI: executes a (serialized) :class:`~mobile_ep_nnapi.model.NnapiModel` on this machine.

It is the host reference of what the NNAPI runtime computes for the operations mobile-ep emits, with
NNAPI's semantics rather than ONNX's: NHWC tensors (or NCHW with the layout flag), OHWI / [1,H,W,O]
filters, implicit SAME/VALID or explicit padding, fused activation codes, TFLite-style resize coordinates,
average pooling that ignores padding, quantized tensors as (uint8, scale, zero point) with int32 biases.

**Relaxed float32** (``relax_fp16``, ``ANeuralNetworksModel_relaxComputationFloat32toFloat16``): every
float32 input of an operation is rounded to float16 and elementwise arithmetic runs in numpy float16;
convolutions, fully-connected layers and reductions take float16 inputs and sum them in float32 (as fp16
hardware with fp32 accumulators does); every float32 result is rounded to float16.

**Float32** convolutions, fully-connected layers and matrix products sum their products in float64 and
round each sum to float32 once: a correctly rounded result, the same on every machine.  (Summed in float32
by numpy's BLAS, the order depends on the CPU's kernels: on an AVX2 machine the 1,000 equal channels of
SqueezeNet's last convolution came out a float32 step apart, which its softmax, over logits of ~7e9,
turned into 0.025 against 0.001.)

**Quantized arithmetic** is done on real values (``(q - zero_point) * scale``, exact in float64 for the
integer products of convolutions) and requantized with round-half-to-even, clamped to [0, 255].  NNAPI
drivers use fixed-point multipliers and may differ from this by one quantization step.

Every operation's signature (operand count, types, shapes of the result) is checked: a malformed model is
a :class:`~mobile_ep.CompileError`, as NNAPI would refuse it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from mobile_ep import CompileError

from .model import NnapiModel
from .nnapi import FuseCode, OperandCode, OperationCode, PaddingCode, numpy_dtype

__all__ = ["run", "run_named"]

_Handler = Callable[["_Execution", Sequence[int], Sequence[int]], None]
_OPS: dict[OperationCode, _Handler] = {}


def _op(*codes: OperationCode) -> Callable[[_Handler], _Handler]:
    def register(f: _Handler) -> _Handler:
        for code in codes:
            _OPS[code] = f
        return f

    return register


def run(model: NnapiModel, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Execute *model* on *inputs* (one array per model input, in order); the outputs in order.

    Inputs are given in the operand's dims (any array with as many elements is reshaped, as NNAPI takes
    flat buffers); outputs come back in the output operands' dims.
    """
    if len(inputs) != len(model.inputs):
        raise CompileError(f"the NNAPI model has {len(model.inputs)} inputs, {len(inputs)} were given")
    ex = _Execution(model)
    for number, (index, array) in enumerate(zip(model.inputs, inputs, strict=True)):
        operand = model.operands[index]
        array = np.asarray(array)
        dtype = np.dtype(numpy_dtype(operand.type))
        if array.dtype != dtype:
            raise CompileError(f"model input {number} is {array.dtype}, the operand is {operand.describe()}")
        if array.size != math.prod(operand.dims):
            raise CompileError(f"model input {number} has {array.size} elements, the operand is {operand.describe()}")
        ex.values[index] = array.reshape(operand.dims)
    for number, op in enumerate(model.operations):
        handler = _OPS.get(op.code)
        if handler is None:
            raise CompileError(f"the emulator does not implement NNAPI {op.code.name}")
        try:
            handler(ex, op.inputs, op.outputs)
        except CompileError as exc:
            raise CompileError(f"operation {number} ({op.code.name}): {exc}") from None
        except (ValueError, IndexError, TypeError) as exc:
            raise CompileError(f"operation {number} ({op.code.name}) failed: {exc}") from None
    return [ex.values[i] for i in model.outputs]


def run_named(model: NnapiModel, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """:func:`run` with inputs and outputs by the model's input/output names."""
    missing = [n for n in model.input_names if n not in feeds]
    if missing:
        raise CompileError(f"missing inputs {missing}")
    outputs = run(model, [feeds[n] for n in model.input_names])
    return dict(zip(model.output_names, outputs, strict=True))


class _Execution:
    def __init__(self, model: NnapiModel) -> None:
        self.model = model
        self.relaxed = model.relax_fp16
        self.values: dict[int, np.ndarray] = {i: model.value(i) for i in model.values}

    # -- reading -------------------------------------------------------------------------------------
    def operand(self, index: int):
        return self.model.operands[index]

    def code(self, index: int) -> OperandCode:
        return OperandCode(self.model.operands[index].type)

    def raw(self, index: int) -> np.ndarray:
        if index not in self.values:
            raise CompileError(f"operand {index} has no value yet")
        return self.values[index]

    def scalar(self, index: int, *codes: OperandCode) -> int | float | bool:
        if codes and self.code(index) not in codes:
            raise CompileError(f"operand {index} is {self.code(index).name}, expected {'/'.join(c.name for c in codes)}")
        if not self.operand(index).is_scalar:
            raise CompileError(f"operand {index} is a tensor, expected a scalar")
        return self.raw(index).item()

    def ints(self, index: int) -> list[int]:
        if self.code(index) != OperandCode.TENSOR_INT32:
            raise CompileError(f"operand {index} is {self.code(index).name}, expected TENSOR_INT32")
        return [int(v) for v in self.raw(index).reshape(-1)]

    def real(self, index: int) -> np.ndarray:
        """The operand's values as numbers: dequantized, or float16 for relaxed float32."""
        code = self.code(index)
        array = self.raw(index)
        operand = self.operand(index)
        if code in (OperandCode.TENSOR_QUANT8_ASYMM, OperandCode.TENSOR_QUANT8_ASYMM_SIGNED,
                    OperandCode.TENSOR_QUANT8_SYMM, OperandCode.TENSOR_QUANT16_SYMM, OperandCode.TENSOR_QUANT16_ASYMM):
            return (array.astype(np.float64) - operand.zero_point) * operand.scale
        if code == OperandCode.TENSOR_QUANT8_SYMM_PER_CHANNEL:
            cq = operand.channel_quant
            shape = [1] * array.ndim
            shape[cq.channel_dim] = -1
            return array.astype(np.float64) * np.asarray(cq.scales, dtype=np.float64).reshape(shape)
        if code in (OperandCode.TENSOR_FLOAT32, OperandCode.FLOAT32) and self.relaxed:
            return array.astype(np.float16)
        return array

    def accumulate(self, index: int) -> np.ndarray:
        """Values to sum products of: float64 for float32 (each sum of products is then rounded to float32
        once: the same on every machine, where float32 BLAS kernels sum in an order of their CPU's and give
        equal channels of equal weights results a float32 step apart), float32 for relaxed float32 (float16
        values, float32 accumulators), exact float64 for quantized."""
        values = self.real(index)
        if values.dtype == np.float16:
            return values.astype(np.float32)
        return values.astype(np.float64) if values.dtype == np.float32 else values

    # -- writing -------------------------------------------------------------------------------------
    def put(self, index: int, values: np.ndarray, fuse: int = FuseCode.NONE) -> None:
        operand = self.operand(index)
        code = OperandCode(operand.type)
        values = np.asarray(values)
        if fuse:
            values = _activation(values, fuse)
        if tuple(values.shape) != tuple(operand.dims) and values.size == math.prod(operand.dims) and \
                len(operand.dims) == 1 and values.ndim == 0:
            values = values.reshape(operand.dims)
        if tuple(values.shape) != tuple(operand.dims):
            raise CompileError(f"the result has shape {list(values.shape)}, operand {index} is {operand.describe()}")
        if code in (OperandCode.TENSOR_QUANT8_ASYMM, OperandCode.TENSOR_QUANT8_ASYMM_SIGNED):
            lo, hi = (0, 255) if code == OperandCode.TENSOR_QUANT8_ASYMM else (-128, 127)
            q = np.rint(values.astype(np.float64) / operand.scale) + operand.zero_point
            self.values[index] = np.clip(q, lo, hi).astype(numpy_dtype(code))
        elif code == OperandCode.TENSOR_FLOAT32:
            out = values.astype(np.float32)
            self.values[index] = out.astype(np.float16).astype(np.float32) if self.relaxed else out
        elif code == OperandCode.TENSOR_BOOL8:
            self.values[index] = values.astype(np.bool_)
        else:
            self.values[index] = values.astype(numpy_dtype(code))

    def fuse(self, index: int) -> int:
        code = int(self.scalar(index, OperandCode.INT32))
        if code not in (0, 1, 2, 3):
            raise CompileError(f"fused activation code {code} is not 0..3")
        return code


def _activation(values: np.ndarray, fuse: int) -> np.ndarray:
    if fuse == FuseCode.RELU:
        return np.maximum(values, 0)
    if fuse == FuseCode.RELU1:
        return np.clip(values, -1, 1)
    if fuse == FuseCode.RELU6:
        return np.clip(values, 0, 6)
    return values


def _arity(inputs: Sequence[int], *counts: int) -> None:
    if len(inputs) not in counts:
        raise CompileError(f"takes {' or '.join(map(str, counts))} inputs, got {len(inputs)}")


# --------------------------------------------------------------------------------------------------
# Elementwise
# --------------------------------------------------------------------------------------------------
_BINARY = {
    OperationCode.ADD: np.add, OperationCode.SUB: np.subtract, OperationCode.MUL: np.multiply,
    OperationCode.DIV: np.divide,
}


def _make_binary(code: OperationCode, f: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> _Handler:
    def handler(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        _arity(inputs, 3)
        a, b = ex.real(inputs[0]), ex.real(inputs[1])
        if a.dtype != b.dtype:
            raise CompileError(f"inputs have different types ({ex.code(inputs[0]).name}, {ex.code(inputs[1]).name})")
        with np.errstate(all="ignore"):
            if code == OperationCode.DIV and np.issubdtype(a.dtype, np.integer):
                result = np.floor_divide(a, b)
            else:
                result = f(a, b)
        ex.put(outputs[0], result, ex.fuse(inputs[2]))

    return handler


for _code, _f in _BINARY.items():
    _OPS[_code] = _make_binary(_code, _f)


_TWO = {
    OperationCode.POW: np.power, OperationCode.MAXIMUM: np.maximum, OperationCode.MINIMUM: np.minimum,
    OperationCode.EQUAL: np.equal, OperationCode.NOT_EQUAL: np.not_equal, OperationCode.LESS: np.less,
    OperationCode.LESS_EQUAL: np.less_equal, OperationCode.GREATER: np.greater,
    OperationCode.GREATER_EQUAL: np.greater_equal, OperationCode.LOGICAL_AND: np.logical_and,
    OperationCode.LOGICAL_OR: np.logical_or,
}


def _make_two(f: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> _Handler:
    def handler(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        _arity(inputs, 2)
        with np.errstate(all="ignore"):
            ex.put(outputs[0], f(ex.real(inputs[0]), ex.real(inputs[1])))

    return handler


for _code, _f in _TWO.items():
    _OPS[_code] = _make_two(_f)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


def _hard_swish(x: np.ndarray) -> np.ndarray:
    return x * np.clip(x + 3, 0, 6) / 6


_UNARY: dict[OperationCode, Callable[[np.ndarray], np.ndarray]] = {
    OperationCode.ABS: np.abs, OperationCode.EXP: np.exp, OperationCode.FLOOR: np.floor, OperationCode.LOG: np.log,
    OperationCode.NEG: np.negative, OperationCode.SIN: np.sin, OperationCode.SQRT: np.sqrt,
    OperationCode.RSQRT: lambda x: 1 / np.sqrt(x), OperationCode.TANH: np.tanh, OperationCode.LOGISTIC: _sigmoid,
    OperationCode.RELU: lambda x: np.maximum(x, 0), OperationCode.RELU1: lambda x: np.clip(x, -1, 1),
    OperationCode.RELU6: lambda x: np.clip(x, 0, 6), OperationCode.HARD_SWISH: _hard_swish,
    OperationCode.LOGICAL_NOT: np.logical_not,
}


def _make_unary(f: Callable[[np.ndarray], np.ndarray]) -> _Handler:
    def handler(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        _arity(inputs, 1)
        with np.errstate(all="ignore"):
            ex.put(outputs[0], f(ex.real(inputs[0])))

    return handler


for _code, _f in _UNARY.items():
    _OPS[_code] = _make_unary(_f)


@_op(OperationCode.ELU)
def _elu(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 2)
    x = ex.real(inputs[0])
    alpha = x.dtype.type(ex.scalar(inputs[1], OperandCode.FLOAT32, OperandCode.FLOAT16))
    with np.errstate(all="ignore"):
        ex.put(outputs[0], np.where(x > 0, x, alpha * (np.exp(x) - 1)))


@_op(OperationCode.PRELU)
def _prelu(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 2)
    x, alpha = ex.real(inputs[0]), ex.real(inputs[1])
    ex.put(outputs[0], np.where(x >= 0, x, alpha * x))


@_op(OperationCode.CAST)
def _cast(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 1)
    x = ex.real(inputs[0])
    target = ex.code(outputs[0])
    if target == OperandCode.TENSOR_INT32 and np.issubdtype(x.dtype, np.floating):
        with np.errstate(invalid="ignore"):
            x = np.trunc(x)
    ex.put(outputs[0], x)


@_op(OperationCode.SELECT)
def _select(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 3)
    ex.put(outputs[0], np.where(ex.raw(inputs[0]), ex.real(inputs[1]), ex.real(inputs[2])))


# --------------------------------------------------------------------------------------------------
# Convolution and pooling
# --------------------------------------------------------------------------------------------------
def _nhwc(ex: _Execution, index: int, nchw: bool) -> np.ndarray:
    x = ex.accumulate(index) if ex.code(index) != OperandCode.TENSOR_FLOAT32 or ex.relaxed else ex.real(index)
    return np.transpose(x, (0, 2, 3, 1)) if nchw else x


def _out_nhwc(ex: _Execution, index: int, values: np.ndarray, nchw: bool, fuse: int = 0) -> None:
    ex.put(index, np.transpose(values, (0, 3, 1, 2)) if nchw else values, fuse)


def _implicit_pads(code: int, size: int, stride: int, kernel: int, dilation: int) -> tuple[int, int]:
    effective = (kernel - 1) * dilation + 1
    if code == PaddingCode.SAME:
        out = math.ceil(size / stride)
        total = max((out - 1) * stride + effective - size, 0)
        return total // 2, total - total // 2
    if code == PaddingCode.VALID:
        return 0, 0
    raise CompileError(f"padding code {code} is not SAME (1) or VALID (2)")


def _is_flag(ex: _Execution, index: int) -> bool:
    return ex.code(index) == OperandCode.BOOL


def _conv_params(ex: _Execution, inputs: Sequence[int], first: int, extra: int, kernel_hw: tuple[int, int],
                 in_hw: tuple[int, int]) -> dict:
    """Padding, strides, [extra ints], fuse, layout and dilations of a conv-like signature starting at *first*.

    The explicit form has four pads where the implicit form has one padding code; the operand after
    the fuse code (a BOOL layout flag) tells them apart as NNAPI does.
    """
    n = len(inputs)
    implicit_len = first + 1 + 2 + extra + 1
    explicit_len = first + 4 + 2 + extra + 1
    implicit = n in (implicit_len, implicit_len + 1, implicit_len + 3) and (
        n == implicit_len or _is_flag(ex, inputs[implicit_len]))
    if not implicit and n not in (explicit_len, explicit_len + 1, explicit_len + 3):
        raise CompileError(f"unexpected number of inputs {n}")
    pos = first
    if implicit:
        pad_code = int(ex.scalar(inputs[pos], OperandCode.INT32))
        pos += 1
    else:
        left, right, top, bottom = (int(ex.scalar(inputs[pos + i], OperandCode.INT32)) for i in range(4))
        pos += 4
    stride_w, stride_h = (int(ex.scalar(inputs[pos + i], OperandCode.INT32)) for i in range(2))
    pos += 2
    extras = [int(ex.scalar(inputs[pos + i], OperandCode.INT32)) for i in range(extra)]
    pos += extra
    fuse = ex.fuse(inputs[pos])
    pos += 1
    nchw = bool(ex.scalar(inputs[pos], OperandCode.BOOL)) if pos < n else False
    pos += 1
    dil_w = dil_h = 1
    if pos < n:
        dil_w, dil_h = (int(ex.scalar(inputs[pos + i], OperandCode.INT32)) for i in range(2))
    if implicit:
        top, bottom = _implicit_pads(pad_code, in_hw[0], stride_h, kernel_hw[0], dil_h)
        left, right = _implicit_pads(pad_code, in_hw[1], stride_w, kernel_hw[1], dil_w)
    if min(stride_w, stride_h, dil_w, dil_h) < 1 or min(left, right, top, bottom) < 0:
        raise CompileError("strides and dilations must be positive and pads non-negative")
    return {"pads": (top, bottom, left, right), "strides": (stride_h, stride_w), "dilations": (dil_h, dil_w),
            "fuse": fuse, "nchw": nchw, "extras": extras}


def _patches(x: np.ndarray, kernel: tuple[int, int], p: dict, fill: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """im2col of an NHWC tensor: ([N, OH, OW, KH, KW, C] values, [OH, OW, KH, KW] validity mask)."""
    n, h, w, c = x.shape
    top, bottom, left, right = p["pads"]
    sh, sw = p["strides"]
    dh, dw = p["dilations"]
    kh, kw = kernel
    padded = np.full((n, h + top + bottom, w + left + right, c), fill, dtype=x.dtype)
    padded[:, top:top + h, left:left + w, :] = x
    valid = np.zeros((h + top + bottom, w + left + right), dtype=bool)
    valid[top:top + h, left:left + w] = True
    oh = (h + top + bottom - ((kh - 1) * dh + 1)) // sh + 1
    ow = (w + left + right - ((kw - 1) * dw + 1)) // sw + 1
    if oh < 1 or ow < 1:
        raise CompileError(f"the kernel {kh}x{kw} does not fit the padded input {h + top + bottom}x{w + left + right}")
    rows = (np.arange(oh) * sh)[:, None] + (np.arange(kh) * dh)[None, :]  # [OH, KH]
    cols = (np.arange(ow) * sw)[:, None] + (np.arange(kw) * dw)[None, :]  # [OW, KW]
    values = padded[:, rows[:, None, :, None], cols[None, :, None, :], :]  # [N, OH, OW, KH, KW, C]
    mask = valid[rows[:, None, :, None], cols[None, :, None, :]]
    return values, mask


def _bias(ex: _Execution, index: int, x_index: int, w_index: int) -> np.ndarray:
    """The bias as real numbers: int32 × (input scale × filter scale, per channel for per-channel filters)."""
    bias = ex.raw(index)
    if ex.code(index) == OperandCode.TENSOR_INT32:
        cq = ex.operand(w_index).channel_quant
        if cq is not None:
            return bias.astype(np.float64) * ex.operand(x_index).scale * np.asarray(cq.scales, dtype=np.float64)
        return bias.astype(np.float64) * ex.operand(index).scale
    return ex.accumulate(index)


def _conv_scales(ex: _Execution, x_index: int, w_index: int, b_index: int) -> None:
    """A quantized convolution's bias must be int32 with scale input × filter (0 with per-channel filters)."""
    if ex.code(x_index) != OperandCode.TENSOR_QUANT8_ASYMM:
        return
    w, b = ex.operand(w_index), ex.operand(b_index)
    if ex.code(b_index) != OperandCode.TENSOR_INT32:
        raise CompileError("a quantized convolution needs an int32 bias")
    if w.channel_quant is not None:
        return
    expected = ex.operand(x_index).scale * w.scale
    if not math.isclose(b.scale, expected, rel_tol=1e-6):
        raise CompileError(f"bias scale {b.scale:g} is not input scale × filter scale ({expected:g})")


@_op(OperationCode.CONV_2D)
def _conv(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _grouped(ex, inputs, outputs, kind="conv")


@_op(OperationCode.DEPTHWISE_CONV_2D)
def _depthwise(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _grouped(ex, inputs, outputs, kind="depthwise")


@_op(OperationCode.GROUPED_CONV_2D)
def _grouped_conv(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _grouped(ex, inputs, outputs, kind="grouped")


def _grouped(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int], kind: str) -> None:
    filt_operand = ex.operand(inputs[1])
    x_operand = ex.operand(inputs[0])
    extra = 0 if kind == "conv" else 1
    # The layout flag decides which dims are H and W; peek at it after parsing once with NHWC dims.
    kernel_hw = (filt_operand.dims[1], filt_operand.dims[2])
    p = _conv_params(ex, inputs, 3, extra, kernel_hw, (x_operand.dims[1], x_operand.dims[2]))
    if p["nchw"]:
        p = _conv_params(ex, inputs, 3, extra, kernel_hw, (x_operand.dims[2], x_operand.dims[3]))
    if kind == "grouped" and len(inputs) not in (9, 12):
        raise CompileError("GROUPED_CONV_2D takes 9 or 12 inputs (the layout flag is mandatory)")
    _conv_scales(ex, inputs[0], inputs[1], inputs[2])
    x = _nhwc(ex, inputs[0], p["nchw"])
    filt = ex.accumulate(inputs[1])  # [O, KH, KW, I] or [1, KH, KW, O]
    bias = _bias(ex, inputs[2], inputs[0], inputs[1])
    values, _ = _patches(x, kernel_hw, p)  # [N, OH, OW, KH, KW, C]
    n, oh, ow, kh, kw, c = values.shape
    if kind == "conv":
        if filt.shape[3] != c:
            raise CompileError(f"filter depth {filt.shape[3]} != input depth {c}")
        out = np.tensordot(values, filt, axes=([3, 4, 5], [1, 2, 3]))  # [N, OH, OW, O]
    elif kind == "depthwise":
        multiplier = p["extras"][0]
        depth_out = filt.shape[3]
        if depth_out != c * multiplier:
            raise CompileError(f"depthwise filter has {depth_out} channels, input {c} × multiplier {multiplier}")
        repeated = np.repeat(values, multiplier, axis=5)  # channel o reads input channel o // multiplier
        out = np.einsum("nhwklc,klc->nhwc", repeated, filt[0])
    else:
        groups = p["extras"][0]
        depth_out, _, _, depth_group = filt.shape
        if c != depth_group * groups or depth_out % groups:
            raise CompileError(f"{groups} groups do not divide input depth {c} / output depth {depth_out}")
        parts = []
        per = depth_out // groups
        for g in range(groups):
            part = values[..., g * depth_group:(g + 1) * depth_group]
            parts.append(np.tensordot(part, filt[g * per:(g + 1) * per], axes=([3, 4, 5], [1, 2, 3])))
        out = np.concatenate(parts, axis=3)
    if bias.shape != (out.shape[3],):
        raise CompileError(f"bias has shape {list(bias.shape)}, expected [{out.shape[3]}]")
    _out_nhwc(ex, outputs[0], out + bias, p["nchw"], p["fuse"])


def _pool(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int], kind: str) -> None:
    x_operand = ex.operand(inputs[0])
    n = len(inputs)
    implicit = n in (7, 8)
    if not implicit and n not in (10, 11):
        raise CompileError(f"takes 7, 8, 10 or 11 inputs, got {n}")
    nchw = bool(ex.scalar(inputs[-1], OperandCode.BOOL)) if n in (8, 11) else False
    hw = (x_operand.dims[2], x_operand.dims[3]) if nchw else (x_operand.dims[1], x_operand.dims[2])
    first = 2 if implicit else 5
    stride_w, stride_h, filter_w, filter_h = (int(ex.scalar(inputs[first + i], OperandCode.INT32)) for i in range(4))
    fuse = ex.fuse(inputs[first + 4])
    if implicit:
        code = int(ex.scalar(inputs[1], OperandCode.INT32))
        top, bottom = _implicit_pads(code, hw[0], stride_h, filter_h, 1)
        left, right = _implicit_pads(code, hw[1], stride_w, filter_w, 1)
    else:
        left, right, top, bottom = (int(ex.scalar(inputs[1 + i], OperandCode.INT32)) for i in range(4))
    p = {"pads": (top, bottom, left, right), "strides": (stride_h, stride_w), "dilations": (1, 1)}
    x = _nhwc(ex, inputs[0], nchw)
    if kind == "max":
        values, mask = _patches(x, (filter_h, filter_w), p, fill=-np.inf)
        out = values.max(axis=(3, 4))
    else:
        values, mask = _patches(x, (filter_h, filter_w), p)
        counts = mask.sum(axis=(2, 3))[None, :, :, None]
        if kind == "l2":
            out = np.sqrt((values.astype(np.float64) ** 2).sum(axis=(3, 4)) / counts)
        else:
            out = values.sum(axis=(3, 4), dtype=np.float64 if values.dtype != np.float16 else np.float32) / counts
    _out_nhwc(ex, outputs[0], out, nchw, fuse)


@_op(OperationCode.AVERAGE_POOL_2D)
def _average_pool(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _pool(ex, inputs, outputs, "average")


@_op(OperationCode.MAX_POOL_2D)
def _max_pool(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _pool(ex, inputs, outputs, "max")


@_op(OperationCode.L2_POOL_2D)
def _l2_pool(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _pool(ex, inputs, outputs, "l2")


@_op(OperationCode.FULLY_CONNECTED)
def _fully_connected(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 4)
    _conv_scales(ex, inputs[0], inputs[1], inputs[2])
    weights = ex.accumulate(inputs[1])  # [units, input_size]
    if weights.ndim != 2:
        raise CompileError("weights must be 2-D")
    x = ex.accumulate(inputs[0]).reshape(-1, weights.shape[1])
    bias = _bias(ex, inputs[2], inputs[0], inputs[1])
    out = x @ weights.T + bias
    ex.put(outputs[0], out.reshape(ex.operand(outputs[0]).dims), ex.fuse(inputs[3]))


@_op(OperationCode.BATCH_MATMUL)
def _batch_matmul(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 2, 4)
    a, b = ex.accumulate(inputs[0]), ex.accumulate(inputs[1])
    if len(inputs) == 4:
        if ex.scalar(inputs[2], OperandCode.BOOL):
            a = np.swapaxes(a, -1, -2)
        if ex.scalar(inputs[3], OperandCode.BOOL):
            b = np.swapaxes(b, -1, -2)
    ex.put(outputs[0], a @ b)


# --------------------------------------------------------------------------------------------------
# Shapes, layout and data movement
# --------------------------------------------------------------------------------------------------
@_op(OperationCode.RESHAPE)
def _reshape(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 2)
    x = ex.raw(inputs[0])
    shape = ex.ints(inputs[1])
    _same_quantization(ex, inputs[0], outputs[0])
    ex.values[outputs[0]] = _checked(ex, outputs[0], x.reshape(shape))


def _same_quantization(ex: _Execution, a: int, b: int) -> None:
    oa, ob = ex.operand(a), ex.operand(b)
    if oa.type != ob.type or oa.scale != ob.scale or oa.zero_point != ob.zero_point:
        raise CompileError(f"output {ob.describe()} must have the input's type and quantization ({oa.describe()})")


def _checked(ex: _Execution, index: int, array: np.ndarray) -> np.ndarray:
    dims = tuple(ex.operand(index).dims)
    if tuple(array.shape) != dims:
        raise CompileError(f"the result has shape {list(array.shape)}, operand {index} is {ex.operand(index).describe()}")
    return np.ascontiguousarray(array)


@_op(OperationCode.TRANSPOSE)
def _transpose(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 1, 2)
    x = ex.raw(inputs[0])
    perm = ex.ints(inputs[1]) if len(inputs) == 2 else list(reversed(range(x.ndim)))
    _same_quantization(ex, inputs[0], outputs[0])
    ex.values[outputs[0]] = _checked(ex, outputs[0], np.transpose(x, perm))


@_op(OperationCode.SQUEEZE)
def _squeeze(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 1, 2)
    x = ex.raw(inputs[0])
    axes = ex.ints(inputs[1]) if len(inputs) == 2 else [i for i, d in enumerate(x.shape) if d == 1]
    _same_quantization(ex, inputs[0], outputs[0])
    ex.values[outputs[0]] = _checked(ex, outputs[0], np.squeeze(x, axis=tuple(a % x.ndim for a in axes)))


@_op(OperationCode.EXPAND_DIMS)
def _expand_dims(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 2)
    x = ex.raw(inputs[0])
    ex.values[outputs[0]] = _checked(ex, outputs[0], np.expand_dims(x, int(ex.scalar(inputs[1], OperandCode.INT32))))


@_op(OperationCode.CONCATENATION)
def _concatenation(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    if len(inputs) < 2:
        raise CompileError("needs at least one input and the axis")
    axis = int(ex.scalar(inputs[-1], OperandCode.INT32))
    ex.put(outputs[0], np.concatenate([ex.real(i) for i in inputs[:-1]], axis=axis))


@_op(OperationCode.SPLIT)
def _split(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 3)
    x = ex.raw(inputs[0])
    axis = int(ex.scalar(inputs[1], OperandCode.INT32))
    count = int(ex.scalar(inputs[2], OperandCode.INT32))
    if count != len(outputs) or x.shape[axis] % count:
        raise CompileError(f"cannot split dim {x.shape[axis]} into {count} parts for {len(outputs)} outputs")
    for out, part in zip(outputs, np.split(x, count, axis=axis), strict=True):
        _same_quantization(ex, inputs[0], out)
        ex.values[out] = _checked(ex, out, part)


@_op(OperationCode.SLICE)
def _slice(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 3)
    x = ex.raw(inputs[0])
    begin, size = ex.ints(inputs[1]), ex.ints(inputs[2])
    index = tuple(slice(b, x.shape[i] if s == -1 else b + s) for i, (b, s) in enumerate(zip(begin, size, strict=True)))
    _same_quantization(ex, inputs[0], outputs[0])
    ex.values[outputs[0]] = _checked(ex, outputs[0], x[index])


@_op(OperationCode.STRIDED_SLICE)
def _strided_slice(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 7)
    x = ex.raw(inputs[0])
    begin, end, strides = ex.ints(inputs[1]), ex.ints(inputs[2]), ex.ints(inputs[3])
    begin_mask, end_mask, shrink = (int(ex.scalar(inputs[i], OperandCode.INT32)) for i in (4, 5, 6))
    if not len(begin) == len(end) == len(strides) == x.ndim:
        raise CompileError("begin, end and strides need one value per dim")
    result = x
    for axis in range(x.ndim):
        dim, stride = x.shape[axis], strides[axis]
        if stride == 0:
            raise CompileError("a stride is 0")
        b, e = begin[axis], end[axis]
        if b < 0:
            b += dim
        if e < 0:
            e += dim
        if stride > 0:
            b = 0 if begin_mask >> axis & 1 else min(max(b, 0), dim)
            e = dim if end_mask >> axis & 1 else min(max(e, 0), dim)
        else:
            b = dim - 1 if begin_mask >> axis & 1 else min(max(b, -1), dim - 1)
            e = -1 if end_mask >> axis & 1 else min(max(e, -1), dim - 1)
        if shrink >> axis & 1:
            e = b + 1 if stride > 0 else b - 1
        picks = np.arange(b, e, stride)
        result = np.take(result, picks, axis=axis)
    if shrink:
        result = result.reshape([d for axis, d in enumerate(result.shape) if not shrink >> axis & 1])
    _same_quantization(ex, inputs[0], outputs[0])
    ex.values[outputs[0]] = _checked(ex, outputs[0], result)


@_op(OperationCode.GATHER)
def _gather(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 3)
    x = ex.raw(inputs[0])
    axis = int(ex.scalar(inputs[1], OperandCode.INT32))
    indices = ex.raw(inputs[2])
    if ex.code(inputs[2]) != OperandCode.TENSOR_INT32:
        raise CompileError("indices must be TENSOR_INT32")
    if indices.size and (indices.min() < 0 or indices.max() >= x.shape[axis]):
        raise CompileError(f"an index is outside [0, {x.shape[axis]})")
    _same_quantization(ex, inputs[0], outputs[0])
    ex.values[outputs[0]] = _checked(ex, outputs[0], np.take(x, indices, axis=axis))


@_op(OperationCode.TILE)
def _tile(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 2)
    x = ex.raw(inputs[0])
    ex.values[outputs[0]] = _checked(ex, outputs[0], np.tile(x, ex.ints(inputs[1])))


def _paddings(ex: _Execution, index: int, rank: int) -> list[tuple[int, int]]:
    values = ex.raw(index)
    if ex.code(index) != OperandCode.TENSOR_INT32 or values.shape != (rank, 2):
        raise CompileError(f"paddings must be TENSOR_INT32 [{rank}, 2]")
    if values.min(initial=0) < 0:
        raise CompileError("paddings must be non-negative")
    return [(int(a), int(b)) for a, b in values]


@_op(OperationCode.PAD, OperationCode.PAD_V2)
def _pad(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 2, 3)
    x = ex.real(inputs[0])
    pads = _paddings(ex, inputs[1], x.ndim)
    value = 0.0
    if len(inputs) == 3:
        raw = ex.scalar(inputs[2], OperandCode.FLOAT32, OperandCode.INT32, OperandCode.FLOAT16)
        operand = ex.operand(inputs[0])
        value = (raw - operand.zero_point) * operand.scale if operand.scale else raw
    ex.put(outputs[0], np.pad(x, pads, constant_values=x.dtype.type(value)))


@_op(OperationCode.MIRROR_PAD)
def _mirror_pad(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 3)
    x = ex.real(inputs[0])
    mode = int(ex.scalar(inputs[2], OperandCode.INT32))
    ex.put(outputs[0], np.pad(x, _paddings(ex, inputs[1], x.ndim), mode="reflect" if mode == 0 else "symmetric"))


def _block(ex: _Execution, inputs: Sequence[int]) -> tuple[int, bool]:
    _arity(inputs, 2, 3)
    block = int(ex.scalar(inputs[1], OperandCode.INT32))
    nchw = bool(ex.scalar(inputs[2], OperandCode.BOOL)) if len(inputs) == 3 else False
    if block < 1:
        raise CompileError("block size must be positive")
    return block, nchw


@_op(OperationCode.DEPTH_TO_SPACE)
def _depth_to_space(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    block, nchw = _block(ex, inputs)
    x = ex.raw(inputs[0])
    x = np.transpose(x, (0, 2, 3, 1)) if nchw else x
    n, h, w, c = x.shape
    y = x.reshape(n, h, w, block, block, c // (block * block)).transpose(0, 1, 3, 2, 4, 5)
    y = y.reshape(n, h * block, w * block, c // (block * block))
    _same_quantization(ex, inputs[0], outputs[0])
    ex.values[outputs[0]] = _checked(ex, outputs[0], np.transpose(y, (0, 3, 1, 2)) if nchw else y)


@_op(OperationCode.SPACE_TO_DEPTH)
def _space_to_depth(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    block, nchw = _block(ex, inputs)
    x = ex.raw(inputs[0])
    x = np.transpose(x, (0, 2, 3, 1)) if nchw else x
    n, h, w, c = x.shape
    y = x.reshape(n, h // block, block, w // block, block, c).transpose(0, 1, 3, 2, 4, 5)
    y = y.reshape(n, h // block, w // block, c * block * block)
    _same_quantization(ex, inputs[0], outputs[0])
    ex.values[outputs[0]] = _checked(ex, outputs[0], np.transpose(y, (0, 3, 1, 2)) if nchw else y)


@_op(OperationCode.DEQUANTIZE)
def _dequantize(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 1)
    ex.put(outputs[0], ex.real(inputs[0]))


@_op(OperationCode.QUANTIZE)
def _quantize(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 1)
    if ex.code(outputs[0]) != OperandCode.TENSOR_QUANT8_ASYMM:
        raise CompileError("the output must be TENSOR_QUANT8_ASYMM")
    ex.put(outputs[0], ex.real(inputs[0]).astype(np.float64))


# --------------------------------------------------------------------------------------------------
# Reductions and normalizations
# --------------------------------------------------------------------------------------------------
def _axes(ex: _Execution, index: int, rank: int) -> tuple[int, ...]:
    axes = ex.ints(index)
    if any(not -rank <= a < rank for a in axes):
        raise CompileError(f"axes {axes} out of range for rank {rank}")
    return tuple(sorted({a % rank for a in axes}))


@_op(OperationCode.MEAN)
def _mean(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 3)
    x = ex.real(inputs[0])
    axes = _axes(ex, inputs[1], x.ndim)
    keep = int(ex.scalar(inputs[2], OperandCode.INT32)) > 0
    ex.put(outputs[0], np.mean(x, axis=axes, keepdims=keep, dtype=np.float64 if x.dtype != np.float16 else np.float32))


_REDUCE = {OperationCode.REDUCE_SUM: np.sum, OperationCode.REDUCE_PROD: np.prod, OperationCode.REDUCE_MAX: np.max,
           OperationCode.REDUCE_MIN: np.min, OperationCode.REDUCE_ANY: np.any, OperationCode.REDUCE_ALL: np.all}


def _make_reduce(f: Callable) -> _Handler:
    def handler(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        _arity(inputs, 3)
        x = ex.real(inputs[0])
        axes = _axes(ex, inputs[1], x.ndim)
        keep = bool(ex.scalar(inputs[2], OperandCode.BOOL))
        ex.put(outputs[0], f(x, axis=axes, keepdims=keep))

    return handler


for _code, _f in _REDUCE.items():
    _OPS[_code] = _make_reduce(_f)


@_op(OperationCode.ARGMAX, OperationCode.ARGMIN)
def _arg(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    raise CompileError("ARGMAX/ARGMIN are not emulated")


def _softmax_axis(ex: _Execution, inputs: Sequence[int], rank: int) -> int:
    axis = int(ex.scalar(inputs[2], OperandCode.INT32)) if len(inputs) == 3 else -1
    if not -rank <= axis < rank:
        raise CompileError(f"axis {axis} out of range for rank {rank}")
    return axis


@_op(OperationCode.SOFTMAX)
def _softmax(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 2, 3)
    x = ex.real(inputs[0])
    beta = float(ex.scalar(inputs[1], OperandCode.FLOAT32, OperandCode.FLOAT16))
    axis = _softmax_axis(ex, inputs, x.ndim)
    z = (x - x.max(axis=axis, keepdims=True)) * x.dtype.type(beta) if x.dtype.kind == "f" else \
        (x - x.max(axis=axis, keepdims=True)) * beta
    e = np.exp(z)
    ex.put(outputs[0], e / e.sum(axis=axis, keepdims=True))


@_op(OperationCode.LOG_SOFTMAX)
def _log_softmax(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 3)
    x = ex.real(inputs[0])
    beta = float(ex.scalar(inputs[1], OperandCode.FLOAT32, OperandCode.FLOAT16))
    axis = _softmax_axis(ex, inputs, x.ndim)
    z = (x - x.max(axis=axis, keepdims=True)) * x.dtype.type(beta)
    ex.put(outputs[0], z - np.log(np.exp(z).sum(axis=axis, keepdims=True)))


@_op(OperationCode.LOCAL_RESPONSE_NORMALIZATION)
def _lrn(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 5, 6)
    x = ex.real(inputs[0])
    radius = int(ex.scalar(inputs[1], OperandCode.INT32))
    bias, alpha, beta = (float(ex.scalar(inputs[i], OperandCode.FLOAT32, OperandCode.FLOAT16)) for i in (2, 3, 4))
    axis = int(ex.scalar(inputs[5], OperandCode.INT32)) if len(inputs) == 6 else -1
    moved = np.moveaxis(x.astype(np.float64 if x.dtype != np.float16 else np.float16), axis, -1)
    squares = moved * moved
    depth = moved.shape[-1]
    total = np.zeros_like(squares)
    for c in range(depth):
        total[..., c] = squares[..., max(0, c - radius):min(depth, c + radius + 1)].sum(axis=-1)
    out = moved / (bias + alpha * total) ** beta
    ex.put(outputs[0], np.moveaxis(out, -1, axis))


@_op(OperationCode.L2_NORMALIZATION)
def _l2_normalization(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 1, 2)
    x = ex.real(inputs[0])
    axis = int(ex.scalar(inputs[1], OperandCode.INT32)) if len(inputs) == 2 else -1
    ex.put(outputs[0], x / np.sqrt(np.maximum((x * x).sum(axis=axis, keepdims=True), 1e-6)))


@_op(OperationCode.INSTANCE_NORMALIZATION)
def _instance_normalization(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    _arity(inputs, 5)
    nchw = bool(ex.scalar(inputs[4], OperandCode.BOOL))
    x = _nhwc(ex, inputs[0], nchw).astype(np.float64 if not ex.relaxed else np.float32)
    gamma, beta, epsilon = (float(ex.scalar(inputs[i], OperandCode.FLOAT32, OperandCode.FLOAT16)) for i in (1, 2, 3))
    mean = x.mean(axis=(1, 2), keepdims=True)
    var = ((x - mean) ** 2).mean(axis=(1, 2), keepdims=True)
    _out_nhwc(ex, outputs[0], (x - mean) / np.sqrt(var + epsilon) * gamma + beta, nchw)


# --------------------------------------------------------------------------------------------------
# Resizing
# --------------------------------------------------------------------------------------------------
def _resize_args(ex: _Execution, inputs: Sequence[int], mandatory_layout: bool) -> tuple[np.ndarray, int, int, dict]:
    n = len(inputs)
    if n < 3 or n > 6:
        raise CompileError(f"takes 3 to 6 inputs, got {n}")
    nchw = bool(ex.scalar(inputs[3], OperandCode.BOOL)) if n >= 4 else False
    if mandatory_layout and n < 4:
        raise CompileError("the layout flag is mandatory")
    align = bool(ex.scalar(inputs[4], OperandCode.BOOL)) if n >= 5 else False
    half = bool(ex.scalar(inputs[5], OperandCode.BOOL)) if n >= 6 else False
    if align and half:
        raise CompileError("align_corners and half_pixel_centers cannot both be set")
    x = _nhwc(ex, inputs[0], nchw)
    _, h, w, _ = x.shape
    if ex.code(inputs[1]) == OperandCode.INT32:
        out_w, out_h = int(ex.scalar(inputs[1])), int(ex.scalar(inputs[2], OperandCode.INT32))
    else:
        scale_w = float(ex.scalar(inputs[1], OperandCode.FLOAT32, OperandCode.FLOAT16))
        scale_h = float(ex.scalar(inputs[2], OperandCode.FLOAT32, OperandCode.FLOAT16))
        out_w, out_h = int(math.floor(w * scale_w)), int(math.floor(h * scale_h))
    if out_w < 1 or out_h < 1:
        raise CompileError("the output size must be positive")
    return x, out_h, out_w, {"nchw": nchw, "align": align, "half": half}


def _scale(size_in: int, size_out: int, align: bool) -> float:
    if align and size_out > 1:
        return (size_in - 1) / (size_out - 1)
    return size_in / size_out


@_op(OperationCode.RESIZE_BILINEAR)
def _resize_bilinear(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    x, out_h, out_w, f = _resize_args(ex, inputs, False)
    _, h, w, _ = x.shape
    work = x.astype(np.float64) if x.dtype != np.float16 else x.astype(np.float32)

    def axis(size_in: int, size_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        scale = _scale(size_in, size_out, f["align"])
        pos = np.arange(size_out, dtype=np.float64)
        src = (pos + 0.5) * scale - 0.5 if f["half"] else pos * scale
        low = np.floor(src)
        lo = np.clip(low, 0, size_in - 1).astype(np.int64)
        hi = np.clip(np.ceil(src), 0, size_in - 1).astype(np.int64)
        hi = np.minimum(np.maximum(hi, lo), size_in - 1)
        return lo, hi, src - low

    y0, y1, dy = axis(h, out_h)
    x0, x1, dx = axis(w, out_w)
    top = work[:, y0][:, :, x0] * (1 - dx)[None, None, :, None] + work[:, y0][:, :, x1] * dx[None, None, :, None]
    bottom = work[:, y1][:, :, x0] * (1 - dx)[None, None, :, None] + work[:, y1][:, :, x1] * dx[None, None, :, None]
    out = top * (1 - dy)[None, :, None, None] + bottom * dy[None, :, None, None]
    _out_nhwc(ex, outputs[0], out, f["nchw"])


@_op(OperationCode.RESIZE_NEAREST_NEIGHBOR)
def _resize_nearest(ex: _Execution, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    x, out_h, out_w, f = _resize_args(ex, inputs, True)
    _, h, w, _ = x.shape

    def axis(size_in: int, size_out: int) -> np.ndarray:
        scale = _scale(size_in, size_out, f["align"])
        pos = np.arange(size_out, dtype=np.float64)
        src = (pos + 0.5) * scale if f["half"] else pos * scale
        index = np.round(src) if f["align"] else np.floor(src)
        return np.clip(index, 0, size_in - 1).astype(np.int64)

    out = x[:, axis(h, out_h)][:, :, axis(w, out_w)]
    _out_nhwc(ex, outputs[0], out, f["nchw"])
