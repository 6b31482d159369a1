"""Float image classifiers built with onnx.helper at random weights, and their QDQ versions.

The architectures follow torchvision's mobilenet_v2, mobilenet_v3_large, resnet18 and efficientnet_b0 as
``torch.onnx.export`` writes them (BatchNorm folded into the convolutions, ReLU6 as ``Clip(0, 6)``,
HardSwish/HardSigmoid, SiLU as ``x * Sigmoid(x)``, squeeze-excitation as GlobalAveragePool → 1×1 convolutions
→ Mul, Flatten + Gemm heads), with fewer blocks and channels and a small input so tests stay fast.
:func:`quantize` makes the QDQ model with ``onnxruntime.quantization.quantize_static`` (uint8 activations,
int8 weights, per tensor unless asked), calibrated on random images.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 10
OPSET = 13
INPUT = "input"
SIZE = 32  # input height and width


class _Net:
    def __init__(self, name: str, seed: int) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0
        self.classes = 10

    def _name(self, op: str) -> str:
        self.count += 1
        return f"{op.lower()}_{self.count}"

    def const(self, array: np.ndarray, hint: str = "c") -> str:
        name = f"{hint}_{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        name = self._name(op_type)
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attrs))
        return name

    def conv(self, x: str, cin: int, cout: int, k: int = 1, stride: int = 1, group: int = 1) -> str:
        fan_in = cin // group * k * k
        w = (self.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        b = (self.rng.standard_normal(cout) * 0.1).astype(np.float32)
        pad = k // 2
        return self.op("Conv", [x, self.const(w, "w"), self.const(b, "b")], kernel_shape=[k, k],
                       strides=[stride, stride], pads=[pad] * 4, group=group)

    def relu6(self, x: str) -> str:
        return self.op("Clip", [x, self.const(np.float32(0), "lo"), self.const(np.float32(6), "hi")])

    def hswish(self, x: str) -> str:
        return self.op("HardSwish", [x]) if OPSET >= 14 else self.op("Mul", [x, self.hsigmoid(x)])

    def hsigmoid(self, x: str) -> str:
        return self.op("HardSigmoid", [x], alpha=1.0 / 6, beta=0.5)

    def silu(self, x: str) -> str:
        return self.op("Mul", [x, self.op("Sigmoid", [x])])

    def squeeze_excite(self, x: str, c: int, squeeze: int, act: str, gate: str) -> str:
        s = self.op("GlobalAveragePool", [x])
        s = self.conv(s, c, squeeze)
        s = self.op("Relu", [s]) if act == "relu" else self.silu(s)
        s = self.conv(s, squeeze, c)
        s = self.hsigmoid(s) if gate == "hsigmoid" else self.op("Sigmoid", [s])
        return self.op("Mul", [x, s])

    def head(self, x: str, c: int, classes: int = 10) -> str:
        x = self.op("GlobalAveragePool", [x])
        x = self.op("Flatten", [x], axis=1)
        w = (self.rng.standard_normal((classes, c)) / np.sqrt(c)).astype(np.float32)
        b = (self.rng.standard_normal(classes) * 0.1).astype(np.float32)
        return self.op("Gemm", [x, self.const(w, "fc_w"), self.const(b, "fc_b")], transB=1)

    def model(self, output: str, channels: int = 3) -> onnx.ModelProto:
        self.nodes[-1].output[0] = "output"
        for n in self.nodes:  # (the last node's output was renamed)
            for i, name in enumerate(n.input):
                if name == output:
                    n.input[i] = "output"
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, [1, channels, SIZE, SIZE])],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, self.classes])],
            initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        onnx.checker.check_model(model)
        return model


def mobilenet_v2(seed: int = 0) -> onnx.ModelProto:
    """Inverted residual blocks (1×1 expand + ReLU6, 3×3 depthwise + ReLU6, 1×1 project, residual Add)."""
    n = _Net("mobilenet_v2", seed)
    x = n.relu6(n.conv(INPUT, 3, 16, 3, stride=2))
    c = 16
    for cout, stride, expand in ((16, 1, 1), (24, 2, 6), (24, 1, 6), (32, 2, 6), (32, 1, 6), (64, 1, 6)):
        hidden = c * expand
        y = x
        if expand != 1:
            y = n.relu6(n.conv(y, c, hidden))
        y = n.relu6(n.conv(y, hidden, hidden, 3, stride=stride, group=hidden))
        y = n.conv(y, hidden, cout)
        x = n.op("Add", [x, y]) if stride == 1 and c == cout else y
        c = cout
    x = n.relu6(n.conv(x, c, 128))
    return n.model(n.head(x, 128))


def mobilenet_v3_large(seed: int = 0) -> onnx.ModelProto:
    """Inverted residuals with HardSwish and squeeze-excitation (HardSigmoid gate), as in mobilenet_v3_large."""
    n = _Net("mobilenet_v3_large", seed)
    x = n.hswish(n.conv(INPUT, 3, 16, 3, stride=2))
    c = 16
    blocks = ((3, 16, 16, False, "relu", 1), (3, 64, 24, False, "relu", 2), (5, 72, 40, True, "relu", 2),
              (3, 120, 40, True, "relu", 1), (3, 240, 80, False, "hswish", 2), (3, 200, 80, True, "hswish", 1))
    for k, hidden, cout, se, act, stride in blocks:
        activate = (lambda v: n.op("Relu", [v])) if act == "relu" else n.hswish
        y = x
        if hidden != c:
            y = activate(n.conv(y, c, hidden))
        y = activate(n.conv(y, hidden, hidden, k, stride=stride, group=hidden))
        if se:
            y = n.squeeze_excite(y, hidden, max(8, hidden // 4), "relu", "hsigmoid")
        y = n.conv(y, hidden, cout)
        x = n.op("Add", [x, y]) if stride == 1 and c == cout else y
        c = cout
    x = n.hswish(n.conv(x, c, 240))
    return n.model(n.head(x, 240))


def resnet18(seed: int = 0) -> onnx.ModelProto:
    """Stem (7×7/2 Conv, ReLU, MaxPool), four stages of two basic blocks, GlobalAveragePool, Flatten, Gemm."""
    n = _Net("resnet18", seed)
    x = n.op("Relu", [n.conv(INPUT, 3, 16, 7, stride=2)])
    x = n.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 16
    for cout, stride in ((16, 1), (32, 2), (64, 2), (64, 2)):
        for block in range(2):
            s = stride if block == 0 else 1
            y = n.op("Relu", [n.conv(x, c, cout, 3, stride=s)])
            y = n.conv(y, cout, cout, 3)
            shortcut = n.conv(x, c, cout, 1, stride=s) if (s != 1 or c != cout) else x
            x = n.op("Relu", [n.op("Add", [y, shortcut])])
            c = cout
    return n.model(n.head(x, c))


def efficientnet_b0(seed: int = 0) -> onnx.ModelProto:
    """MBConv blocks with SiLU (x * Sigmoid(x)) and squeeze-excitation (Sigmoid gate), as in efficientnet_b0."""
    n = _Net("efficientnet_b0", seed)
    x = n.silu(n.conv(INPUT, 3, 16, 3, stride=2))
    c = 16
    for k, expand, cout, stride in ((3, 1, 16, 1), (3, 6, 24, 2), (5, 6, 24, 1), (3, 6, 40, 2), (5, 6, 40, 1)):
        hidden = c * expand
        y = x
        if expand != 1:
            y = n.silu(n.conv(y, c, hidden))
        y = n.silu(n.conv(y, hidden, hidden, k, stride=stride, group=hidden))
        y = n.squeeze_excite(y, hidden, max(4, c // 4), "silu", "sigmoid")
        y = n.conv(y, hidden, cout)
        x = n.op("Add", [x, y]) if stride == 1 and c == cout else y
        c = cout
    x = n.silu(n.conv(x, c, 160))
    return n.model(n.head(x, 160))


def googlenet(seed: int = 0) -> onnx.ModelProto:
    """torchvision's GoogLeNet as exported at random weights: BatchNorm folded into convolutions whose biases are
    all zero, one zero tensor per channel count shared by the convolutions through Identity nodes;
    MaxPools with ceil_mode=1, inception blocks whose fourth branch pools (a block after a MaxPool pools a
    MaxPool's output)."""
    n = _Net("googlenet", seed)
    zero_biases: dict[int, str] = {}

    def conv(x: str, cin: int, cout: int, k: int = 1, stride: int = 1) -> str:
        w = (n.rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        if cout not in zero_biases:
            zero_biases[cout] = bias = n.const(np.zeros(cout, np.float32), "zero_bias")
        else:  # (the TorchScript exporter's deduplicated initializer: an Identity of the first)
            bias = n.op("Identity", [zero_biases[cout]])
        y = n.op("Conv", [x, n.const(w, "w"), bias], kernel_shape=[k, k], strides=[stride, stride],
                 pads=[k // 2] * 4)
        return n.op("Relu", [y])

    def pool(x: str, stride: int = 2, pad: int = 0) -> str:
        return n.op("MaxPool", [x], kernel_shape=[3, 3], strides=[stride, stride], pads=[pad] * 4, ceil_mode=1)

    def inception(x: str, cin: int, c: int) -> str:
        branches = [conv(x, cin, c), conv(conv(x, cin, c), c, c, 3), conv(conv(x, cin, c // 2), c // 2, c, 3),
                    conv(pool(x, 1, 1), cin, c)]
        return n.op("Concat", branches, axis=1)

    x = pool(conv(INPUT, 3, 8, 7, 2))
    x = pool(conv(conv(x, 8, 8), 8, 16, 3))
    x = pool(inception(x, 16, 8))
    x = inception(x, 32, 8)
    return n.model(n.head(x, 32))


ARCHITECTURES: dict[str, Callable[[int], onnx.ModelProto]] = {
    "mobilenet_v2": mobilenet_v2,
    "mobilenet_v3_large": mobilenet_v3_large,
    "resnet18": resnet18,
    "efficientnet_b0": efficientnet_b0,
}


def images(count: int, seed: int = 1) -> list[np.ndarray]:
    """*count* random input images (normalised like ImageNet inputs)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, 3, SIZE, SIZE)).astype(np.float32) for _ in range(count)]


def quantize(float_path: pathlib.Path, out_path: pathlib.Path, *, per_channel: bool = False,
             samples: int = 8) -> pathlib.Path:
    """The QDQ model of *float_path* by ``onnxruntime.quantization.quantize_static`` (U8 activations, S8 weights)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class _Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._feeds = iter([{INPUT: image} for image in images(samples)])

        def get_next(self):
            return next(self._feeds, None)

    quantize_static(str(float_path), str(out_path), _Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=per_channel)
    model = onnx.load(str(out_path))
    if model.ir_version > IR_VERSION:  # onnxruntime reads IR 10; keep every written model loadable
        model.ir_version = IR_VERSION
        onnx.save(model, str(out_path))
    return out_path


def write(name: str, folder: pathlib.Path, *, quantized: bool = True, per_channel: bool = False) -> pathlib.Path:
    """Write architecture *name* (float) into *folder* and, with *quantized*, return its QDQ version's path."""
    folder.mkdir(parents=True, exist_ok=True)
    float_path = folder / f"{name}.onnx"
    onnx.save(ARCHITECTURES[name](0), str(float_path))
    if not quantized:
        return float_path
    suffix = "_pc" if per_channel else ""
    return quantize(float_path, folder / f"{name}{suffix}.qdq.onnx", per_channel=per_channel)


def requantization_ties(seed: int = 1) -> onnx.ModelProto:
    """A QDQ model (input [1,16,8,8]) on which onnxruntime's integer kernels and the QDQ graph's float
    arithmetic part by several output steps: a per-channel 1×1 QDQ Conv whose scales (input 0.1, weight
    0.3, output 0.06) put many requantized values next to a rounding tie, which QLinearConv's
    requantization and the float QuantizeLinear round on different sides of, then a 1×1 Conv that sums 16
    such channels (weights all 1) into an output of scale 0.03: 4 output steps at onnxruntime's default
    level with mobile-ep's verification inputs (seed 0), 0 with its optimizations disabled."""
    rng = np.random.default_rng(seed)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def init(name: str, array) -> str:
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def qdq(x: str, scale: float, tag: str) -> str:
        s, z = init(f"s_{tag}", np.float32(scale)), init(f"z_{tag}", np.uint8(128))
        nodes.append(helper.make_node("QuantizeLinear", [x, s, z], [f"q_{tag}"], name=f"q_{tag}"))
        nodes.append(helper.make_node("DequantizeLinear", [f"q_{tag}", s, z], [f"d_{tag}"], name=f"dq_{tag}"))
        return f"d_{tag}"

    def weight(w: np.ndarray, scale: float, tag: str) -> str:
        args = [init(f"w_{tag}", w.astype(np.int8)), init(f"ws_{tag}", np.full(len(w), scale, np.float32)),
                init(f"wz_{tag}", np.zeros(len(w), np.int8))]
        nodes.append(helper.make_node("DequantizeLinear", args, [f"dw_{tag}"], name=f"dqw_{tag}", axis=0))
        return f"dw_{tag}"

    x = qdq(INPUT, 0.1, "in")
    nodes.append(helper.make_node("Conv", [x, weight(rng.integers(-127, 128, (16, 16, 1, 1)), 0.3, "1")], ["c1"],
                                  name="conv_1", kernel_shape=[1, 1]))
    h = qdq("c1", 0.06, "h")
    nodes.append(helper.make_node("Conv", [h, weight(np.full((4, 16, 1, 1), 127), 1 / 127, "2")], ["c2"],
                                  name="conv_2", kernel_shape=[1, 1]))
    y = qdq("c2", 0.03, "out")
    nodes.append(helper.make_node("Identity", [y], ["output"], name="out"))
    graph = helper.make_graph(nodes, "requantization_ties", [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, [1, 16, 8, 8])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4, 8, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
