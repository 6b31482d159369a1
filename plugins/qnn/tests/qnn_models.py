"""Models built in code for the QNN backend's tests: a transformer encoder block, an LSTM speech model, a QDQ
CNN (quantized by onnxruntime.quantization with its QNN configuration), a CNN of ONNX function ops, a model with
dynamic shapes, and random graphs from mobile-ep's differential strategy."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
IR_VERSION = 10  # onnxruntime refuses the IR version onnx 1.23 writes by default
ROOT = pathlib.Path(__file__).resolve().parents[3]


def _init(name: str, array) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def _model(nodes, inputs, outputs, inits, opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)


def transformer_encoder(seq: int = 16, dim: int = 32, heads: int = 4, seed: int = 0) -> onnx.ModelProto:
    """One encoder block: multi-head self-attention (MatMul, Reshape, Transpose, Softmax), residuals,
    LayerNormalization and a GELU feed-forward, on a [1, seq, dim] input."""
    rng = np.random.default_rng(seed)
    w = lambda *s: (rng.standard_normal(s) * 0.1).astype(np.float32)  # noqa: E731
    hd = dim // heads
    inits = [_init("wq", w(dim, dim)), _init("wk", w(dim, dim)), _init("wv", w(dim, dim)), _init("wo", w(dim, dim)),
             _init("bq", w(dim)), _init("w1", w(dim, 4 * dim)), _init("b1", w(4 * dim)), _init("w2", w(4 * dim, dim)),
             _init("g1", np.ones(dim, np.float32)), _init("be1", np.zeros(dim, np.float32)),
             _init("g2", np.ones(dim, np.float32)), _init("be2", np.zeros(dim, np.float32)),
             _init("heads_shape", np.array([1, seq, heads, hd], np.int64)),
             _init("merge_shape", np.array([1, seq, dim], np.int64)),
             _init("scale", np.array(1 / np.sqrt(hd), np.float32)), _init("half", np.array(0.5, np.float32)),
             _init("one", np.array(1.0, np.float32)), _init("rsqrt2", np.array(1 / np.sqrt(2), np.float32))]
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "wq"], ["q0"], name="q_proj"), n("Add", ["q0", "bq"], ["q1"], name="q_bias"),
        n("MatMul", ["x", "wk"], ["k0"], name="k_proj"), n("MatMul", ["x", "wv"], ["v0"], name="v_proj"),
        n("Reshape", ["q1", "heads_shape"], ["q2"], name="q_split"), n("Transpose", ["q2"], ["q"], perm=[0, 2, 1, 3], name="q_t"),
        n("Reshape", ["k0", "heads_shape"], ["k2"], name="k_split"), n("Transpose", ["k2"], ["kt"], perm=[0, 2, 3, 1], name="k_t"),
        n("Reshape", ["v0", "heads_shape"], ["v2"], name="v_split"), n("Transpose", ["v2"], ["v"], perm=[0, 2, 1, 3], name="v_t"),
        n("MatMul", ["q", "kt"], ["s0"], name="scores"), n("Mul", ["s0", "scale"], ["s1"], name="scaled"),
        n("Softmax", ["s1"], ["p"], axis=-1, name="softmax"), n("MatMul", ["p", "v"], ["a0"], name="attend"),
        n("Transpose", ["a0"], ["a1"], perm=[0, 2, 1, 3], name="a_t"), n("Reshape", ["a1", "merge_shape"], ["a2"], name="merge"),
        n("MatMul", ["a2", "wo"], ["a3"], name="o_proj"), n("Add", ["x", "a3"], ["r1"], name="residual1"),
        n("LayerNormalization", ["r1", "g1", "be1"], ["h1"], axis=-1, name="ln1"),
        n("MatMul", ["h1", "w1"], ["f0"], name="ff1"), n("Add", ["f0", "b1"], ["f1"], name="ff1_bias"),
        n("Mul", ["f1", "rsqrt2"], ["g0"], name="gelu_scale"), n("Erf", ["g0"], ["g1o"], name="gelu_erf"),
        n("Add", ["g1o", "one"], ["g2o"], name="gelu_add"), n("Mul", ["f1", "g2o"], ["g3"], name="gelu_mul"),
        n("Mul", ["g3", "half"], ["g4"], name="gelu_half"), n("MatMul", ["g4", "w2"], ["f2"], name="ff2"),
        n("Add", ["h1", "f2"], ["r2"], name="residual2"),
        n("LayerNormalization", ["r2", "g2", "be2"], ["y"], axis=-1, name="ln2"),
    ]
    return _model(nodes, [helper.make_tensor_value_info("x", F, [1, seq, dim])],
                  [helper.make_tensor_value_info("y", F, [1, seq, dim])], inits)


def lstm_speech(frames: int = 20, features: int = 40, hidden: int = 32, classes: int = 12, seed: int = 0,
                dynamic: bool = False) -> onnx.ModelProto:
    """A keyword spotter: Conv over the features, an LSTM over the frames, a Gemm classifier and Softmax."""
    rng = np.random.default_rng(seed)
    w = lambda *s: (rng.standard_normal(s) * 0.1).astype(np.float32)  # noqa: E731
    inits = [_init("cw", w(features, features, 3)), _init("cb", w(features)),
             _init("W", w(1, 4 * hidden, features)), _init("R", w(1, 4 * hidden, hidden)), _init("B", w(1, 8 * hidden)),
             _init("fw", w(classes, hidden)), _init("fb", w(classes)),
             _init("last", np.array([frames - 1], np.int64)), _init("squeeze_axes", np.array([0, 1], np.int64))]
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "cw", "cb"], ["c0"], pads=[1, 1], name="frontend_conv"),  # [1, F, T]
        n("Relu", ["c0"], ["c1"], name="frontend_relu"),
        n("Transpose", ["c1"], ["seq"], perm=[2, 0, 1], name="to_time_major"),  # [T, 1, F]
        n("LSTM", ["seq", "W", "R", "B"], ["", "h"], hidden_size=hidden, name="lstm"),  # h: [1, 1, H]
        n("Squeeze", ["h", "squeeze_axes"], ["h1"], name="squeeze"),  # [H]
        n("Unsqueeze", ["h1", "squeeze_axes"], ["h2"], name="unsqueeze"),
        n("Reshape", ["h2", "shape"], ["h3"], name="flatten") if False else n("Flatten", ["h2"], ["h3"], axis=2, name="flatten"),
        n("Gemm", ["h3", "fw", "fb"], ["logits"], transB=1, name="classifier"),
        n("Softmax", ["logits"], ["y"], axis=-1, name="probabilities"),
    ]
    t = "T" if dynamic else frames
    return _model(nodes, [helper.make_tensor_value_info("x", F, [1, features, t])],
                  [helper.make_tensor_value_info("y", F, None)], inits)


def small_cnn(seed: int = 0, batch: int | str = 1) -> onnx.ModelProto:
    """A small float CNN: Conv+Relu blocks, MaxPool, a depthwise Conv, GlobalAveragePool, Flatten, Gemm."""
    rng = np.random.default_rng(seed)
    w = lambda *s: (rng.standard_normal(s) * 0.2).astype(np.float32)  # noqa: E731
    inits = [_init("w1", w(8, 3, 3, 3)), _init("b1", w(8)), _init("w2", w(8, 1, 3, 3)), _init("b2", w(8)),
             _init("w3", w(16, 8, 1, 1)), _init("b3", w(16)), _init("fw", w(10, 16)), _init("fb", w(10))]
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"), n("Relu", ["c1"], ["r1"], name="relu1"),
        n("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
        n("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=8, name="dwconv"),
        n("Relu", ["c2"], ["r2"], name="relu2"),
        n("Conv", ["r2", "w3", "b3"], ["c3"], name="pwconv"), n("Relu", ["c3"], ["r3"], name="relu3"),
        n("GlobalAveragePool", ["r3"], ["g"], name="gap"), n("Flatten", ["g"], ["f"], name="flatten"),
        n("Gemm", ["f", "fw", "fb"], ["y"], transB=1, name="fc"),
    ]
    return _model(nodes, [helper.make_tensor_value_info("x", F, [batch, 3, 16, 16])],
                  [helper.make_tensor_value_info("y", F, [batch, 10])], inits, opset=13)


def function_op_cnn(seed: int = 0, silu: bool = False, declared: bool = False) -> onnx.ModelProto:
    """A CNN made with ONNX function ops (opset 21), which the CPU EP has no kernel for (a CPU-only session
    inlines them, a session with the QNN EP offers them whole): Conv, HardSwish, Conv, then two outputs, a
    GroupNormalization and a head (GlobalAveragePool, Flatten, Gemm, CastLike to the input's type).  With
    *silu*, the GroupNormalization feeds a SiLU (Sigmoid * x), as in a diffusion UNet's residual block; with
    *declared*, the file gives the GroupNormalization's output shape (value_info, as exporters write it)."""
    rng = np.random.default_rng(seed)
    w = lambda *s: (rng.standard_normal(s) * 0.2).astype(np.float32)  # noqa: E731
    inits = [_init("w1", w(16, 3, 3, 3)), _init("b1", w(16)), _init("w2", w(16, 16, 3, 3)), _init("b2", w(16)),
             _init("gs", 1 + w(16)), _init("gb", w(16)), _init("fw", w(10, 16)), _init("fb", w(10))]
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        n("HardSwish", ["c1"], ["hs"], name="hardswish"),
        n("Conv", ["hs", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        n("GroupNormalization", ["c2", "gs", "gb"], ["gn"], num_groups=4, epsilon=1e-5, name="groupnorm"),
        n("GlobalAveragePool", ["c2"], ["gap"], name="gap"), n("Flatten", ["gap"], ["f"], name="flatten"),
        n("Gemm", ["f", "fw", "fb"], ["logits"], transB=1, name="fc"),
        n("CastLike", ["logits", "x"], ["y"], name="castlike"),
    ]
    features = "gn"
    if silu:
        nodes += [n("Sigmoid", ["gn"], ["sg"], name="sigmoid"), n("Mul", ["gn", "sg"], ["silu"], name="silu")]
        features = "silu"
    model = _model(nodes, [helper.make_tensor_value_info("x", F, [1, 3, 16, 16])],
                   [helper.make_tensor_value_info(features, F, [1, 16, 16, 16]),
                    helper.make_tensor_value_info("y", F, [1, 10])], inits, opset=21)
    if declared and silu:
        model.graph.value_info.append(helper.make_tensor_value_info("gn", F, [1, 16, 16, 16]))
    return model


def mish_block(seed: int = 0) -> onnx.ModelProto:
    """Conv, Mish (an ONNX function op: Softplus, Tanh, Mul), Conv, as in a YOLOv4-style backbone."""
    rng = np.random.default_rng(seed)
    w = lambda *s: (rng.standard_normal(s) * 0.2).astype(np.float32)  # noqa: E731
    inits = [_init("w1", w(8, 3, 3, 3)), _init("b1", w(8)), _init("w2", w(8, 8, 1, 1)), _init("b2", w(8))]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"), n("Mish", ["c1"], ["m"], name="mish"),
             n("Conv", ["m", "w2", "b2"], ["y"], name="conv2")]
    return _model(nodes, [helper.make_tensor_value_info("x", F, [1, 3, 16, 16])],
                  [helper.make_tensor_value_info("y", F, [1, 8, 16, 16])], inits, opset=18)


def float64_softmax(double_io: str = "") -> onnx.ModelProto:
    """Attention scores in float64 (as softmax_precision asks of an expanded Attention): Cast to double, a
    double bias, Softmax, MatMul with a double value matrix, Cast back.  *double_io*: ``"input"`` makes the model
    read double (no first Cast), ``"output"`` write double (no last Cast)."""
    rng = np.random.default_rng(0)
    n = helper.make_node
    nodes = [n("Cast", ["x"], ["xd"], to=TensorProto.DOUBLE, name="to_double"),
             n("Add", ["xd", "bias"], ["scores"], name="bias"), n("Softmax", ["scores"], ["p"], axis=-1, name="softmax"),
             n("MatMul", ["p", "v"], ["o"], name="matmul"), n("Cast", ["o"], ["y"], to=F, name="to_float")]
    inits = [_init("bias", rng.standard_normal((8, 8))), _init("v", rng.standard_normal((8, 4)))]
    x_type, y_type = F, F
    if double_io == "input":
        nodes[1].input[0], x_type = "x", TensorProto.DOUBLE
        del nodes[0]
    if double_io == "output":
        nodes[-2].output[0], y_type = "y", TensorProto.DOUBLE
        del nodes[-1]
    return _model(nodes, [helper.make_tensor_value_info("x", x_type, [1, 2, 8, 8])],
                  [helper.make_tensor_value_info("y", y_type, [1, 2, 8, 4])], inits)


def passthrough_output_graph() -> onnx.ModelProto:
    """A random graph of the differential strategy on which onnxruntime-qnn lists ``erf23``, a graph output an Erf
    on the CPU makes, among the inputs and the outputs of the partition holding the Concat."""
    n = helper.make_node
    nodes = [
        n("Mul", ["x", "x"], ["mul1"]), n("Erf", ["mul1"], ["erf3"]), n("Expand", ["x", "c5"], ["expand6"]),
        n("BatchNormalization", ["mul1", "c8", "c9", "c10", "c11"], ["batchnormalization12"]),
        n("Mul", ["batchnormalization12", "c14"], ["mul15"]),
        n("Transpose", ["batchnormalization12"], ["transpose17"], perm=[0, 2, 3, 1]),
        n("Relu", ["transpose17"], ["relu19"]), n("Transpose", ["relu19"], ["transpose21"], perm=[0, 3, 1, 2]),
        n("Erf", ["batchnormalization12"], ["erf23"]), n("Concat", ["erf3", "mul1"], ["concat25"], axis=1),
        n("Transpose", ["x"], ["transpose27"], perm=[0, 2, 3, 1]), n("Relu", ["transpose27"], ["relu29"]),
        n("Transpose", ["relu29"], ["transpose31"], perm=[0, 3, 1, 2]), n("Relu", ["x"], ["relu33"]),
    ]
    one = lambda value: np.array([value], np.float32)  # noqa: E731
    inits = [_init("c5", np.array([1, 1, 8, 6], np.int64)), _init("c8", one(1.37)), _init("c9", one(0.1)),
             _init("c10", one(-0.17)), _init("c11", one(0.77)), _init("c14", np.full((1, 1, 1), 0.056, np.float32))]
    shape = [1, 1, 8, 6]
    outputs = {"expand6": shape, "mul15": shape, "transpose21": shape, "erf23": shape, "concat25": [1, 2, 8, 6],
               "transpose31": shape, "relu33": shape}
    return _model(nodes, [helper.make_tensor_value_info("x", F, shape)],
                  [helper.make_tensor_value_info(name, F, dims) for name, dims in outputs.items()], inits, opset=14)


def deep_residual_mlp(layers: int = 24, width: int = 64, seed: int = 0) -> onnx.ModelProto:
    """``x + Sigmoid(x @ W)`` repeated *layers* times (He-scaled weights), then a linear head: a deep float32
    graph whose hidden values grow to ~15, where fp16 rounding adds up to a few hundredths on every output,
    near zero ones too (more than 1e-2 + 1e-2 of each element)."""
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        inits.append(_init(f"w{i}", (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)))
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"], name=f"matmul{i}"),
                  helper.make_node("Sigmoid", [f"m{i}"], [f"s{i}"], name=f"sigmoid{i}"),
                  helper.make_node("Add", [x, f"s{i}"], [f"r{i}"], name=f"residual{i}")]
        x = f"r{i}"
    inits.append(_init("head", (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)))
    nodes.append(helper.make_node("MatMul", [x, "head"], ["y"], name="head"))  # logits of both signs, some near 0
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])], inits)


def dynamic_cnn() -> onnx.ModelProto:
    """:func:`small_cnn` with a symbolic batch dimension: the QNN EP takes none of it."""
    return small_cnn(batch="N")


def quantized(model: onnx.ModelProto, folder: pathlib.Path, name: str) -> pathlib.Path:
    """*model* quantized to QDQ by onnxruntime.quantization with its QNN configuration (``get_qnn_qdq_config``:
    uint8 activations and weights), calibrated on four deterministic random inputs; returns the written path."""
    from onnxruntime.quantization import CalibrationDataReader, quantize
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

    folder.mkdir(parents=True, exist_ok=True)
    float_path = folder / f"{name}_float.onnx"
    onnx.save(model, float_path)
    rng = np.random.default_rng(0)
    inputs = [(i.name, [d.dim_value for d in i.type.tensor_type.shape.dim]) for i in model.graph.input]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter([{n: rng.standard_normal(s).astype(np.float32) for n, s in inputs} for _ in range(4)])

        def get_next(self):
            return next(self.items, None)

    out = folder / f"{name}_qdq.onnx"
    quantize(str(float_path), str(out), get_qnn_qdq_config(str(float_path), Reader()))
    written = onnx.load(str(out))
    written.ir_version = IR_VERSION
    onnx.save(written, out)
    return out


def qdq_cnn(folder: pathlib.Path) -> pathlib.Path:
    """:func:`small_cnn` quantized for QNN (:func:`quantized`)."""
    return quantized(small_cnn(), folder, "cnn")


def differential_graphs():
    """The random-graph strategy of mobile-ep's differential tests (``tests/test_differential.py``)."""
    spec = importlib.util.spec_from_file_location("mobile_ep_differential_strategy", ROOT / "tests" / "test_differential.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.graphs()
