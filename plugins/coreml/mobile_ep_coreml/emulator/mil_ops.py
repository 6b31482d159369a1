"""numpy kernels for the MIL operations of a saved ML Program, with Core ML's semantics.

Each kernel takes an :class:`OpCall` (the operation's resolved inputs and declared outputs) and returns
its outputs.  The semantics are those of the MIL op definitions (coremltools
``converters/mil/mil/ops/defs/iOS15..iOS18``); where those documents are silent, the kernels follow
the framework the op was made to match (PyTorch for ``pool`` ``ceil_mode`` and ``resample``, TensorFlow for
``resize_nearest_neighbor``), and say so.

Precision: the interpreter rounds every result to the type the program declares for it, so a float16
program keeps float16 values between ops; inside an op, reductions accumulate in float32 (as Core ML's GPU
and Neural Engine do), and matrix products and convolutions sum their products in float64, each sum
rounded once to the result's type: the same on every machine (summed in float32 by numpy's BLAS, the order
follows the CPU's kernels: OpenBLAS's Haswell ones gave 1,000 equal channels of equal weights results a
float32 step apart, which a softmax over logits of ~3e8 turned into 0.04 against 0.001).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from mobile_ep import CompileError

__all__ = ["KERNELS", "OpCall", "MIL_TO_NUMPY"]

#: MIL dtype names (``cast``'s ``dtype``) -> numpy.
MIL_TO_NUMPY: dict[str, Any] = {
    "fp16": np.float16, "fp32": np.float32, "fp64": np.float64, "int8": np.int8, "uint8": np.uint8,
    "int16": np.int16, "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32, "int64": np.int64,
    "bool": np.bool_,
}


class OpCall:
    """One operation being executed: resolved inputs by parameter name, and the declared outputs."""

    def __init__(self, op_type: str, name: str, inputs: dict[str, list[Any]],
                 outputs: Sequence[tuple[Any, tuple[int | None, ...] | None]], ios: int) -> None:
        self.type = op_type
        self.name = name
        self.inputs = inputs
        #: (numpy dtype, shape with None for unknown dims) per output.
        self.outputs = outputs
        #: The iOS version of the program's opset (15 for CoreML5).
        self.ios = ios

    def __contains__(self, key: str) -> bool:
        return key in self.inputs

    def fail(self, message: str) -> CompileError:
        return CompileError(f"coreml emulator: {self.type} {self.name!r}: {message}")

    def get(self, key: str, default: Any = None) -> Any:
        values = self.inputs.get(key)
        if values is None:
            return default
        return values[0] if len(values) == 1 else values

    def list(self, key: str) -> list[Any]:
        return list(self.inputs.get(key, []))

    def x(self, key: str = "x") -> np.ndarray:
        value = self.get(key)
        if value is None:
            raise self.fail(f"missing input {key!r}")
        return np.asarray(value)

    def int(self, key: str, default: int | None = None) -> int:
        value = self.get(key)
        if value is None:
            if default is None:
                raise self.fail(f"missing input {key!r}")
            return default
        return int(np.asarray(value).reshape(-1)[0])

    def ints(self, key: str, default: Sequence[int] | None = None) -> list[int]:
        value = self.get(key)
        if value is None:
            if default is None:
                raise self.fail(f"missing input {key!r}")
            return list(default)
        return [int(v) for v in np.asarray(value).reshape(-1)]

    def float(self, key: str, default: float | None = None) -> float:
        value = self.get(key)
        if value is None:
            if default is None:
                raise self.fail(f"missing input {key!r}")
            return default
        return float(np.asarray(value).reshape(-1)[0])

    def bool(self, key: str, default: bool = False) -> bool:
        value = self.get(key)
        return default if value is None else bool(np.asarray(value).reshape(-1)[0])

    def bools(self, key: str, count: int) -> list[bool]:
        value = self.get(key)
        return [False] * count if value is None else [bool(v) for v in np.asarray(value).reshape(-1)]

    def str(self, key: str, default: str | None = None) -> str:
        value = self.get(key)
        if value is None:
            if default is None:
                raise self.fail(f"missing input {key!r}")
            return default
        return str(value if not isinstance(value, np.ndarray) else value.reshape(-1)[0])

    def out_dtype(self, index: int = 0) -> Any:
        return self.outputs[index][0]


Kernel = Callable[[OpCall], Any]
KERNELS: dict[str, Kernel] = {}


def kernel(*names: str) -> Callable[[Kernel], Kernel]:
    def register(fn: Kernel) -> Kernel:
        for name in names:
            if name in KERNELS:
                raise ValueError(f"two kernels for {name}")
            KERNELS[name] = fn
        return fn
    return register


def _f32(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype != np.float32 else a


def _f64(a: np.ndarray) -> np.ndarray:
    """Values to sum products of (see the module's doc: precision)."""
    return np.asarray(a, dtype=np.float64)


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


# --------------------------------------------------------------------------------------------------
# Elementwise
# --------------------------------------------------------------------------------------------------
def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Kernel:
    def run(op: OpCall) -> np.ndarray:
        with np.errstate(all="ignore"):
            return fn(op.x("x"), op.x("y"))
    return run


def _real_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if np.issubdtype(x.dtype, np.integer):
        return np.trunc(np.true_divide(x, y))
    return np.true_divide(x, y)


def _floor_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if np.issubdtype(x.dtype, np.integer):
        if np.any(y == 0):
            raise CompileError("coreml emulator: floor_div: integer division by zero (undefined on the device)")
        return np.floor_divide(x, y)
    return np.floor(np.true_divide(x, y))


def _pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if np.issubdtype(x.dtype, np.integer):
        return np.power(x.astype(np.float64), y.astype(np.float64))
    return np.power(x, y)


for _name, _fn in {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "real_div": _real_div, "floor_div": _floor_div,
    "pow": _pow, "maximum": np.maximum, "minimum": np.minimum, "mod": np.mod,
    "equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
    "greater": np.greater, "greater_equal": np.greater_equal, "logical_and": np.logical_and,
    "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}.items():
    KERNELS[_name] = _binary(_fn)

_erf = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    return _erf(np.asarray(x, dtype=np.float64)).astype(np.float64)


def _unary(fn: Callable[[np.ndarray], np.ndarray]) -> Kernel:
    def run(op: OpCall) -> np.ndarray:
        with np.errstate(all="ignore"):
            return fn(op.x())
    return run


for _name, _fn in {
    "relu": lambda x: np.maximum(x, np.zeros((), x.dtype)),
    "relu6": lambda x: np.minimum(np.maximum(x, 0), 6).astype(x.dtype),
    "sigmoid": lambda x: (1.0 / (1.0 + np.exp(-x.astype(np.float32)))),
    "tanh": np.tanh, "exp": np.exp, "exp2": np.exp2, "log": np.log, "sqrt": np.sqrt, "abs": np.abs,
    "sign": np.sign, "ceil": np.ceil, "floor": np.floor, "round": np.round, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "atanh": np.arctanh, "square": np.square, "erf": erf, "logical_not": np.logical_not,
    "softsign": lambda x: x / (1 + np.abs(x)),
    "softplus": lambda x: np.logaddexp(np.float32(0), x.astype(np.float32)),
    "silu": lambda x: x.astype(np.float32) / (1.0 + np.exp(-x.astype(np.float32))),
    "identity": lambda x: x,
}.items():
    KERNELS[_name] = _unary(_fn)


@kernel("inverse")
def _inverse(op: OpCall) -> np.ndarray:
    x = op.x()
    with np.errstate(all="ignore"):
        return np.float32(1.0) / (x + np.asarray(op.float("epsilon", 1e-4), x.dtype))


@kernel("rsqrt")
def _rsqrt(op: OpCall) -> np.ndarray:
    x = op.x()
    with np.errstate(all="ignore"):
        return np.float32(1.0) / np.sqrt(x + np.asarray(op.float("epsilon", 1e-12), x.dtype))


@kernel("clip")
def _clip(op: OpCall) -> np.ndarray:
    # coremltools' reference: min(max(x, alpha), beta), so alpha > beta gives beta everywhere.
    x = op.x()
    return np.minimum(np.maximum(x, op.x("alpha").astype(x.dtype)), op.x("beta").astype(x.dtype))


@kernel("leaky_relu")
def _leaky_relu(op: OpCall) -> np.ndarray:
    x = op.x()
    alpha = op.x("alpha").astype(x.dtype)
    return np.where(x >= 0, x, x * alpha)


@kernel("prelu")
def _prelu(op: OpCall) -> np.ndarray:
    x = op.x()
    alpha = op.x("alpha").astype(x.dtype).reshape((1, -1) + (1,) * (x.ndim - 2))
    return np.where(x >= 0, x, x * alpha)


@kernel("elu")
def _elu(op: OpCall) -> np.ndarray:
    x = _f32(op.x())
    alpha = op.float("alpha", 1.0)
    with np.errstate(over="ignore"):
        return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


@kernel("sigmoid_hard")
def _sigmoid_hard(op: OpCall) -> np.ndarray:
    x = _f32(op.x())
    return np.minimum(np.maximum(op.float("alpha", 0.2) * x + op.float("beta", 0.5), 0.0), 1.0)


@kernel("linear_activation")
def _linear_activation(op: OpCall) -> np.ndarray:
    return op.float("alpha", 1.0) * _f32(op.x()) + op.float("beta", 0.0)


@kernel("gelu")
def _gelu(op: OpCall) -> np.ndarray:
    x = _f32(op.x()).astype(np.float64)
    mode = op.str("mode", "EXACT")
    if mode == "EXACT":
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
    if mode == "TANH_APPROXIMATION":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if mode == "SIGMOID_APPROXIMATION":
        return x / (1.0 + np.exp(-1.702 * x))
    raise op.fail(f"unknown mode {mode!r}")


@kernel("thresholded_relu")
def _thresholded_relu(op: OpCall) -> np.ndarray:
    x = op.x()
    return np.where(x > op.float("alpha", 1.0), x, np.zeros((), x.dtype))


@kernel("softmax")
def _softmax(op: OpCall) -> np.ndarray:
    x = _f32(op.x())
    axis = op.int("axis", -1)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


@kernel("select")
def _select(op: OpCall) -> np.ndarray:
    return np.where(op.x("cond").astype(bool), op.x("a"), op.x("b"))


@kernel("cast")
def _cast(op: OpCall) -> np.ndarray:
    x = op.x()
    target = MIL_TO_NUMPY.get(op.str("dtype"))
    if target is None:
        raise op.fail(f"unknown dtype {op.str('dtype')!r}")
    if target is np.bool_:
        return x != 0
    if np.issubdtype(np.dtype(target), np.integer) and np.issubdtype(x.dtype, np.floating):
        info = np.iinfo(target)
        with np.errstate(invalid="ignore"):
            return np.clip(np.trunc(x.astype(np.float64)), info.min, info.max).astype(target)
    return x.astype(target)


# --------------------------------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------------------------------
def _reduce(fn: Callable[..., np.ndarray], accumulate: bool = True) -> Kernel:
    def run(op: OpCall) -> np.ndarray:
        x = op.x()
        if accumulate and np.issubdtype(x.dtype, np.floating):
            x = _f32(x)
        axes = op.get("axes")
        axis = None if axes is None else tuple(_axis(int(a), x.ndim) for a in np.asarray(axes).reshape(-1))
        with np.errstate(all="ignore"):
            return fn(x, axis=axis, keepdims=op.bool("keep_dims", False))
    return run


for _name, _fn in {
    "reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_prod": np.prod,
    "reduce_sum_square": lambda x, axis, keepdims: np.sum(x * x, axis=axis, keepdims=keepdims),
    "reduce_l1_norm": lambda x, axis, keepdims: np.sum(np.abs(x), axis=axis, keepdims=keepdims),
    "reduce_l2_norm": lambda x, axis, keepdims: np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims)),
    "reduce_log_sum": lambda x, axis, keepdims: np.log(np.sum(x, axis=axis, keepdims=keepdims)),
    "reduce_log_sum_exp": lambda x, axis, keepdims: np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims)),
}.items():
    KERNELS[_name] = _reduce(_fn)
KERNELS["reduce_max"] = _reduce(np.max, accumulate=False)
KERNELS["reduce_min"] = _reduce(np.min, accumulate=False)


@kernel("reduce_argmax", "reduce_argmin")
def _argmax(op: OpCall) -> np.ndarray:
    x = op.x()
    axis = _axis(op.int("axis", -1), x.ndim)
    fn = np.argmax if op.type == "reduce_argmax" else np.argmin
    result = fn(x, axis=axis)  # ties: the first index
    if op.bool("keep_dims", False):
        result = np.expand_dims(result, axis)
    return result.astype(np.int32)


# --------------------------------------------------------------------------------------------------
# Linear algebra
# --------------------------------------------------------------------------------------------------
@kernel("matmul")
def _matmul(op: OpCall) -> np.ndarray:
    x, y = _f64(op.x("x")), _f64(op.x("y"))
    if op.bool("transpose_x") and x.ndim >= 2:
        x = np.swapaxes(x, -1, -2)
    if op.bool("transpose_y") and y.ndim >= 2:
        y = np.swapaxes(y, -1, -2)
    if np.issubdtype(op.x("x").dtype, np.integer):
        return np.matmul(op.x("x").astype(np.int64), op.x("y").astype(np.int64))
    return np.matmul(x, y)


@kernel("linear")
def _linear(op: OpCall) -> np.ndarray:
    x, w = _f64(op.x("x")), _f64(op.x("weight"))
    y = np.matmul(x, w.T)
    bias = op.get("bias")
    return y if bias is None else y + _f32(bias)


@kernel("einsum")
def _einsum(op: OpCall) -> np.ndarray:
    values = [_f32(v) for v in op.list("values")]
    return np.einsum(op.str("equation"), *values)


# --------------------------------------------------------------------------------------------------
# Convolutions and pooling
# --------------------------------------------------------------------------------------------------
def _same_pads(sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
               lower: bool) -> list[int]:
    """TensorFlow-style SAME padding (output ceil(in / stride)); extra padding at the end (``same``) or
    at the start (``same_lower``)."""
    pads = []
    for size, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, big = total // 2, total - total // 2
        pads += [big, small] if lower else [small, big]
    return pads


def _window_pads(op: OpCall, sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                 dilations: Sequence[int]) -> list[int]:
    pad_type = op.str("pad_type", "valid").lower()
    if pad_type == "valid":
        return [0] * (2 * len(sizes))
    if pad_type == "custom":
        return op.ints("pad", [0] * (2 * len(sizes)))
    if pad_type in ("same", "same_lower"):
        return _same_pads(sizes, kernel, strides, dilations, pad_type == "same_lower")
    raise op.fail(f"unknown pad_type {pad_type!r}")


def _letters(n: int, first: str) -> str:
    return "".join(chr(ord(first) + i) for i in range(n))


def _conv_inputs(op: OpCall) -> tuple[np.ndarray, np.ndarray, list[int], list[int], int]:
    """What conv and conv_transpose read alike: ``x`` and ``weight`` in float64 (to sum products of),
    ``strides``, ``dilations`` and ``groups``."""
    x, w = _f64(op.x("x")), _f64(op.x("weight"))
    spatial = x.ndim - 2
    return x, w, op.ints("strides", [1] * spatial), op.ints("dilations", [1] * spatial), op.int("groups", 1)


def _add_bias(op: OpCall, y: np.ndarray, spatial: int) -> np.ndarray:
    bias = op.get("bias")
    return y if bias is None else y + _f32(bias).reshape((1, -1) + (1,) * spatial)


@kernel("conv")
def _conv(op: OpCall) -> np.ndarray:
    x, w, strides, dilations, groups = _conv_inputs(op)
    spatial = x.ndim - 2
    kernel = list(w.shape[2:])
    pads = _window_pads(op, x.shape[2:], kernel, strides, dilations)
    n, c = x.shape[:2]
    o = w.shape[0]
    if c % groups or o % groups or w.shape[1] != c // groups:
        raise op.fail(f"weight {list(w.shape)} does not fit input channels {c} with groups={groups}")
    padded = np.pad(x, [(0, 0), (0, 0)] + [(pads[2 * i], pads[2 * i + 1]) for i in range(spatial)])
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    if any(e > s for e, s in zip(extent, padded.shape[2:], strict=True)):
        raise op.fail(f"the kernel {kernel} is larger than the padded input {list(padded.shape[2:])}")
    windows = sliding_window_view(padded, extent, axis=tuple(range(2, 2 + spatial)))
    index = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides) + tuple(
        slice(None, None, d) for d in dilations)
    windows = windows[index]  # [n, c, *out, *kernel]
    out_sizes = windows.shape[2:2 + spatial]
    windows = windows.reshape(n, groups, c // groups, *out_sizes, *kernel)
    weights = w.reshape(groups, o // groups, c // groups, *kernel)
    outs, ks = _letters(spatial, "p"), _letters(spatial, "u")
    y = np.einsum(f"ngc{outs}{ks},goc{ks}->ngo{outs}", windows, weights, optimize=True)
    y = y.reshape(n, o, *out_sizes)
    return _add_bias(op, y, spatial)


@kernel("conv_transpose")
def _conv_transpose(op: OpCall) -> np.ndarray:
    x, w, strides, dilations, groups = _conv_inputs(op)
    spatial = x.ndim - 2
    kernel = list(w.shape[2:])
    n, c = x.shape[:2]
    if w.shape[0] != c or c % groups:
        raise op.fail(f"weight {list(w.shape)} does not fit input channels {c} with groups={groups}")
    o_per_group = w.shape[1]
    full = [(size - 1) * s + (k - 1) * d + 1 for size, s, k, d in zip(x.shape[2:], strides, kernel, dilations,
                                                                        strict=True)]
    y = np.zeros((n, o_per_group * groups, *full), dtype=np.float64)
    cg = c // groups
    for position in np.ndindex(*kernel):
        target = (slice(None), slice(None)) + tuple(
            slice(p * d, p * d + (size - 1) * s + 1, s)
            for p, d, size, s in zip(position, dilations, x.shape[2:], strides, strict=True))
        for g in range(groups):
            contribution = np.tensordot(x[:, g * cg:(g + 1) * cg], w[g * cg:(g + 1) * cg][(slice(None), slice(None))
                                                                                       + position], axes=([1], [0]))
            # tensordot puts the output channels last
            contribution = np.moveaxis(contribution, -1, 1)
            y[(target[0], slice(g * o_per_group, (g + 1) * o_per_group)) + target[2:]] += contribution
    pad_type = op.str("pad_type", "valid").lower()
    if pad_type == "custom":
        pads = op.ints("pad", [0] * (2 * spatial))
    elif pad_type == "valid":
        pads = [0] * (2 * spatial)
    else:
        raise op.fail(f"pad_type {pad_type!r} is not emulated for conv_transpose (give custom pads)")
    crop = (slice(None), slice(None)) + tuple(
        slice(pads[2 * i], full[i] - pads[2 * i + 1]) for i in range(spatial))
    y = y[crop]
    if op.get("output_shape") is not None:  # coremltools records the shape the pads give
        wanted = op.ints("output_shape")[-spatial:]
        if wanted != list(y.shape[2:]):
            raise op.fail(f"output_shape {op.ints('output_shape')} differs from the padded result "
                          f"{list(y.shape)} (other output shapes are not emulated)")
    return _add_bias(op, y, spatial)


def _pool_sizes(sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int], pads: Sequence[int],
                ceil_mode: bool) -> list[int]:
    """Output sizes as the MIL pool ops define them (PyTorch's rule for ceil_mode)."""
    result = []
    for i, (size, k, s) in enumerate(zip(sizes, kernel, strides, strict=True)):
        begin, end = pads[2 * i], pads[2 * i + 1]
        if ceil_mode:
            out = (size + begin + end - k + s - 1) // s + 1
            if (out - 1) * s >= size + begin and begin + end > 0:
                out -= 1
        else:
            out = (size + begin + end - k) // s + 1
        result.append(out)
    return result


@kernel("max_pool", "avg_pool", "l2_pool")
def _pool(op: OpCall) -> np.ndarray:
    x = op.x()
    compute = _f32(x)
    spatial = x.ndim - 2
    kernel = op.ints("kernel_sizes")
    strides = op.ints("strides", [1] * spatial)
    pads = _window_pads(op, x.shape[2:], kernel, strides, [1] * spatial)
    ceil_mode = op.bool("ceil_mode", False)
    outs = _pool_sizes(x.shape[2:], kernel, strides, pads, ceil_mode)
    # Pad the end further so that every output window fits (ceil mode); those cells count as nothing.
    extra = [max(0, (o - 1) * s + k - (size + pads[2 * i] + pads[2 * i + 1]))
             for i, (o, s, k, size) in enumerate(zip(outs, strides, kernel, x.shape[2:], strict=True))]
    width = [(0, 0), (0, 0)] + [(pads[2 * i], pads[2 * i + 1] + extra[i]) for i in range(spatial)]
    axes = tuple(range(2, 2 + spatial))
    select = (slice(None), slice(None)) + tuple(slice(None, o * s, s) for o, s in zip(outs, strides, strict=True))
    window_axes = tuple(range(2 + spatial, 2 + 2 * spatial))
    if op.type == "max_pool":
        padded = np.pad(compute, width, constant_values=-np.inf)
        return sliding_window_view(padded, kernel, axis=axes)[select].max(axis=window_axes)
    if op.type == "l2_pool":
        padded = np.pad(compute * compute, width)
        return np.sqrt(sliding_window_view(padded, kernel, axis=axes)[select].sum(axis=window_axes))
    padded = np.pad(compute, width)
    total = sliding_window_view(padded, kernel, axis=axes)[select].sum(axis=window_axes)
    ones = np.ones((1, 1) + x.shape[2:], np.float32)
    if op.bool("exclude_padding_from_average", False):
        mask = np.pad(ones, width)
    else:  # explicit padding counts, the extra ceil-mode cells do not (PyTorch)
        mask = np.pad(np.pad(ones, [(0, 0), (0, 0)] + [(pads[2 * i], pads[2 * i + 1]) for i in range(spatial)],
                             constant_values=1.0),
                      [(0, 0), (0, 0)] + [(0, e) for e in extra])
    count = sliding_window_view(mask, kernel, axis=axes)[select].sum(axis=window_axes)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / count


# --------------------------------------------------------------------------------------------------
# Normalization
# --------------------------------------------------------------------------------------------------
def _channel(v: Any, rank: int) -> np.ndarray:
    return _f32(np.asarray(v)).reshape((1, -1) + (1,) * (rank - 2))


def _channel_affine(op: OpCall, y: np.ndarray, rank: int) -> np.ndarray:
    """*y* times ``gamma`` plus ``beta``, per channel, each only where the op has it."""
    if op.get("gamma") is not None:
        y = y * _channel(op.x("gamma"), rank)
    if op.get("beta") is not None:
        y = y + _channel(op.x("beta"), rank)
    return y


def _standardize(op: OpCall, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """(x - mean) / sqrt(variance + epsilon) over *axes*, the statistics taken from *x* itself."""
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + op.float("epsilon", 1e-5))


@kernel("batch_norm")
def _batch_norm(op: OpCall) -> np.ndarray:
    x = _f32(op.x())
    mean, var = _channel(op.x("mean"), x.ndim), _channel(op.x("variance"), x.ndim)
    y = (x - mean) / np.sqrt(var + op.float("epsilon", 1e-5))
    return _channel_affine(op, y, x.ndim)


@kernel("instance_norm")
def _instance_norm(op: OpCall) -> np.ndarray:
    x = _f32(op.x())
    return _channel_affine(op, _standardize(op, x, tuple(range(2, x.ndim))), x.ndim)


@kernel("layer_norm")
def _layer_norm(op: OpCall) -> np.ndarray:
    x = _f32(op.x())
    axes_value = op.get("axes")
    axes = tuple(range(x.ndim)) if axes_value is None else tuple(
        sorted(_axis(int(a), x.ndim) for a in np.asarray(axes_value).reshape(-1)))
    y = _standardize(op, x, axes)
    shape = [x.shape[a] if a in axes else 1 for a in range(x.ndim)]
    if op.get("gamma") is not None:
        y = y * _f32(op.x("gamma")).reshape(shape)
    if op.get("beta") is not None:
        y = y + _f32(op.x("beta")).reshape(shape)
    return y


@kernel("local_response_norm")
def _lrn(op: OpCall) -> np.ndarray:
    x = _f32(op.x())
    size = op.int("size")
    alpha, beta, k = op.float("alpha", 1e-4), op.float("beta", 0.75), op.float("k", 1.0)
    square = x * x
    channels = x.shape[1]
    total = np.zeros_like(x)
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    for c in range(channels):
        total[:, c] = square[:, max(0, c - before):min(channels, c + after + 1)].sum(axis=1)
    return x / np.power(k + alpha / size * total, beta)


# --------------------------------------------------------------------------------------------------
# Shapes and indexing
# --------------------------------------------------------------------------------------------------
@kernel("const")
def _const(op: OpCall) -> np.ndarray:  # consts are resolved by the interpreter; kept for completeness
    return op.x("val")


@kernel("concat")
def _concat(op: OpCall) -> np.ndarray:
    values = [np.asarray(v) for v in op.list("values")]
    axis = op.int("axis")
    if op.bool("interleave"):
        return _interleave(values, _axis(axis, values[0].ndim))
    return np.concatenate(values, axis=_axis(axis, values[0].ndim))


def _interleave(values: list[np.ndarray], axis: int) -> np.ndarray:
    """Concat with interleave=True (inputs of one shape): slice i of every input in turn along *axis*."""
    if len({v.shape for v in values}) != 1:
        raise CompileError("coreml emulator: interleaved concat of inputs with different shapes")
    shape = list(values[0].shape)
    shape[axis] *= len(values)
    return np.stack(values, axis=axis + 1).reshape(shape)


@kernel("reshape")
def _reshape(op: OpCall) -> np.ndarray:
    x = op.x()
    shape = op.ints("shape")
    if len(shape) == x.ndim:
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return x.reshape(shape)


@kernel("transpose")
def _transpose(op: OpCall) -> np.ndarray:
    return np.transpose(op.x(), op.ints("perm"))


@kernel("expand_dims")
def _expand_dims(op: OpCall) -> np.ndarray:
    x = op.x()
    rank = x.ndim + len(op.ints("axes"))
    return np.expand_dims(x, tuple(_axis(a, rank) for a in op.ints("axes")))


@kernel("squeeze")
def _squeeze(op: OpCall) -> np.ndarray:
    x = op.x()
    axes = op.get("axes")
    if axes is None:
        return np.squeeze(x)
    return np.squeeze(x, axis=tuple(_axis(int(a), x.ndim) for a in np.asarray(axes).reshape(-1)))


@kernel("slice_by_index")
def _slice_by_index(op: OpCall) -> np.ndarray:
    x = op.x()
    rank = x.ndim
    begin, end = op.ints("begin"), op.ints("end")
    stride = op.ints("stride", [1] * rank)
    begin_mask, end_mask = op.bools("begin_mask", rank), op.bools("end_mask", rank)
    squeeze_mask = op.bools("squeeze_mask", rank)
    index: list[Any] = []
    for axis in range(rank):
        if squeeze_mask[axis]:
            index.append(begin[axis])
            continue
        index.append(slice(None if begin_mask[axis] else begin[axis], None if end_mask[axis] else end[axis],
                           stride[axis]))
    return x[tuple(index)]


@kernel("slice_by_size")
def _slice_by_size(op: OpCall) -> np.ndarray:
    x = op.x()
    begin, size = op.ints("begin"), op.ints("size")
    return x[tuple(slice(b, None if s == -1 else b + s) for b, s in zip(begin, size, strict=True))]


def _check_indices(op: OpCall, indices: np.ndarray, size: int) -> np.ndarray:
    indices = indices.astype(np.int64)
    low = 0 if op.ios >= 17 else -size
    if indices.size and (indices.min() < low or indices.max() >= size):
        bad = indices[(indices < low) | (indices >= size)].reshape(-1)[0]
        raise op.fail(f"index {int(bad)} is out of bounds for a dim of {size} (undefined on the device"
                      f"{'; iOS 17+ gather takes no negative indices' if op.ios >= 17 and bad < 0 else ''})")
    return indices


@kernel("gather")
def _gather(op: OpCall) -> np.ndarray:
    x = op.x()
    axis = _axis(op.int("axis", 0), x.ndim)
    if op.int("batch_dims", 0) != 0:
        raise op.fail("batch_dims != 0 is not emulated")
    indices = _check_indices(op, op.x("indices"), x.shape[axis])
    return np.take(x, indices, axis=axis)


@kernel("gather_nd")
def _gather_nd(op: OpCall) -> np.ndarray:
    x = op.x()
    if op.int("batch_dims", 0) != 0:
        raise op.fail("batch_dims != 0 is not emulated")
    indices = op.x("indices").astype(np.int64)
    depth = indices.shape[-1]
    parts = tuple(_check_indices(op, indices[..., i], x.shape[i]) for i in range(depth))
    return x[parts]


@kernel("gather_along_axis")
def _gather_along_axis(op: OpCall) -> np.ndarray:
    x = op.x()
    axis = _axis(op.int("axis", 0), x.ndim)
    indices = _check_indices(op, op.x("indices"), x.shape[axis])
    return np.take_along_axis(x, indices, axis=axis)


@kernel("pad")
def _pad(op: OpCall) -> np.ndarray:
    x = op.x()
    pad = op.ints("pad")
    n = len(pad) // 2
    width = [(0, 0)] * (x.ndim - n) + [(pad[2 * i], pad[2 * i + 1]) for i in range(n)]
    mode = op.str("mode", "constant")
    if mode == "constant":
        return np.pad(x, width, constant_values=np.asarray(op.float("constant_val", 0.0), x.dtype))
    if mode == "reflect":
        return np.pad(x, width, mode="reflect")
    if mode == "replicate":
        return np.pad(x, width, mode="edge")
    raise op.fail(f"unknown mode {mode!r}")


@kernel("split")
def _split(op: OpCall) -> list[np.ndarray]:
    x = op.x()
    axis = _axis(op.int("axis"), x.ndim)
    sizes = op.get("split_sizes")
    if sizes is not None:
        bounds = np.cumsum([int(s) for s in np.asarray(sizes).reshape(-1)])[:-1]
        return np.split(x, bounds, axis=axis)
    return np.split(x, op.int("num_splits"), axis=axis)


@kernel("tile")
def _tile(op: OpCall) -> np.ndarray:
    return np.tile(op.x(), op.ints("reps"))


@kernel("shape")
def _shape(op: OpCall) -> np.ndarray:
    return np.array(op.x().shape, dtype=np.int32)


@kernel("fill")
def _fill(op: OpCall) -> np.ndarray:
    value = np.asarray(op.get("value", 0.0))
    return np.full(op.ints("shape"), value, dtype=value.dtype)


@kernel("fill_like")
def _fill_like(op: OpCall) -> np.ndarray:
    value = np.asarray(op.get("value", 0.0))
    return np.full(op.x("ref_tensor").shape, value, dtype=value.dtype)


@kernel("range_1d")
def _range_1d(op: OpCall) -> np.ndarray:
    return np.arange(np.asarray(op.get("start")), np.asarray(op.get("end")), np.asarray(op.get("step")))


@kernel("depth_to_space")
def _depth_to_space(op: OpCall) -> np.ndarray:  # DCR, as TensorFlow
    x = op.x()
    b = op.int("block_size")
    n, c, h, w = x.shape
    y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    return y.reshape(n, c // (b * b), h * b, w * b)


@kernel("space_to_depth")
def _space_to_depth(op: OpCall) -> np.ndarray:
    x = op.x()
    b = op.int("block_size")
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)


@kernel("pixel_shuffle")
def _pixel_shuffle(op: OpCall) -> np.ndarray:  # CRD, as PyTorch
    x = op.x()
    f = op.int("upscale_factor")
    n, c, h, w = x.shape
    y = x.reshape(n, c // (f * f), f, f, h, w).transpose(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (f * f), h * f, w * f)


# --------------------------------------------------------------------------------------------------
# Resizing and sampling
# --------------------------------------------------------------------------------------------------
def _interpolate(x: np.ndarray, grids: Sequence[np.ndarray]) -> np.ndarray:
    """Separable linear interpolation of the last two dims at fractional source coordinates."""
    y = _f32(x)
    for axis, grid in zip((-2, -1), grids, strict=True):
        size = y.shape[axis]
        grid = np.clip(grid, 0.0, size - 1)
        low = np.floor(grid).astype(np.int64)
        high = np.minimum(low + 1, size - 1)
        frac = (grid - low).astype(np.float32)
        a, b = np.take(y, low, axis=axis), np.take(y, high, axis=axis)
        shape = [1] * y.ndim
        shape[axis] = len(grid)
        frac = frac.reshape(shape)
        y = a * (1 - frac) + b * frac
    return y


def _grid(mode: str, size_in: int, size_out: int) -> np.ndarray:
    i = np.arange(size_out, dtype=np.float64)
    if mode in ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS"):
        if size_out == 1:
            return np.array([0.0 if mode == "STRICT_ALIGN_CORNERS" else (size_in - 1) / 2])
        return i * (size_in - 1) / (size_out - 1)
    if mode == "DEFAULT":
        return i * size_in / size_out
    if mode == "UNALIGN_CORNERS":
        spacing = size_in / size_out
        return i * spacing + 0.5 * spacing - 0.5
    if mode == "OFFSET_CORNERS":
        delta = max(1, size_in - 1) / size_out
        return 0.5 * delta + i * delta
    raise CompileError(f"coreml emulator: unknown sampling_mode {mode!r}")


@kernel("resize_bilinear")
def _resize_bilinear(op: OpCall) -> np.ndarray:
    x = op.x()
    mode = op.str("sampling_mode", "DEFAULT")
    out_h, out_w = op.int("target_size_height", 1), op.int("target_size_width", 1)
    return _interpolate(x, (_grid(mode, x.shape[-2], out_h), _grid(mode, x.shape[-1], out_w)))


@kernel("upsample_bilinear")
def _upsample_bilinear(op: OpCall) -> np.ndarray:
    x = op.x()
    align = op.bool("align_corners", True)
    half_pixel = op.bool("half_pixel_centers", not align)
    out_h = int(math.floor(x.shape[-2] * op.float("scale_factor_height", 1.0)))
    out_w = int(math.floor(x.shape[-1] * op.float("scale_factor_width", 1.0)))
    mode = "STRICT_ALIGN_CORNERS" if align else ("UNALIGN_CORNERS" if half_pixel else "DEFAULT")
    return _interpolate(x, (_grid(mode, x.shape[-2], out_h), _grid(mode, x.shape[-1], out_w)))


def _nearest(x: np.ndarray, sources: Sequence[np.ndarray]) -> np.ndarray:
    y = x
    for axis, src in zip((-2, -1), sources, strict=True):
        y = np.take(y, np.clip(src, 0, y.shape[axis] - 1), axis=axis)
    return y


@kernel("upsample_nearest_neighbor")
def _upsample_nearest(op: OpCall) -> np.ndarray:
    x = op.x()
    scales = (op.float("scale_factor_height", 1.0), op.float("scale_factor_width", 1.0))
    sources = []
    for axis, scale in zip((-2, -1), scales, strict=True):
        out = int(math.floor(x.shape[axis] * scale))
        sources.append(np.floor(np.arange(out) / scale).astype(np.int64))
    return _nearest(x, sources)


@kernel("resize_nearest_neighbor")
def _resize_nearest(op: OpCall) -> np.ndarray:
    # TensorFlow's ResizeNearestNeighbor (align_corners=False, half_pixel_centers=False), which
    # coremltools lowers to this op: source = floor(dst * in / out).
    x = op.x()
    outs = (op.int("target_size_height"), op.int("target_size_width"))
    sources = [np.floor(np.arange(out) * (x.shape[axis] / out)).astype(np.int64)
               for axis, out in zip((-2, -1), outs, strict=True)]
    return _nearest(x, sources)


@kernel("resample")
def _resample(op: OpCall) -> np.ndarray:
    # PyTorch's grid_sample, which coremltools lowers to this op.
    x = _f32(op.x())
    grid = _f32(op.x("coordinates")).astype(np.float64)
    if op.str("sampling_mode") != "bilinear":
        raise op.fail(f"sampling_mode {op.str('sampling_mode')!r} is not emulated")
    padding = op.str("padding_mode")
    value = op.float("padding_value", 0.0)
    mode = op.str("coordinates_mode")
    align = op.bool("align_corners")
    n, c, h, w = x.shape

    def unnormalize(coord: np.ndarray, size: int) -> np.ndarray:
        if mode == "unnormalized":
            return coord
        if mode == "normalized_zero_to_one":
            coord = coord * 2 - 1
        elif mode != "normalized_minus_one_to_one":
            raise op.fail(f"coordinates_mode {mode!r} is not emulated")
        return (coord + 1) / 2 * (size - 1) if align else ((coord + 1) * size - 1) / 2

    def reflect(coord: np.ndarray, low: float, high: float) -> np.ndarray:
        if high <= low:
            return np.zeros_like(coord)
        span = high - low
        coord = np.abs(coord - low)
        flips = np.floor(coord / span)
        extra = coord - flips * span
        return np.where(flips % 2 == 0, extra + low, span - extra + low)

    def source(coord: np.ndarray, size: int) -> np.ndarray:
        coord = unnormalize(coord, size)
        if padding == "border":
            coord = np.clip(coord, 0, size - 1)
        elif padding == "reflection":
            coord = reflect(coord, 0, size - 1) if align else reflect(coord, -0.5, size - 0.5)
            coord = np.clip(coord, 0, size - 1)
        elif padding not in ("constant",):
            raise op.fail(f"padding_mode {padding!r} is not emulated")
        return coord

    gx, gy = source(grid[..., 0], w), source(grid[..., 1], h)
    x0, y0 = np.floor(gx).astype(np.int64), np.floor(gy).astype(np.int64)
    out = np.zeros((n, c) + gx.shape[1:], dtype=np.float64)
    batch = np.arange(n).reshape(n, 1, 1)
    for dy in (0, 1):
        for dx in (0, 1):
            xi, yi = x0 + dx, y0 + dy
            weight = (1 - np.abs(gx - xi)) * (1 - np.abs(gy - yi))
            inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
            values = x[batch, :, np.clip(yi, 0, h - 1), np.clip(xi, 0, w - 1)]  # [n, h2, w2, c]
            values = np.where(inside[..., None], values, value)
            out += np.moveaxis(values * weight[..., None], -1, 1)
    return out
