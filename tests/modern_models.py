"""Small transformer, speech and OCR models built in code, with the patterns PyTorch's exporters write.

Random weights, small sizes (the tests convert and verify each in seconds).  Each builder returns an
``onnx.ModelProto`` with static input shapes, IR version 10:

- :func:`bert`: a BERT-style encoder (embeddings, attention with an additive mask from an int64
  ``attention_mask`` input, GELU through ``Erf`` as TorchScript exports it, LayerNormalization, pooler;
  ``dynamo=True``: the mask through ``Where`` and ``IsNaN``);
- :func:`vit`: a ViT (patch Conv, class token, attention, Erf GELU);
- :func:`swin`: a Swin Transformer (TorchScript export): windows through rank-6 Reshape/Transpose, QKV Gathers
  on rank 5, the shifted window's mask added at rank 5, ``Pad`` with an empty constant_value name;
- :func:`whisper_encoder`: 1-D Convs with Erf GELU, then attention blocks;
- :func:`lstm_speech` / :func:`gru_speech`: recurrent keyword spotters (bidirectional, initial states);
- :func:`vad`: a VAD model: reflect ``Pad``, 1-D Convs, an ``If`` on the int64 sample rate, an LSTM cell;
- :func:`dbnet_head`: a DBNet-style detection head with ``ConvTranspose`` kernel = stride = 2;
- :func:`svtr_rec`: an SVTR-style recognizer whose attention splits QKV as a rank-5 ``[B,T,3,H,D]`` tensor;
- :func:`squeezenet`: SqueezeNet 1.1 (fire modules, ``MaxPool`` with ``ceil_mode=1``);
- :func:`shufflenet`: ShuffleNetV2 units (Split, Concat, the rank-5 channel shuffle);
- :func:`ssdlite_head`: SSDlite-style box and class heads through rank-5 Reshape/Transpose;
- :func:`segmentation_head`: a decoder's ConvTranspose with kernel 3, stride 2, pads and output_padding.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 10


class Graph:
    """A tiny graph builder: ``g.op("Add", a, b)`` returns the output name."""

    def __init__(self, seed: int = 0) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def const(self, array, hint: str = "c") -> str:
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, *shape: int, scale: float | None = None, hint: str = "w") -> str:
        scale = scale if scale is not None else 1.0 / np.sqrt(max(1, int(np.prod(shape[1:])) or shape[0]))
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32), hint)

    def op(self, op_type: str, *inputs: str, outputs: int = 1, domain: str = "", **attrs):
        name = self.name(op_type)
        outs = [f"{name}:{i}" if outputs > 1 else name for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=name, domain=domain, **attrs))
        return outs if outputs > 1 else outs[0]

    def ints(self, *values: int) -> str:
        return self.const(np.array(values, np.int64), "i")

    def scalar(self, value: float) -> str:
        return self.const(np.array(value, np.float32), "s")

    # -- layers in the exporters' patterns ---------------------------------------------------------
    def linear(self, x: str, k: int, n: int) -> str:
        """torch.nn.Linear on a 3-D input: MatMul by the transposed weight, then Add of the bias."""
        return self.op("Add", self.op("MatMul", x, self.weight(k, n)), self.weight(n, scale=0.1))

    def gelu_erf(self, x: str) -> str:
        """GELU as TorchScript exports it: x * 0.5 * (1 + erf(x / sqrt(2)))."""
        erf = self.op("Erf", self.op("Div", x, self.scalar(1.4142135381698608)))
        return self.op("Mul", self.op("Mul", x, self.op("Add", erf, self.scalar(1.0))), self.scalar(0.5))

    def layernorm(self, x: str, n: int) -> str:
        return self.op("LayerNormalization", x, self.const(np.ones(n, np.float32) + self.rng.standard_normal(n).astype(
            np.float32) * 0.1), self.weight(n, scale=0.1), axis=-1, epsilon=1e-5)

    def attention(self, x: str, seq: int, hidden: int, heads: int, mask: str | None = None, nan_guard: bool = False
                  ) -> str:
        d = hidden // heads

        def split_heads(v: str, perm: list[int]) -> str:
            return self.op("Transpose", self.op("Reshape", v, self.ints(1, seq, heads, d)), perm=perm)

        q = split_heads(self.linear(x, hidden, hidden), [0, 2, 1, 3])
        k = split_heads(self.linear(x, hidden, hidden), [0, 2, 3, 1])
        v = split_heads(self.linear(x, hidden, hidden), [0, 2, 1, 3])
        scores = self.op("Div", self.op("MatMul", q, k), self.scalar(float(np.sqrt(d))))
        if mask is not None:
            scores = self.op("Add", scores, mask)
        probs = self.op("Softmax", scores, axis=-1)
        if nan_guard:  # torch's scaled_dot_product_attention: rows a -inf mask covers whole are 0, not NaN
            probs = self.op("Where", self.op("IsNaN", probs), self.scalar(0.0), probs)
        ctx = self.op("Transpose", self.op("MatMul", probs, v), perm=[0, 2, 1, 3])
        return self.linear(self.op("Reshape", ctx, self.ints(1, seq, hidden)), hidden, hidden)

    def encoder_layer(self, x: str, seq: int, hidden: int, heads: int, mask: str | None = None, pre_norm=False,
                      nan_guard: bool = False) -> str:
        if pre_norm:  # ViT, Whisper
            x = self.op("Add", x, self.attention(self.layernorm(x, hidden), seq, hidden, heads, mask))
            ff = self.linear(self.gelu_erf(self.linear(self.layernorm(x, hidden), hidden, 2 * hidden)), 2 * hidden,
                             hidden)
            return self.op("Add", x, ff)
        x = self.layernorm(self.op("Add", x, self.attention(x, seq, hidden, heads, mask, nan_guard)), hidden)
        ff = self.linear(self.gelu_erf(self.linear(x, hidden, 2 * hidden)), 2 * hidden, hidden)
        return self.layernorm(self.op("Add", x, ff), hidden)

    def conv(self, x: str, c_in: int, c_out: int, k, stride=1, pad=0, group=1, bias=True, **attrs) -> str:
        ks = list(k) if isinstance(k, (list, tuple)) else [k, k]
        pads = list(pad) if isinstance(pad, (list, tuple)) else [pad] * (2 * len(ks))
        strides = list(stride) if isinstance(stride, (list, tuple)) else [stride] * len(ks)
        inputs = [x, self.weight(c_out, c_in // group, *ks)]
        if bias:
            inputs.append(self.weight(c_out, scale=0.1))
        return self.op("Conv", *inputs, kernel_shape=ks, strides=strides, pads=pads, group=group, **attrs)

    def model(self, inputs, outputs, opset: int = 17) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, "g", inputs, outputs, initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)
        return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def _f(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _out(name: str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, None)


def bert(seq: int = 16, hidden: int = 32, heads: int = 2, layers: int = 2, vocab: int = 50, dynamo: bool = False,
         sdpa: bool = False) -> onnx.ModelProto:
    """TorchScript's additive mask, (1 - mask[:, None, None, :]) * -10000; with *dynamo*, the dynamo exporter's
    Where(mask, 0, -inf) with an IsNaN guard; with *sdpa*, transformers' default (scaled-dot-product) attention
    through the TorchScript exporter (opset 17, shapes folded): the bool mask picked by Flatten, Gather of an
    arange and Reshape, And with the all-true causal part, Where(mask, 0, -inf), and after each Softmax the
    Where(IsNaN) guard."""
    g = Graph(1)
    emb = g.op("Gather", g.weight(vocab, hidden, scale=0.5), "input_ids", axis=0)
    emb = g.op("Add", emb, g.weight(1, seq, hidden, scale=0.5))
    x = g.layernorm(emb, hidden)
    if sdpa:
        keep = g.op("Flatten", g.op("Cast", "attention_mask", to=TensorProto.BOOL), axis=2)
        keep = g.op("Gather", keep, g.const(np.arange(seq, dtype=np.int64).reshape(1, 1, 1, seq)), axis=0)
        keep = g.op("And", g.const(np.ones((1, 1, seq, 1), bool)), g.op("Reshape", keep, g.ints(1, 1, 1, seq)))
        mask = g.op("Where", keep, g.scalar(0.0), g.scalar(float("-inf")))
    elif dynamo:
        keep = g.op("Cast", g.op("Unsqueeze", "attention_mask", g.ints(1, 2)), to=TensorProto.BOOL)
        mask = g.op("Where", keep, g.scalar(0.0), g.scalar(float("-inf")))
        mask = g.op("Where", g.op("IsNaN", mask), g.scalar(0.0), mask)
    else:
        m = g.op("Cast", g.op("Unsqueeze", "attention_mask", g.ints(1, 2)), to=TensorProto.FLOAT)
        mask = g.op("Mul", g.op("Sub", g.scalar(1.0), m), g.scalar(-10000.0))
    for _ in range(layers):
        x = g.encoder_layer(x, seq, hidden, heads, mask, nan_guard=sdpa)
    first = g.op("Gather", x, g.const(np.array(0, np.int64)), axis=1)
    pooled = g.op("Tanh", g.op("Gemm", first, g.weight(hidden, hidden), g.weight(hidden, scale=0.1), transB=1))
    g.op("Identity", x)
    g.nodes[-1].output[0] = "last_hidden_state"
    g.op("Identity", pooled)
    g.nodes[-1].output[0] = "pooler_output"
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, seq]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, seq])]
    return g.model(inputs, [_out("last_hidden_state"), _out("pooler_output")])


def vit(image: int = 32, patch: int = 8, hidden: int = 32, heads: int = 2, layers: int = 2) -> onnx.ModelProto:
    g = Graph(2)
    tokens = (image // patch) ** 2
    x = g.conv("pixel_values", 3, hidden, patch, stride=patch)
    x = g.op("Transpose", g.op("Reshape", x, g.ints(1, hidden, tokens)), perm=[0, 2, 1])
    x = g.op("Concat", g.weight(1, 1, hidden, scale=0.5), x, axis=1)
    x = g.op("Add", x, g.weight(1, tokens + 1, hidden, scale=0.5))
    for _ in range(layers):
        x = g.encoder_layer(x, tokens + 1, hidden, heads, pre_norm=True)
    x = g.layernorm(x, hidden)
    cls = g.op("Gather", x, g.const(np.array(0, np.int64)), axis=1)
    g.nodes.append(helper.make_node("Gemm", [cls, g.weight(10, hidden), g.weight(10, scale=0.1)], ["logits"],
                                    name="head", transB=1))
    return g.model([_f("pixel_values", [1, 3, image, image])], [_out("logits")])


def _window_mask(size: int, window: int, shift: int) -> np.ndarray:
    """torchvision's shifted-window attention mask, [1, nW, 1, N, N]: -100 between tokens of different regions."""
    regions = np.zeros((size, size), np.float32)
    cuts = ((0, size - window), (size - window, size - shift), (size - shift, size))
    count = 0
    for h in cuts:
        for w in cuts:
            regions[h[0]:h[1], w[0]:w[1]] = count
            count += 1
    n = size // window
    windows = regions.reshape(n, window, n, window).transpose(0, 2, 1, 3).reshape(n * n, window * window)
    mask = np.where(windows[:, None, :] != windows[:, :, None], -100.0, 0.0).astype(np.float32)
    return mask[None, :, None]


def swin(image: int = 32, patch: int = 4, hidden: int = 16, heads: int = 2, window: int = 4,
         classes: int = 10) -> onnx.ModelProto:
    """torchvision's Swin as the TorchScript exporter writes it (shapes constant): a stage of two blocks (the
    second shifted), patch merging, a stage whose window is the whole map.  Each block: ``F.pad`` as ``Pad`` with
    an empty constant_value name, ``torch.roll`` as Slices and Concats, the window partition through a rank-6
    Reshape and Transpose, QKV split by Gathers on a rank-5 Transpose, the relative position bias, the shifted
    window's mask added to a rank-5 view, the inverse partition, the un-padding Slices."""
    g = Graph(5)

    def roll(x: str, shift: int, size: int) -> str:
        for axis in (1, 2):
            tail = g.op("Slice", x, g.ints(-shift % size), g.ints(2**63 - 1), g.ints(axis))
            head = g.op("Slice", x, g.ints(0), g.ints(-shift % size), g.ints(axis))
            x = g.op("Concat", tail, head, axis=axis)
        return x

    def block(x: str, size: int, c: int, shift: int) -> str:
        n, nw, d = window * window, (size // window) ** 2, c // heads
        y = g.layernorm(x, c)
        y = g.op("Pad", y, g.ints(0, 0, 0, 0, 0, 0, 0, 0), "", mode="constant")
        if shift:
            y = roll(y, -shift, size)
        y = g.op("Reshape", y, g.ints(1, size // window, window, size // window, window, c))
        y = g.op("Reshape", g.op("Transpose", y, perm=[0, 1, 3, 2, 4, 5]), g.ints(nw, n, c))
        qkv = g.op("Transpose", g.op("Reshape", g.linear(y, c, 3 * c), g.ints(nw, n, 3, heads, d)),
                   perm=[2, 0, 3, 1, 4])
        q, k, v = (g.op("Gather", qkv, g.const(np.array(i, np.int64)), axis=0) for i in range(3))
        q = g.op("Mul", q, g.scalar(d ** -0.5))
        attn = g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2]))
        attn = g.op("Add", attn, g.weight(1, heads, n, n, scale=0.5))
        if shift:
            attn = g.op("Reshape", attn, g.ints(1, nw, heads, n, n))
            attn = g.op("Add", attn, g.const(_window_mask(size, window, shift)))
            attn = g.op("Reshape", attn, g.ints(-1, heads, n, n))
        y = g.op("MatMul", g.op("Softmax", attn, axis=-1), v)
        y = g.op("Reshape", g.op("Transpose", y, perm=[0, 2, 1, 3]), g.ints(nw, n, c))
        y = g.op("Reshape", g.linear(y, c, c), g.ints(1, size // window, size // window, window, window, c))
        y = g.op("Reshape", g.op("Transpose", y, perm=[0, 1, 3, 2, 4, 5]), g.ints(1, size, size, c))
        if shift:
            y = roll(y, shift, size)
        y = g.op("Slice", g.op("Slice", y, g.ints(0), g.ints(size), g.ints(1), g.ints(1)), g.ints(0), g.ints(size),
                 g.ints(2), g.ints(1))
        x = g.op("Add", x, y)
        mlp = g.linear(g.gelu_erf(g.linear(g.layernorm(x, c), c, 4 * c)), 4 * c, c)
        return g.op("Add", x, mlp)

    size = image // patch
    x = g.op("Transpose", g.conv("x", 3, hidden, patch, stride=patch), perm=[0, 2, 3, 1])
    x = g.layernorm(x, hidden)
    x = block(block(x, size, hidden, 0), size, hidden, window // 2)
    x = g.op("Pad", x, g.ints(0, 0, 0, 0, 0, 0, 0, 0), "", mode="constant")  # patch merging
    quarters = [g.op("Slice", x, g.ints(i, j), g.ints(2**63 - 1, 2**63 - 1), g.ints(1, 2), g.ints(2, 2))
                for i, j in ((0, 0), (1, 0), (0, 1), (1, 1))]
    x = g.op("MatMul", g.layernorm(g.op("Concat", *quarters, axis=-1), 4 * hidden), g.weight(4 * hidden, 2 * hidden))
    x = block(x, size // 2, 2 * hidden, 0)
    x = g.op("Transpose", g.layernorm(x, 2 * hidden), perm=[0, 3, 1, 2])
    x = g.op("Flatten", g.op("GlobalAveragePool", x), axis=1)
    g.nodes.append(helper.make_node("Gemm", [x, g.weight(classes, 2 * hidden), g.weight(classes, scale=0.1)], ["y"],
                                    name="head", transB=1))
    return g.model([_f("x", [1, 3, image, image])], [_out("y")])


def whisper_encoder(mels: int = 16, frames: int = 32, hidden: int = 32, heads: int = 2, layers: int = 2
                    ) -> onnx.ModelProto:
    g = Graph(3)

    def conv1d(x, c_in, c_out, stride):
        return g.op("Conv", x, g.weight(c_out, c_in, 3), g.weight(c_out, scale=0.1), kernel_shape=[3],
                    pads=[1, 1], strides=[stride], dilations=[1], group=1)

    x = g.gelu_erf(conv1d("input_features", mels, hidden, 1))
    x = g.gelu_erf(conv1d(x, hidden, hidden, 2))
    seq = frames // 2
    x = g.op("Add", g.op("Transpose", x, perm=[0, 2, 1]), g.weight(seq, hidden, scale=0.5))
    for _ in range(layers):
        x = g.encoder_layer(x, seq, hidden, heads, pre_norm=True)
    g.nodes.append(helper.make_node("LayerNormalization", [x, g.weight(hidden), g.weight(hidden)],
                                    ["last_hidden_state"], name="ln_post", axis=-1, epsilon=1e-5))
    return g.model([_f("input_features", [1, mels, frames])], [_out("last_hidden_state")])


def _rnn_weights(g: Graph, op: str, dirs: int, inp: int, hidden: int):
    gates = 4 if op == "LSTM" else 3
    s = 1 / np.sqrt(hidden)
    return (g.weight(dirs, gates * hidden, inp, scale=s), g.weight(dirs, gates * hidden, hidden, scale=s),
            g.weight(dirs, 2 * gates * hidden, scale=s))


def _rnn_speech(op: str, steps: int, features: int, hidden: int, classes: int) -> onnx.ModelProto:
    g = Graph(4 if op == "LSTM" else 5)
    # [1, features, steps] frames -> a 1-D Conv front end -> [steps, 1, channels] for the recurrent layers
    x = g.op("Relu", g.op("Conv", "features", g.weight(hidden, features, 3), g.weight(hidden, scale=0.1),
                          kernel_shape=[3], pads=[1, 1]))
    x = g.op("Transpose", x, perm=[2, 0, 1])
    w, r, b = _rnn_weights(g, op, 2, hidden, hidden)
    h0 = g.weight(2, 1, hidden, scale=0.1)
    extra = {"linear_before_reset": 1} if op == "GRU" else {}
    inputs = [x, w, r, b, "", h0] + ([g.weight(2, 1, hidden, scale=0.1)] if op == "LSTM" else [])
    y, y_h = g.op(op, *inputs, outputs=2 if op == "GRU" else 3, hidden_size=hidden, direction="bidirectional",
                  **extra)[:2]
    # Y [steps, 2, 1, hidden] -> [steps, 1, 2*hidden] -> second layer, forward only
    y = g.op("Reshape", g.op("Transpose", y, perm=[0, 2, 1, 3]), g.ints(steps, 1, 2 * hidden))
    w2, r2, b2 = _rnn_weights(g, op, 1, 2 * hidden, hidden)
    outs = g.op(op, y, w2, r2, b2, hidden_size=hidden, outputs=2)
    last = g.op("Reshape", outs[1], g.ints(1, hidden))
    both = g.op("Concat", last, g.op("Reshape", y_h, g.ints(1, 2 * hidden)), axis=1)
    g.nodes.append(helper.make_node("Gemm", [both, g.weight(classes, 3 * hidden), g.weight(classes, scale=0.1)],
                                    ["logits"], name="classifier", transB=1))
    return g.model([_f("features", [1, features, steps])], [_out("logits")], opset=14)


def lstm_speech(steps: int = 12, features: int = 10, hidden: int = 16, classes: int = 6) -> onnx.ModelProto:
    return _rnn_speech("LSTM", steps, features, hidden, classes)


def gru_speech(steps: int = 12, features: int = 10, hidden: int = 16, classes: int = 6) -> onnx.ModelProto:
    return _rnn_speech("GRU", steps, features, hidden, classes)


def vad(samples: int = 256, hidden: int = 16) -> onnx.ModelProto:
    """Silero-style: reflect pad, a 1-D Conv STFT, magnitudes, 1-D Conv encoder, an LSTM step, sigmoid.
    The sample rate ``sr`` (int64 scalar) picks the branch of an ``If``, as silero's model does."""
    g = Graph(6)
    x = g.op("Unsqueeze", "input", g.ints(1))  # [1, 1, samples]
    x = g.op("Pad", x, g.ints(0, 0, 8, 0, 0, 8), mode="reflect")
    spec = g.op("Conv", x, g.weight(2 * 9, 1, 16), kernel_shape=[16], strides=[8])  # [1, 18, T]
    re = g.op("Slice", spec, g.ints(0), g.ints(9), g.ints(1))
    im = g.op("Slice", spec, g.ints(9), g.ints(18), g.ints(1))
    mag = g.op("Sqrt", g.op("Add", g.op("Mul", re, re), g.op("Mul", im, im)))

    def branch(name: str, channels: int) -> onnx.GraphProto:
        b = Graph(7 if channels == 1 else 8)
        b.count = 1000 * channels
        y = b.op("Relu", b.op("Conv", mag, b.weight(hidden, 9, 3), b.weight(hidden, scale=0.1), kernel_shape=[3],
                               pads=[1, 1]))
        y = b.op("Relu", b.op("Conv", y, b.weight(hidden, hidden, 3), b.weight(hidden, scale=0.1), kernel_shape=[3],
                               pads=[1, 1], strides=[2]))
        b.nodes.append(helper.make_node("Identity", [y], [f"{name}_out"], name=f"{name}_id"))
        return helper.make_graph(b.nodes, name, [], [_out(f"{name}_out")], initializer=b.inits)

    is16k = g.op("Equal", "sr", g.const(np.array(16000, np.int64)))
    enc = g.op("If", is16k, then_branch=branch("sr16k", 1), else_branch=branch("sr8k", 2))
    steps = (samples + 16 - 16) // 8 + 1
    steps = (steps + 2 - 3) // 2 + 1
    seq = g.op("Transpose", enc, perm=[2, 0, 1])  # [T, 1, hidden]
    w, r, b = _rnn_weights(g, "LSTM", 1, hidden, hidden)
    h0 = g.op("Slice", "state", g.ints(0), g.ints(1), g.ints(0))
    c0 = g.op("Slice", "state", g.ints(1), g.ints(2), g.ints(0))
    _, y_h, y_c = g.op("LSTM", seq, w, r, b, "", h0, c0, hidden_size=hidden, outputs=3)
    g.nodes.append(helper.make_node("Concat", [y_h, y_c], ["stateN"], name="state_out", axis=0))
    d = g.op("Relu", g.op("Reshape", y_h, g.ints(1, hidden, 1)))
    d = g.op("Conv", d, g.weight(1, hidden, 1), g.weight(1, scale=0.1), kernel_shape=[1])
    g.nodes.append(helper.make_node("Sigmoid", [g.op("Reshape", d, g.ints(1, 1))], ["output"], name="prob"))
    del steps
    inputs = [_f("input", [1, samples]), _f("state", [2, 1, hidden]),
              helper.make_tensor_value_info("sr", TensorProto.INT64, [])]
    return g.model(inputs, [_out("output"), _out("stateN")], opset=16)


def dbnet_head(size: int = 32, channels: int = 16) -> onnx.ModelProto:
    g = Graph(9)
    x = g.op("Relu", g.conv("x", 3, channels, 3, stride=2, pad=1))
    x = g.op("Relu", g.conv(x, channels, channels, 3, stride=2, pad=1))
    x = g.op("Relu", g.conv(x, channels, channels // 4, 3, pad=1))
    up = g.op("ConvTranspose", x, g.weight(channels // 4, channels // 4, 2, 2), g.weight(channels // 4, scale=0.1),
              kernel_shape=[2, 2], strides=[2, 2])
    up = g.op("Relu", g.op("BatchNormalization", up, *(g.const(np.full(channels // 4, v, np.float32))
                                                      for v in (1.0, 0.1, 0.0, 1.0))))
    up = g.op("ConvTranspose", up, g.weight(channels // 4, 1, 2, 2), g.weight(1, scale=0.1), kernel_shape=[2, 2],
              strides=[2, 2])
    g.nodes.append(helper.make_node("Sigmoid", [up], ["maps"], name="prob"))
    return g.model([_f("x", [1, 3, size, size])], [_out("maps")], opset=14)


def svtr_rec(height: int = 8, width: int = 32, hidden: int = 32, heads: int = 2, classes: int = 20
             ) -> onnx.ModelProto:
    g = Graph(10)
    x = g.op("Relu", g.conv("x", 3, hidden, 3, stride=2, pad=1))  # [1, C, H/2, W/2]
    x = g.op("Relu", g.conv(x, hidden, hidden, 3, stride=(height // 2, 1), pad=[1, 1, 1, 1]))
    t = (width // 2)
    x = g.op("Transpose", g.op("Reshape", x, g.ints(1, hidden, t)), perm=[0, 2, 1])  # [1, T, C]
    d = hidden // heads
    for _ in range(2):
        h = g.layernorm(x, hidden)
        qkv = g.linear(h, hidden, 3 * hidden)
        qkv = g.op("Transpose", g.op("Reshape", qkv, g.ints(1, t, 3, heads, d)), perm=[2, 0, 3, 1, 4])
        q = g.op("Squeeze", g.op("Slice", qkv, g.ints(0), g.ints(1), g.ints(0)), g.ints(0))
        k = g.op("Squeeze", g.op("Slice", qkv, g.ints(1), g.ints(2), g.ints(0)), g.ints(0))
        v = g.op("Squeeze", g.op("Slice", qkv, g.ints(2), g.ints(3), g.ints(0)), g.ints(0))
        scores = g.op("MatMul", g.op("Mul", q, g.scalar(d ** -0.5)), g.op("Transpose", k, perm=[0, 1, 3, 2]))
        probs = g.op("Softmax", scores, axis=-1)
        ctx = g.op("Reshape", g.op("Transpose", g.op("MatMul", probs, v), perm=[0, 2, 1, 3]), g.ints(1, t, hidden))
        x = g.op("Add", x, g.linear(ctx, hidden, hidden))
        ff = g.linear(g.gelu_erf(g.linear(g.layernorm(x, hidden), hidden, 2 * hidden)), 2 * hidden, hidden)
        x = g.op("Add", x, ff)
    logits = g.linear(g.layernorm(x, hidden), hidden, classes)
    g.nodes.append(helper.make_node("Softmax", [logits], ["probs"], name="probs", axis=2))
    return g.model([_f("x", [1, 3, height, width])], [_out("probs")], opset=17)


def squeezenet(size: int = 63, width: int = 8, classes: int = 10) -> onnx.ModelProto:
    """SqueezeNet 1.1's layout (fire modules: squeeze 1x1, expand 1x1 and 3x3, concat), narrow."""
    g = Graph(11)
    x = g.op("Relu", g.conv("data", 3, 4 * width, 3, stride=2))

    def pool(v):
        return g.op("MaxPool", v, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)

    def fire(v, c_in, squeeze, expand):
        s = g.op("Relu", g.conv(v, c_in, squeeze, 1))
        a = g.op("Relu", g.conv(s, squeeze, expand, 1))
        b = g.op("Relu", g.conv(s, squeeze, expand, 3, pad=1))
        return g.op("Concat", a, b, axis=1)

    x = pool(x)
    x = fire(fire(x, 4 * width, width, 4 * width), 8 * width, width, 4 * width)
    x = pool(x)
    x = fire(fire(x, 8 * width, 2 * width, 8 * width), 16 * width, 2 * width, 8 * width)
    x = pool(x)
    x = fire(x, 16 * width, 3 * width, 12 * width)
    x = g.op("Relu", g.conv(x, 24 * width, classes, 1))
    x = g.op("GlobalAveragePool", x)
    g.nodes.append(helper.make_node("Flatten", [x], ["probs"], name="flatten", axis=1))
    return g.model([_f("data", [1, 3, size, size])], [_out("probs")], opset=13)


def shufflenet(size: int = 16, channels: int = 16, units: int = 2) -> onnx.ModelProto:
    """ShuffleNetV2 units: Split in halves, one half through 1x1 / depthwise 3x3 / 1x1 convs, Concat, then
    the channel shuffle as torchvision exports it (Reshape to rank 5, Transpose, Reshape back)."""
    g = Graph(12)
    x = g.op("Relu", g.conv("x", 3, channels, 3, pad=1))
    half = channels // 2
    for _ in range(units):
        a, b = g.op("Split", x, g.ints(half, half), axis=1, outputs=2)
        b = g.op("Relu", g.conv(b, half, half, 1))
        b = g.conv(b, half, half, 3, pad=1, group=half)
        b = g.op("Relu", g.conv(b, half, half, 1))
        x = g.op("Concat", a, b, axis=1)
        x = g.op("Reshape", x, g.ints(1, 2, half, size, size))
        x = g.op("Transpose", x, perm=[0, 2, 1, 3, 4])
        x = g.op("Reshape", x, g.ints(1, channels, size, size))
    g.nodes.append(helper.make_node("GlobalAveragePool", [x], ["pooled"], name="pool"))
    return g.model([_f("x", [1, 3, size, size])], [_out("pooled")], opset=13)


def ssdlite_head(size: int = 16, anchors: int = 3, classes: int = 5) -> onnx.ModelProto:
    """SSDlite-style heads on two feature maps: each conv output [N, A*K, H, W] viewed as [N, A, K, H, W],
    permuted to [N, H, W, A, K] and flattened to [N, H*W*A, K], as torchvision exports it."""
    g = Graph(13)
    x = g.op("Relu", g.conv("x", 3, 16, 3, stride=2, pad=1))
    maps = [(x, size // 2), (g.op("Relu", g.conv(x, 16, 16, 3, stride=2, pad=1)), size // 4)]

    def head(v: str, side: int, k: int) -> str:
        y = g.conv(v, 16, anchors * k, 3, pad=1)
        y = g.op("Transpose", g.op("Reshape", y, g.ints(1, anchors, k, side, side)), perm=[0, 3, 4, 1, 2])
        return g.op("Reshape", y, g.ints(1, side * side * anchors, k))

    scores = g.op("Concat", *(head(v, side, classes) for v, side in maps), axis=1)
    g.nodes.append(helper.make_node("Softmax", [scores], ["scores"], name="scores", axis=-1))
    g.nodes.append(helper.make_node("Concat", [head(v, side, 4) for v, side in maps], ["boxes"], name="boxes",
                                    axis=1))
    return g.model([_f("x", [1, 3, size, size])], [_out("scores"), _out("boxes")], opset=13)


def segmentation_head(size: int = 16, channels: int = 8, classes: int = 4) -> onnx.ModelProto:
    """A decoder upsampling with ConvTranspose kernel 3, stride 2, pads 1, output_padding 1 (kernel != stride)."""
    g = Graph(14)
    x = g.op("Relu", g.conv("x", 3, channels, 3, stride=2, pad=1))
    x = g.op("Relu", g.op("ConvTranspose", x, g.weight(channels, channels, 3, 3), g.weight(channels, scale=0.1),
                          kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]))
    g.nodes.append(helper.make_node("Conv", [x, g.weight(classes, channels, 1, 1)], ["logits"], name="classifier",
                                    kernel_shape=[1, 1]))
    return g.model([_f("x", [1, 3, size, size])], [_out("logits")], opset=13)


#: Every builder, by name.
MODELS = {f.__name__: f for f in (bert, vit, whisper_encoder, lstm_speech, gru_speech, vad, dbnet_head, svtr_rec,
                                   squeezenet, shufflenet, ssdlite_head, segmentation_head, swin)}
