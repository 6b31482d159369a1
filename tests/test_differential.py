"""Differential testing: random valid graphs built from the ops the backends claim (random shapes,
broadcasting, constants, branches that rejoin) are converted for each backend and verified against
onnxruntime on the original.

The default run tries a few examples per backend; ``tox -e differential`` (``MOBILE_EP_DIFF_EXAMPLES``)
runs thousands.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from mobile_ep import pipeline as api
from mobile_ep.contract.plugins import make_plugins

BACKENDS = [b for b in ("nnapi", "coreml") if b in make_plugins().backends()]
EXAMPLES = int(os.environ.get("MOBILE_EP_DIFF_EXAMPLES", "12"))
pytestmark = pytest.mark.skipif(not BACKENDS, reason="no built-in backend installed")

UNARY = ["Relu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "LeakyRelu", "Abs", "Neg", "Clip06", "ClipAny",
         "Softmax", "Exp", "Sqrt", "Reciprocal", "Erf", "Floor"]
BINARY = ["Add", "Sub", "Mul", "Max", "Min", "Sum3", "Mean"]
STEPS = ["unary", "binary", "binary_const", "conv", "pool", "concat", "bn", "gap", "expand", "tile", "split",
         "transpose_pair", "reshape_pair", "instancenorm", "matmul"]


class GraphBuilder:
    def __init__(self, rng: np.random.Generator, shape: tuple[int, ...]) -> None:
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.pool: list[tuple[str, tuple[int, ...]]] = [("x", shape)]
        self.count = 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{hint}{self.count}"

    def const(self, array: np.ndarray, hint: str = "c") -> str:
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def add(self, op: str, inputs: list[str], shape: tuple[int, ...], **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=self.name(op + "_"), **attrs))
        self.pool.append((out, shape))
        return out

    def pick(self, index: int, rank: int | None = None) -> tuple[str, tuple[int, ...]]:
        candidates = [v for v in self.pool if rank is None or len(v[1]) == rank]
        return candidates[index % len(candidates)] if candidates else self.pool[index % len(self.pool)]


def _small(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def apply(b: GraphBuilder, step: str, a: int, c: int, choice: int) -> None:
    rng = b.rng
    x, shape = b.pick(a, 4)
    if len(shape) != 4 and step not in ("unary", "binary", "binary_const"):
        x, shape = b.pick(a)
        step = "unary"
    n, ch, h, w = shape if len(shape) == 4 else (None, None, None, None)
    if step == "unary":
        op = UNARY[choice % len(UNARY)]
        if op == "Clip06":
            b.add("Clip", [x, b.const(np.float32(0)), b.const(np.float32(6))], shape)
        elif op == "ClipAny":
            b.add("Clip", [x, b.const(np.float32(-0.7)), b.const(np.float32(1.3))], shape)
        elif op == "Softmax":
            b.add("Softmax", [x], shape, axis=1)
        elif op in ("Sqrt", "Reciprocal"):
            positive = b.add("Add", [b.add("Abs", [x], shape), b.const(np.float32(0.5))], shape)
            b.add(op, [positive], shape)
        elif op == "Exp":
            b.add("Exp", [b.add("Tanh", [x], shape)], shape)
        elif op == "LeakyRelu":
            b.add(op, [x], shape, alpha=0.1)
        else:
            b.add(op, [x], shape)
    elif step in ("binary", "binary_const"):
        op = BINARY[choice % len(BINARY)]
        other, other_shape = b.pick(c)
        if step == "binary_const" or other_shape != shape:
            const_shape = [(ch if len(shape) == 4 else shape[1])] + [1] * (len(shape) - 2) if choice % 2 else [1]
            other = b.const(_small(rng, const_shape) + 0.1)
        if op == "Sum3":
            b.add("Sum", [x, other, x], shape)
        else:
            b.add(op, [x, other], shape)
    elif step == "conv":
        cout = 1 + choice % 8
        k = (1, 3)[choice % 2]
        group = ch if (choice % 3 == 0 and cout == ch) else 1
        weight = b.const(_small(rng, (cout, ch // group, k, k), (2 / (ch // group * k * k)) ** 0.5), "w")
        bias = b.const(_small(rng, (cout,), 0.1), "bias")
        stride = 2 if (choice % 5 == 0 and h > 2 and w > 2) else 1
        oh, ow = (h + 2 * (k // 2) - k) // stride + 1, (w + 2 * (k // 2) - k) // stride + 1
        b.add("Conv", [x, weight, bias], (n, cout, oh, ow), pads=[k // 2] * 4, strides=[stride, stride], group=group)
    elif step == "pool":
        if h < 2 or w < 2:
            b.add("Relu", [x], shape)
            return
        op = ("MaxPool", "AveragePool")[choice % 2]
        b.add(op, [x], (n, ch, h // 2, w // 2), kernel_shape=[2, 2], strides=[2, 2])
    elif step == "concat":
        other, other_shape = b.pick(c, 4)
        if other_shape[0] == n and other_shape[2:] == (h, w):
            b.add("Concat", [x, other], (n, ch + other_shape[1], h, w), axis=1)
        else:
            b.add("Concat", [x, x], (n, 2 * ch, h, w), axis=1)
    elif step == "bn":
        args = [b.const(_small(rng, (ch,)) + 1), b.const(_small(rng, (ch,), 0.1)), b.const(_small(rng, (ch,), 0.1)),
                b.const(np.abs(_small(rng, (ch,))) + 0.5)]
        b.add("BatchNormalization", [x, *args], shape)
    elif step == "gap":
        b.add("GlobalAveragePool", [x], (n, ch, 1, 1))
    elif step == "expand":
        if h == 1 and w == 1:
            b.add("Expand", [x, b.const(np.array([n, ch, 3, 2], np.int64))], (n, ch, 3, 2))
        else:
            b.add("Expand", [x, b.const(np.array([1, 1, h, w], np.int64))], shape)
    elif step == "tile":
        b.add("Tile", [x, b.const(np.array([1, 1, 1 + choice % 2, 1], np.int64))], (n, ch, h * (1 + choice % 2), w))
    elif step == "split":
        if ch % 2 == 0:
            first, second = b.name("split"), b.name("split")
            b.nodes.append(helper.make_node("Split", [x, b.const(np.array([ch // 2, ch // 2], np.int64))],
                                            [first, second], axis=1, name=b.name("Split_")))
            b.pool += [(first, (n, ch // 2, h, w)), (second, (n, ch // 2, h, w))]
        else:
            b.add("Relu", [x], shape)
    elif step == "transpose_pair":
        t = b.add("Transpose", [x], (n, h, w, ch), perm=[0, 2, 3, 1])
        b.add("Transpose", [b.add("Relu", [t], (n, h, w, ch))], shape, perm=[0, 3, 1, 2])
    elif step == "reshape_pair":
        flat = b.add("Reshape", [x, b.const(np.array([n, ch * h * w], np.int64))], (n, ch * h * w))
        b.add("Reshape", [b.add("Sigmoid", [flat], (n, ch * h * w)), b.const(np.array(shape, np.int64))], shape)
    elif step == "instancenorm":
        b.add("InstanceNormalization", [x, b.const(_small(rng, (ch,)) + 1), b.const(_small(rng, (ch,), 0.1))], shape,
              epsilon=1e-3)
    elif step == "matmul":
        kdim = 1 + choice % 6
        b.add("MatMul", [x, b.const(_small(rng, (w, kdim), 0.5))], (n, ch, h, kdim))


@st.composite
def graphs(draw):
    seed = draw(st.integers(0, 2**31 - 1))
    shape = (1, draw(st.integers(1, 6)), draw(st.integers(2, 9)), draw(st.integers(2, 9)))
    steps = draw(st.lists(st.tuples(st.sampled_from(STEPS), st.integers(0, 50), st.integers(0, 50),
                                    st.integers(0, 50)), min_size=1, max_size=10))
    builder = GraphBuilder(np.random.default_rng(seed), shape)
    for step, a, c, choice in steps:
        apply(builder, step, a, c, choice)
    produced = [v for v in builder.pool[1:]]
    used = {i for node in builder.nodes for i in node.input}
    # Outputs: every value nobody consumes (branches end somewhere), the last one always.
    outputs = [v for v in produced if v[0] not in used] or [produced[-1]]
    graph = helper.make_graph(
        builder.nodes, "random", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(s)) for name, s in outputs],
        initializer=builder.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model, steps


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_graphs_convert_and_verify(backend, tmp_path_factory):
    counter = {"n": 0}

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 50,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(graphs())
    def run(example):
        model, steps = example
        work = tmp_path_factory.mktemp("diff")
        path = work / "random.onnx"
        onnx.save(model, path)
        report = api.convert(path, backend, work / "out")  # raises VerificationError on a mismatch
        assert all(v.ok for v in report.verification), steps
        counter["n"] += 1

    run()
    assert counter["n"] >= min(EXAMPLES, 5)
