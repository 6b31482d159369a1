"""Generated graphs of any size for the scale benchmark (``bench/scale.py``) and the scale tests.

Three families, built directly as ``onnx_ir`` models with every value's shape and type set (so the
partitioner can run on them without shape inference).  As exporters write them, every block has its own
small weights and scalar constants are shared: a 1M-node model has 200k-420k initializers and 50-200 MB
of weights.

- ``chain``: a long residual chain of Conv 1x1 / Relu / Add / Mul / Sigmoid with an op no backend takes
  (``Sign``) every 10 nodes, so the partitioner sees many partitions and many waves;
- ``branches``: inception-like blocks, a fan-out into parallel branches (one of them with a ``Sign``)
  joined by a Concat and a Conv, so unsupported units are deferred across waves;
- ``transformer``: attention blocks (projections, scores, Softmax, LayerNorm and GELU written out in
  primitives, as exporters do).

``make(kind, nodes)`` returns a model with at least *nodes* nodes (whole blocks); ``save`` writes it.
``qdq_chain`` (not one of the benchmark's families) is a quantized chain in QDQ form, for the scale tests
of the partitioner's QDQ node units.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

__all__ = ["KINDS", "make", "save", "qdq_chain"]

FLOAT = ir.DataType.FLOAT


class _Builder:
    def __init__(self) -> None:
        self.nodes: list[ir.Node] = []
        self.initializers: dict[str, ir.Value] = {}
        self._count = 0

    def const(self, name: str, array: np.ndarray) -> ir.Value:
        if name not in self.initializers:
            value = ir.Value(name=name, shape=ir.Shape(array.shape), type=ir.TensorType(ir.DataType.from_numpy(
                array.dtype)), const_value=ir.tensor(array, name=name))
            self.initializers[name] = value
        return self.initializers[name]

    def op(self, op_type: str, inputs: list[ir.Value], shape: tuple[int, ...], dtype: ir.DataType = FLOAT,
           **attributes) -> ir.Value:
        self._count += 1
        name = f"n{self._count}"
        out = ir.Value(name=f"{name}_{op_type}", shape=ir.Shape(shape), type=ir.TensorType(dtype))
        attrs = [_attr(k, v) for k, v in attributes.items()]
        self.nodes.append(ir.Node("", op_type, inputs, attrs, outputs=[out], name=name))
        return out

    def model(self, x: ir.Value, y: ir.Value, name: str) -> ir.Model:
        graph = ir.Graph([x], [y], nodes=self.nodes, initializers=list(self.initializers.values()),
                         opset_imports={"": 17}, name=name)
        return ir.Model(graph, ir_version=8, producer_name="mobile-ep bench")


def _attr(name: str, value: int | float | list[int]) -> ir.Attr:
    """An attribute, built directly (``ir.convenience.convert_attribute`` is slow on a million nodes)."""
    if isinstance(value, list):
        return ir.AttrInt64s(name, value)
    if isinstance(value, float):
        return ir.AttrFloat32(name, value)
    return ir.AttrInt64(name, value)


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def chain(nodes: int) -> ir.Model:
    """Blocks of 10 nodes: Conv-Relu-Conv-Add-Mul-Sigmoid-Mul-Add-Relu-Sign on a [1, 8, 4, 4] tensor."""
    c, hw = 8, 4
    shape = (1, c, hw, hw)
    b = _Builder()
    rng = _rng()
    bias = b.const("bias", np.zeros(c, np.float32))
    half = b.const("half", np.array(0.5, np.float32))
    x = ir.Value(name="x", shape=ir.Shape(shape), type=ir.TensorType(FLOAT))
    h = x
    for i in range(max(1, -(-nodes // 10))):
        w1, w2 = (b.const(f"w{i}_{j}", (rng.standard_normal((c, c, 1, 1)) * 0.3).astype(np.float32)) for j in (1, 2))
        a = b.op("Conv", [h, w1, bias], shape, kernel_shape=[1, 1])
        a = b.op("Relu", [a], shape)
        a = b.op("Conv", [a, w2, bias], shape, kernel_shape=[1, 1])
        a = b.op("Add", [a, h], shape)
        g = b.op("Mul", [a, half], shape)
        g = b.op("Sigmoid", [g], shape)
        a = b.op("Mul", [a, g], shape)
        a = b.op("Add", [a, h], shape)
        a = b.op("Relu", [a], shape)
        h = b.op("Sign", [a], shape)  # no backend takes Sign: a partition boundary every block
    return b.model(x, h, "chain")


def branches(nodes: int) -> ir.Model:
    """Blocks of 12 nodes: four branches (Conv-Relu, Conv-Relu-Conv, Sign-Relu, MaxPool-Conv-Relu), Concat, Conv."""
    c, hw = 8, 4
    shape = (1, c, hw, hw)
    b = _Builder()
    rng = _rng(1)
    bias = b.const("bias", np.zeros(c, np.float32))
    x = ir.Value(name="x", shape=ir.Shape(shape), type=ir.TensorType(FLOAT))
    h = x
    for i in range(max(1, -(-nodes // 12))):
        w = [b.const(f"w{i}_{j}", (rng.standard_normal((c, c, 1, 1)) * 0.3).astype(np.float32)) for j in range(4)]
        w4 = b.const(f"w{i}_cat", (rng.standard_normal((c, 4 * c, 1, 1)) * 0.1).astype(np.float32))
        b1 = b.op("Relu", [b.op("Conv", [h, w[0], bias], shape, kernel_shape=[1, 1])], shape)
        b2 = b.op("Conv", [h, w[1], bias], shape, kernel_shape=[1, 1])
        b2 = b.op("Conv", [b.op("Relu", [b2], shape), w[2], bias], shape, kernel_shape=[1, 1])
        b3 = b.op("Relu", [b.op("Sign", [h], shape)], shape)
        b4 = b.op("MaxPool", [h], shape, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        b4 = b.op("Relu", [b.op("Conv", [b4, w[3], bias], shape, kernel_shape=[1, 1])], shape)
        cat = b.op("Concat", [b1, b2, b3, b4], (1, 4 * c, hw, hw), axis=1)
        h = b.op("Conv", [cat, w4, bias], shape, kernel_shape=[1, 1])
    return b.model(x, h, "branches")


def transformer(nodes: int) -> ir.Model:
    """Blocks of 25 nodes: attention with Q/K/V projections, Softmax, a LayerNorm and a GELU MLP in primitives."""
    seq, d = 8, 8
    shape = (seq, d)
    b = _Builder()
    rng = _rng(2)

    def weight(name: str, rows: int, cols: int) -> ir.Value:
        return b.const(name, (rng.standard_normal((rows, cols)) / np.sqrt(rows)).astype(np.float32))

    scalars = {name: b.const(name, np.array(v, np.float32)) for name, v in
               (("scale", 1 / np.sqrt(d)), ("two", 2.0), ("eps", 1e-5), ("sqrt2", np.sqrt(2.0)), ("one", 1.0),
                ("halfc", 0.5))}
    x = ir.Value(name="x", shape=ir.Shape(shape), type=ir.TensorType(FLOAT))
    h = x
    col = (seq, 1)
    for i in range(max(1, -(-nodes // 25))):
        wq, wk, wv = (weight(f"w{i}_{n}", d, d) for n in "qkv")
        w1, w2 = weight(f"w{i}_up", d, 2 * d), weight(f"w{i}_down", 2 * d, d)
        gamma, beta = b.const(f"w{i}_gamma", np.ones(d, np.float32)), b.const(f"w{i}_beta", np.zeros(d, np.float32))
        q, k, v = (b.op("MatMul", [h, w], shape) for w in (wq, wk, wv))
        kt = b.op("Transpose", [k], (d, seq), perm=[1, 0])
        s = b.op("Mul", [b.op("MatMul", [q, kt], (seq, seq)), scalars["scale"]], (seq, seq))
        p = b.op("Softmax", [s], (seq, seq), axis=-1)
        r = b.op("Add", [b.op("MatMul", [p, v], shape), h], shape)
        mu = b.op("ReduceMean", [r], col, axes=[-1])
        cen = b.op("Sub", [r, mu], shape)
        var = b.op("ReduceMean", [b.op("Pow", [cen, scalars["two"]], shape)], col, axes=[-1])
        sd = b.op("Sqrt", [b.op("Add", [var, scalars["eps"]], col)], col)
        ln = b.op("Add", [b.op("Mul", [b.op("Div", [cen, sd], shape), gamma], shape), beta], shape)
        u = b.op("MatMul", [ln, w1], (seq, 2 * d))
        e = b.op("Add", [b.op("Erf", [b.op("Div", [u, scalars["sqrt2"]], (seq, 2 * d))], (seq, 2 * d)),
                         scalars["one"]], (seq, 2 * d))
        g = b.op("Mul", [b.op("Mul", [u, e], (seq, 2 * d)), scalars["halfc"]], (seq, 2 * d))
        h = b.op("Add", [b.op("MatMul", [g, w2], shape), ln], shape)
    return b.model(x, h, "transformer")


def qdq_chain(nodes: int) -> ir.Model:
    """Blocks of 7 nodes on uint8 data: DequantizeLinear (input and int8 weight) -> Conv -> QuantizeLinear,
    then DequantizeLinear -> Sign -> QuantizeLinear (NNAPI takes the Conv unit whole, not the Sign one)."""
    c, hw = 8, 4
    shape = (1, c, hw, hw)
    b = _Builder()
    rng = _rng(3)
    scale, zero = b.const("s", np.array(0.05, np.float32)), b.const("z", np.array(128, np.uint8))
    w_scale, w_zero = b.const("ws", np.array(0.01, np.float32)), b.const("wz", np.array(0, np.int8))
    x = ir.Value(name="xq", shape=ir.Shape(shape), type=ir.TensorType(ir.DataType.UINT8))
    h = x
    for i in range(max(1, -(-nodes // 7))):
        wq = b.const(f"w{i}", rng.integers(-100, 100, (c, c, 1, 1)).astype(np.int8))
        w = b.op("DequantizeLinear", [wq, w_scale, w_zero], (c, c, 1, 1))
        a = b.op("Conv", [b.op("DequantizeLinear", [h, scale, zero], shape), w], shape, kernel_shape=[1, 1])
        a = b.op("DequantizeLinear", [b.op("QuantizeLinear", [a, scale, zero], shape, ir.DataType.UINT8), scale, zero],
                 shape)
        h = b.op("QuantizeLinear", [b.op("Sign", [a], shape), scale, zero], shape, ir.DataType.UINT8)
    return b.model(x, h, "qdq_chain")


KINDS: dict[str, Callable[[int], ir.Model]] = {"chain": chain, "branches": branches, "transformer": transformer}


def make(kind: str, nodes: int) -> ir.Model:
    """A *kind* graph of at least *nodes* nodes (whole blocks)."""
    return KINDS[kind](nodes)


def save(model: ir.Model, path: str | pathlib.Path) -> pathlib.Path:
    """Write the model (weights are tiny: always embedded)."""
    path = pathlib.Path(path)
    ir.save(model, path)
    return path
