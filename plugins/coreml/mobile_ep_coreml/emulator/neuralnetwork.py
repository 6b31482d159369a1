"""An interpreter of saved NeuralNetwork models (the ``neuralNetwork`` of ``model.mlmodel``).

Layers run in the order the model lists them, reading and writing named blobs; weights are inside the
layers (float32, or float16 after ``compute_precision=float16``), so there is no weight file.  Layer
semantics follow ``NeuralNetwork.proto``.  Arithmetic is float32, as Core ML's CPU runs NeuralNetwork
models.  A layer type the interpreter does not know is a :class:`~mobile_ep.CompileError` naming it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from mobile_ep import CompileError

from . import mil_ops

__all__ = ["NNInterpreter", "LAYERS"]

Layer = Callable[[Any, list[np.ndarray]], Any]
LAYERS: dict[str, Layer] = {}


def layer(*names: str) -> Callable[[Layer], Layer]:
    def register(fn: Layer) -> Layer:
        for name in names:
            LAYERS[name] = fn
        return fn
    return register


def weights(params: Any, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """A ``WeightParams`` as float32 (from floatValue or the float16Value bytes)."""
    if len(params.floatValue):
        array = np.asarray(params.floatValue, dtype=np.float32)
    elif len(params.float16Value):
        array = np.frombuffer(params.float16Value, dtype="<f2").astype(np.float32)
    elif len(params.rawValue) or params.int8RawValue:
        raise CompileError("coreml emulator: quantized NeuralNetwork weights are not supported")
    else:
        array = np.zeros(0, dtype=np.float32)
    if shape is not None:
        if array.size != int(np.prod(shape, dtype=np.int64)):
            raise CompileError(f"coreml emulator: {array.size} weights for shape {list(shape)}")
        array = array.reshape(shape)
    return array


class NNInterpreter:
    """Executes the layers of a saved NeuralNetwork model with numpy."""

    def __init__(self, model: Any) -> None:
        self.network = model.neuralNetwork
        self.layers = list(self.network.layers)
        self.op_types = list(dict.fromkeys(item.WhichOneof("layer") for item in self.layers))
        unknown = [t for t in self.op_types if t not in LAYERS]
        if unknown:
            first = next(item for item in self.layers if item.WhichOneof("layer") == unknown[0])
            raise CompileError(
                f"coreml emulator: the saved NeuralNetwork uses layer {unknown[0]!r} (layer {first.name!r}), "
                "which the emulator does not implement"
                + (f"; also {', '.join(repr(u) for u in unknown[1:])}" if len(unknown) > 1 else ""))
        self.outputs = [feature.name for feature in model.description.output]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env: dict[str, np.ndarray] = {name: np.asarray(value) for name, value in feeds.items()}
        for item in self.layers:
            kind = item.WhichOneof("layer")
            missing = [name for name in item.input if name not in env]
            if missing:
                raise CompileError(f"coreml emulator: layer {item.name!r} ({kind}) reads {missing} before they "
                                   "are produced")
            try:
                with np.errstate(all="ignore"):
                    result = LAYERS[kind](getattr(item, kind), [env[name] for name in item.input])
            except CompileError:
                raise
            except Exception as exc:
                raise CompileError(f"coreml emulator: layer {item.name!r} ({kind}) failed: "
                                   f"{type(exc).__name__}: {exc}") from exc
            results = result if isinstance(result, (list, tuple)) else [result]
            if len(results) != len(item.output):
                raise CompileError(f"coreml emulator: layer {item.name!r} ({kind}) produced {len(results)} "
                                   f"outputs for {len(item.output)} names")
            for name, value in zip(item.output, results, strict=True):
                value = np.asarray(value)
                if np.issubdtype(value.dtype, np.floating) and value.dtype != np.float32:
                    value = value.astype(np.float32)
                env[name] = value
        missing = [name for name in self.outputs if name not in env]
        if missing:
            raise CompileError(f"coreml emulator: the model's outputs {missing} are never produced")
        return {name: env[name] for name in self.outputs}


def _call(kind: str, inputs: dict[str, Any], ios: int = 14) -> Any:
    """Reuse an ML Program kernel for a layer with the same semantics."""
    packed = {k: [v] for k, v in inputs.items() if v is not None}
    return mil_ops.KERNELS[kind](mil_ops.OpCall(kind, kind, packed, [(np.float32, None)], ios))


def _f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32) if np.issubdtype(np.asarray(x).dtype, np.floating) else np.asarray(x)


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


# -- convolution and pooling ------------------------------------------------------------------------
def _border(amounts: Any) -> list[int]:
    edges = list(amounts.borderAmounts) or []
    pads = []
    for edge in edges or [None, None]:
        pads += [int(edge.startEdgeSize), int(edge.endEdgeSize)] if edge is not None else [0, 0]
    return pads


@layer("convolution")
def _convolution(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    if p.isDeconvolution:
        raise CompileError("coreml emulator: deconvolution layers are not emulated")
    x = _f32(xs[0])
    kernel = [int(k) for k in p.kernelSize] or [3, 3]
    strides = [int(s) for s in p.stride] or [1, 1]
    dilations = [int(d) for d in p.dilationFactor] or [1, 1]
    groups = int(p.nGroups) or 1
    w = weights(p.weights, (int(p.outputChannels), int(p.kernelChannels), *kernel))
    inputs: dict[str, Any] = {"x": x, "weight": w, "strides": np.array(strides), "dilations": np.array(dilations),
                              "groups": np.array(groups)}
    if p.WhichOneof("ConvolutionPaddingType") == "same":
        lower = p.same.asymmetryMode == 1  # TOP_LEFT_HEAVY
        inputs["pad_type"] = "same_lower" if lower else "same"
    else:
        inputs["pad_type"] = "custom"
        inputs["pad"] = np.array(_border(p.valid.paddingAmounts))
    if p.hasBias:
        inputs["bias"] = weights(p.bias, (int(p.outputChannels),))
    return _call("conv", inputs)


@layer("pooling")
def _pooling(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    x = _f32(xs[0])
    kind = {0: "max_pool", 1: "avg_pool", 2: "l2_pool"}[int(p.type)]
    if p.globalPooling:
        fn = np.max if kind == "max_pool" else np.mean
        return fn(x, axis=(-2, -1), keepdims=True)
    kernel = [int(k) for k in p.kernelSize] or [3, 3]
    strides = [int(s) for s in p.stride] or [1, 1]
    inputs: dict[str, Any] = {"x": x, "kernel_sizes": np.array(kernel), "strides": np.array(strides)}
    padding = p.WhichOneof("PoolingPaddingType")
    if padding == "same":
        inputs["pad_type"] = "same_lower" if p.same.asymmetryMode == 1 else "same"
    elif padding == "includeLastPixel":  # symmetric padding, ceil mode (the formula in NeuralNetwork.proto)
        amounts = [int(a) for a in p.includeLastPixel.paddingAmounts] or [0, 0]
        inputs["pad_type"] = "custom"
        inputs["pad"] = np.array([amounts[0], amounts[0], amounts[1], amounts[1]])
        inputs["ceil_mode"] = np.array(True)
    else:
        inputs["pad_type"] = "custom"
        inputs["pad"] = np.array(_border(p.valid.paddingAmounts))
    if kind == "avg_pool":
        inputs["exclude_padding_from_average"] = np.array(bool(p.avgPoolExcludePadding))
    return _call(kind, inputs)


# -- activations and elementwise ---------------------------------------------------------------------
@layer("activation")
def _activation(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    x = _f32(xs[0])
    kind = p.WhichOneof("NonlinearityType")
    params = getattr(p, kind)
    if kind == "ReLU":
        return np.maximum(x, 0)
    if kind == "leakyReLU":
        return np.where(x >= 0, x, params.alpha * x)
    if kind == "sigmoid":
        return 1 / (1 + np.exp(-x))
    if kind == "tanh":
        return np.tanh(x)
    if kind == "sigmoidHard":
        return np.minimum(np.maximum(params.alpha * x + params.beta, 0), 1)
    if kind == "linear":
        return params.alpha * x + params.beta
    if kind == "ELU":
        return np.where(x >= 0, x, params.alpha * np.expm1(np.minimum(x, 0)))
    if kind == "softplus":
        return np.logaddexp(0, x)
    if kind == "softsign":
        return x / (1 + np.abs(x))
    if kind == "scaledTanh":
        return params.alpha * np.tanh(params.beta * x)
    if kind == "thresholdedReLU":
        return np.where(x >= params.alpha, x, 0)
    if kind == "PReLU":
        alpha = weights(params.alpha)
        shape = [1] * x.ndim
        shape[-3] = alpha.size
        return np.where(x >= 0, x, x * alpha.reshape(shape))
    raise CompileError(f"coreml emulator: activation {kind} is not emulated")


@layer("unary")
def _unary(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    x = _f32(xs[0]) * (p.scale or 1.0) + p.shift
    epsilon = p.epsilon or 1e-6
    kind = int(p.type)
    if kind == 0:
        return np.sqrt(x)
    if kind == 1:
        return 1 / np.sqrt(x + epsilon)
    if kind == 2:
        return 1 / (x + epsilon)
    if kind == 3:
        return np.power(x, p.alpha)
    if kind == 4:
        return np.exp(x)
    if kind == 5:
        return np.log(x)
    if kind == 6:
        return np.abs(x)
    if kind == 7:
        return np.maximum(x, p.alpha)
    raise CompileError(f"coreml emulator: unary function {kind} is not emulated")


def _legacy(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Layer:
    """add/multiply/max/min: several inputs combined, or one input with the scalar alpha."""
    def run(p: Any, xs: list[np.ndarray]) -> np.ndarray:
        if len(xs) == 1:
            return fn(xs[0], np.asarray(getattr(p, "alpha", 0.0), dtype=np.float32))
        result = xs[0]
        for x in xs[1:]:
            result = fn(result, x)
        return result
    return run


LAYERS.update({"add": _legacy(np.add), "multiply": _legacy(np.multiply), "max": _legacy(np.maximum),
               "min": _legacy(np.minimum)})


def _broadcastable(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Layer:
    def run(p: Any, xs: list[np.ndarray]) -> np.ndarray:
        if len(xs) == 1:  # comparisons take a scalar alpha for a single input
            return fn(xs[0], np.asarray(getattr(p, "alpha", 0.0), dtype=np.float32))
        return fn(xs[0], xs[1])
    return run


LAYERS.update({
    "addBroadcastable": _broadcastable(np.add), "subtractBroadcastable": _broadcastable(np.subtract),
    "multiplyBroadcastable": _broadcastable(np.multiply), "divideBroadcastable": _broadcastable(np.true_divide),
    "powBroadcastable": _broadcastable(np.power), "maxBroadcastable": _broadcastable(np.maximum),
    "minBroadcastable": _broadcastable(np.minimum), "floorDivBroadcastable": _broadcastable(
        lambda a, b: np.floor(np.true_divide(a, b))), "modBroadcastable": _broadcastable(np.mod),
    "equal": _broadcastable(np.equal), "notEqual": _broadcastable(np.not_equal),
    "lessThan": _broadcastable(np.less), "lessEqual": _broadcastable(np.less_equal),
    "greaterThan": _broadcastable(np.greater), "greaterEqual": _broadcastable(np.greater_equal),
    "logicalAnd": _broadcastable(np.logical_and), "logicalOr": _broadcastable(np.logical_or),
})


def _plain(fn: Callable[[np.ndarray], np.ndarray]) -> Layer:
    return lambda p, xs: fn(_f32(xs[0]))


LAYERS.update({
    "ceil": _plain(np.ceil), "floor": _plain(np.floor), "round": _plain(np.round), "sign": _plain(np.sign),
    "sin": _plain(np.sin), "cos": _plain(np.cos), "tanh": _plain(np.tanh), "exp2": _plain(np.exp2),
    "erf": _plain(mil_ops.erf), "copy": lambda p, xs: xs[0], "logicalNot": lambda p, xs: np.logical_not(xs[0]),
})


@layer("clip")
def _clip(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    return np.minimum(np.maximum(_f32(xs[0]), p.minVal), p.maxVal)


@layer("whereBroadcastable")
def _where(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    return np.where(xs[0].astype(bool), xs[1], xs[2])


# -- normalization -----------------------------------------------------------------------------------
@layer("batchnorm")
def _batchnorm(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    if p.computeMeanVar:
        raise CompileError("coreml emulator: batchnorm with computeMeanVar is not emulated")
    x = _f32(xs[0])
    c = int(p.channels)
    shape = [1] * x.ndim
    shape[-3] = c
    mean, var = weights(p.mean, (c,)).reshape(shape), weights(p.variance, (c,)).reshape(shape)
    gamma, beta = weights(p.gamma, (c,)).reshape(shape), weights(p.beta, (c,)).reshape(shape)
    return (x - mean) / np.sqrt(var + (p.epsilon or 1e-5)) * gamma + beta


@layer("lrn")
def _lrn(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    x = _f32(xs[0])
    moved = np.moveaxis(x, -3, 1) if x.ndim != 4 else x
    y = _call("local_response_norm", {"x": moved if moved.ndim >= 3 else moved, "size": np.array(int(p.localSize)),
                                      "alpha": np.array(p.alpha), "beta": np.array(p.beta),
                                      "k": np.array(p.k or 1.0)})
    return np.moveaxis(y, 1, -3) if x.ndim != 4 else y


@layer("softmaxND")
def _softmax_nd(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    return _call("softmax", {"x": _f32(xs[0]), "axis": np.array(int(p.axis))})


@layer("softmax")
def _softmax(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    return _call("softmax", {"x": _f32(xs[0]), "axis": np.array(-3)})


# -- linear algebra ----------------------------------------------------------------------------------
@layer("innerProduct")
def _inner_product(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    x = np.asarray(xs[0], dtype=np.float64)  # (products summed in float64: see mil_ops' precision)
    c_in, c_out = int(p.inputChannels), int(p.outputChannels)
    w = weights(p.weights, (c_out, c_in))
    bias = weights(p.bias, (c_out,)) if p.hasBias else np.zeros(c_out, np.float32)
    if x.ndim <= 3:
        return np.matmul(x, w.T) + bias
    if x.ndim == 4:
        return (np.matmul(x.reshape(x.shape[0], -1), w.T) + bias).reshape(x.shape[0], c_out, 1, 1)
    flat = x.reshape(x.shape[0] * x.shape[1], -1)
    return (np.matmul(flat, w.T) + bias).reshape(x.shape[0], x.shape[1], c_out, 1, 1)


@layer("embeddingND")
def _embedding_nd(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    """Rows of the [vocabSize, embeddingSize] table (stored transposed) at the indices of a [..., 1] input."""
    vocab, size = int(p.vocabSize), int(p.embeddingSize)
    table = weights(p.weights, (size, vocab)).T
    indices = np.asarray(xs[0]).astype(np.int64)[..., 0]
    if indices.size and (indices.min() < 0 or indices.max() >= vocab):
        raise CompileError("coreml emulator: embeddingND index out of range (Core ML's result is undefined)")
    out = table[indices]
    return out + weights(p.bias, (size,)) if p.hasBias else out


@layer("batchedMatmul")
def _batched_matmul(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    a = np.asarray(xs[0], dtype=np.float64)  # (products summed in float64: see mil_ops' precision)
    if p.transposeA and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if len(xs) == 1:
        # stored transposed: [second, first] (coremltools' builder writes W.T)
        w = weights(p.weights, (int(p.weightMatrixSecondDimension), int(p.weightMatrixFirstDimension))).T
        y = np.matmul(a, w)
        return y + weights(p.bias, (w.shape[1],)) if p.hasBias else y
    b = np.asarray(xs[1], dtype=np.float64)
    if p.transposeB and b.ndim >= 2:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


# -- reductions --------------------------------------------------------------------------------------
def _reduction(fn: Callable[..., np.ndarray]) -> Layer:
    def run(p: Any, xs: list[np.ndarray]) -> np.ndarray:
        x = xs[0]
        if np.issubdtype(x.dtype, np.floating):
            x = _f32(x)
        axis = None if p.reduceAll else tuple(_axis(int(a), x.ndim) for a in p.axes)
        return fn(x, axis=axis, keepdims=bool(p.keepDims))
    return run


LAYERS.update({"reduceSum": _reduction(np.sum), "reduceMean": _reduction(np.mean),
               "reduceMax": _reduction(np.max), "reduceMin": _reduction(np.min), "reduceProd": _reduction(np.prod),
               "reduceSumSquare": _reduction(lambda x, axis, keepdims: np.sum(x * x, axis=axis, keepdims=keepdims))})


@layer("argMax", "argMin")
def _arg(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    x = xs[0]
    axis = _axis(int(p.axis), x.ndim)
    result = (np.argmax if "Max" in type(p).__name__ else np.argmin)(x, axis=axis)
    if not p.removeDim:
        result = np.expand_dims(result, axis)
    return result.astype(np.int32)


# -- shapes and data movement ------------------------------------------------------------------------
@layer("reshapeStatic")
def _reshape_static(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    return xs[0].reshape([int(d) for d in p.targetShape])


@layer("flattenTo2D")
def _flatten_to_2d(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    x = xs[0]
    axis = _axis(int(p.axis), x.ndim)
    return x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)


@layer("transpose")
def _transpose(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    return np.transpose(xs[0], [int(a) for a in p.axes])


@layer("squeeze")
def _squeeze(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    x = xs[0]
    if p.squeezeAll:
        return np.squeeze(x)
    return np.squeeze(x, axis=tuple(_axis(int(a), x.ndim) for a in p.axes))


@layer("expandDims")
def _expand_dims(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    rank = xs[0].ndim + len(p.axes)
    return np.expand_dims(xs[0], tuple(_axis(int(a), rank) for a in p.axes))


@layer("concat")
def _concat(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(xs, axis=-5 if p.sequenceConcat else -3)


@layer("concatND")
def _concat_nd(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    axis = _axis(int(p.axis), xs[0].ndim)
    if p.interleave:  # slice i of every input in turn (inputs of one shape)
        if len({x.shape for x in xs}) != 1:
            raise CompileError("coreml emulator: interleaved concatND of inputs with different shapes")
        shape = list(xs[0].shape)
        shape[axis] *= len(xs)
        return np.stack(xs, axis=axis + 1).reshape(shape)
    return np.concatenate(xs, axis=axis)


@layer("splitND")
def _split_nd(p: Any, xs: list[np.ndarray]) -> list[np.ndarray]:
    x = xs[0]
    axis = _axis(int(p.axis), x.ndim)
    if len(p.splitSizes):
        return np.split(x, np.cumsum([int(s) for s in p.splitSizes])[:-1], axis=axis)
    return np.split(x, int(p.numSplits), axis=axis)


@layer("slice")
def _slice(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    x = xs[0]
    axis = {0: -3, 1: -2, 2: -1}[int(p.axis)]
    index = [slice(None)] * x.ndim
    index[axis] = slice(int(p.startIndex), int(p.endIndex), int(p.stride) or 1)  # numpy semantics
    return x[tuple(index)]


@layer("sliceStatic")
def _slice_static(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    x = xs[0]
    index: list[Any] = []
    for axis in range(x.ndim):
        if len(p.squeezeMasks) and p.squeezeMasks[axis]:
            index.append(int(p.beginIds[axis]))
            continue
        begin = None if p.beginMasks[axis] else int(p.beginIds[axis])
        end = None if p.endMasks[axis] else int(p.endIds[axis])
        index.append(slice(begin, end, int(p.strides[axis]) if len(p.strides) else 1))
    return x[tuple(index)]


@layer("gather")
def _gather(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    x, indices = xs
    axis = _axis(int(p.axis), x.ndim)
    indices = indices.astype(np.int64)
    if indices.size and (indices.min() < -x.shape[axis] or indices.max() >= x.shape[axis]):
        raise CompileError("coreml emulator: gather index out of bounds (undefined on the device)")
    return np.take(x, indices, axis=axis)


@layer("gatherND")
def _gather_nd(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    x, indices = xs[0], xs[1].astype(np.int64)
    return x[tuple(indices[..., i] for i in range(indices.shape[-1]))]


@layer("tile")
def _tile(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    reps = [int(r) for r in p.reps] if len(p.reps) else [int(r) for r in np.asarray(xs[1]).reshape(-1)]
    return np.tile(xs[0], reps)


@layer("loadConstantND")
def _load_constant_nd(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    return weights(p.data, tuple(int(d) for d in p.shape))


@layer("getShape")
def _get_shape(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    return np.array(xs[0].shape, dtype=np.float32)


@layer("padding")
def _padding(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    x = _f32(xs[0])
    pads = _border(p.paddingAmounts)
    width = [(0, 0)] * (x.ndim - 2) + [(pads[0], pads[1]), (pads[2], pads[3])]
    kind = p.WhichOneof("PaddingType")
    if kind == "constant":
        return np.pad(x, width, constant_values=p.constant.value)
    return np.pad(x, width, mode="reflect" if kind == "reflection" else "edge")


@layer("constantPad")
def _constant_pad(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    if p.padToGivenOutputSizeMode:
        raise CompileError("coreml emulator: constantPad to a given output size is not emulated")
    x = _f32(xs[0])
    amounts = [int(a) for a in p.padAmounts]
    n = len(amounts) // 2
    width = [(0, 0)] * (x.ndim - n) + [(amounts[2 * i], amounts[2 * i + 1]) for i in range(n)]
    return np.pad(x, width, constant_values=p.value)


@layer("reorganizeData")
def _reorganize(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    x = _f32(xs[0])
    kind = {0: "space_to_depth", 1: "depth_to_space", 2: "pixel_shuffle"}[int(p.mode)]
    key = "upscale_factor" if kind == "pixel_shuffle" else "block_size"
    return _call(kind, {"x": x, key: np.array(int(p.blockSize))})


@layer("upsample")
def _upsample(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    x = _f32(xs[0])
    factors = [float(f) for f in p.fractionalScalingFactor] or [float(f) for f in p.scalingFactor] or [1.0, 1.0]
    if int(p.mode) == 0:
        return _call("upsample_nearest_neighbor", {"x": x, "scale_factor_height": np.array(factors[0]),
                                                   "scale_factor_width": np.array(factors[1])})
    mode = {0: "DEFAULT", 1: "STRICT_ALIGN_CORNERS", 2: "UNALIGN_CORNERS"}[int(p.linearUpsampleMode)]
    out_h, out_w = int(math.floor(x.shape[-2] * factors[0])), int(math.floor(x.shape[-1] * factors[1]))
    return _call("resize_bilinear", {"x": x, "target_size_height": np.array(out_h),
                                     "target_size_width": np.array(out_w), "sampling_mode": mode})


@layer("resizeBilinear")
def _resize_bilinear(p: Any, xs: list[np.ndarray]) -> np.ndarray:
    x = _f32(xs[0])
    sizes = [int(s) for s in p.targetSize] or [1, 1]
    mode = {0: "STRICT_ALIGN_CORNERS", 1: "ALIGN_CORNERS", 2: "DEFAULT", 3: "OFFSET_CORNERS"}[
        int(p.mode.samplingMethod)]
    return _call("resize_bilinear", {"x": x, "target_size_height": np.array(sizes[0]),
                                     "target_size_width": np.array(sizes[1]), "sampling_mode": mode})
