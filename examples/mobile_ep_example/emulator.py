"""A numpy interpreter of ENPU programs: the host reference of what the NPU computes.

It reads only the serialized program, never the ONNX graph, so what it verifies is the payload an app
ships.  Arithmetic is float32, like the NPU's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .enpu import FormatError, Op, Program

__all__ = ["EmulatorError", "run"]


class EmulatorError(RuntimeError):
    """The program cannot run on these inputs."""


def run(program: Program, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Execute *program* on *inputs* (in the program's input order); returns its outputs in order."""
    if len(inputs) != len(program.inputs):
        raise EmulatorError(f"the program takes {len(program.inputs)} inputs, got {len(inputs)}")
    values: list[np.ndarray | None] = [t.data for t in program.tensors]
    for index, array in zip(program.inputs, inputs, strict=True):
        array = np.asarray(array)
        expected = program.tensors[index].shape
        if array.dtype != np.float32 or array.shape != expected:
            raise EmulatorError(f"input tensor {index}: expected float32{list(expected)}, got "
                                f"{array.dtype}{list(array.shape)}")
        values[index] = array
    for position, operation in enumerate(program.operations):
        args = []
        for index in operation.inputs:
            value = values[index]
            if value is None:
                raise FormatError(f"op {position} ({operation.op.name}) reads tensor {index} before it is written")
            args.append(value)
        result = _KERNELS[operation.op](args, operation.params, program.tensors[operation.outputs[0]].shape)
        expected = program.tensors[operation.outputs[0]].shape
        if result.shape != expected:
            raise EmulatorError(f"op {position} ({operation.op.name}) produced {list(result.shape)}, the program "
                                f"declares {list(expected)}")
        values[operation.outputs[0]] = result.astype(np.float32, copy=False)
    outputs = []
    for index in program.outputs:
        if values[index] is None:
            raise FormatError(f"output tensor {index} is never written")
        outputs.append(values[index])
    return outputs  # type: ignore[return-value]


def _relu(args: list[np.ndarray], params: Sequence[int], shape: tuple[int, ...]) -> np.ndarray:
    return np.maximum(args[0], np.float32(0))


def _add(args: list[np.ndarray], params: Sequence[int], shape: tuple[int, ...]) -> np.ndarray:
    return np.add(args[0], args[1], dtype=np.float32)


def _mul(args: list[np.ndarray], params: Sequence[int], shape: tuple[int, ...]) -> np.ndarray:
    return np.multiply(args[0], args[1], dtype=np.float32)


def _windows(x: np.ndarray, out_hw: tuple[int, int], kernel: tuple[int, int], stride: tuple[int, int],
             pads: tuple[int, int, int, int], dilation: tuple[int, int], fill: float) -> np.ndarray:
    """(N, C, KH, KW, OH, OW): every kernel tap for every output position, padded with *fill*."""
    n, c, h, w = x.shape
    oh, ow = out_hw
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    top, left, bottom, right = pads
    # Room for the last window (ceil-mode pooling may reach past the explicit padding).
    bottom += max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - (h + top + bottom))
    right += max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - (w + left + right))
    padded = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=fill)
    taps = np.empty((n, c, kh, kw, oh, ow), dtype=np.float32)
    for i in range(kh):
        for j in range(kw):
            taps[:, :, i, j] = padded[:, :, i * dh: i * dh + (oh - 1) * sh + 1: sh,
                                      j * dw: j * dw + (ow - 1) * sw + 1: sw]
    return taps


def _conv2d(args: list[np.ndarray], params: Sequence[int], shape: tuple[int, ...]) -> np.ndarray:
    x, w = args[0], args[1]
    sh, sw, top, left, bottom, right, dh, dw, group = params
    n, c = x.shape[:2]
    m, cg, kh, kw = w.shape
    if c != cg * group or m % group:
        raise EmulatorError(f"CONV2D: {c} input channels, weights {list(w.shape)}, group {group} do not match")
    taps = _windows(x, (shape[2], shape[3]), (kh, kw), (sh, sw), (top, left, bottom, right), (dh, dw), 0.0)
    columns = taps.reshape(n, group, cg * kh * kw, shape[2] * shape[3])
    weights = w.reshape(1, group, m // group, cg * kh * kw)
    out = np.matmul(weights, columns).reshape(n, m, shape[2], shape[3])
    if len(args) == 3:
        out += args[2].reshape(1, m, 1, 1)
    return out


def _maxpool2d(args: list[np.ndarray], params: Sequence[int], shape: tuple[int, ...]) -> np.ndarray:
    kh, kw, sh, sw, top, left, bottom, right, dh, dw = params
    taps = _windows(args[0], (shape[2], shape[3]), (kh, kw), (sh, sw), (top, left, bottom, right), (dh, dw),
                    -np.inf)
    return taps.max(axis=(2, 3))


_KERNELS = {Op.RELU: _relu, Op.ADD: _add, Op.MUL: _mul, Op.CONV2D: _conv2d, Op.MAXPOOL2D: _maxpool2d}
