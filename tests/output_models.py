"""Models for the output tests, built in code: a text-detection network shaped like PP-OCRv4 det."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def ocr_det_like(blocks: int = 24, seed: int = 0, dims=(None, 3, None, None)):
    """A DB-style detector: input ``x`` of *dims* ([?,3,?,?] as PP-OCRv4 det's), a backbone of conv / hardswish / squeeze-excite blocks,
    an FPN (Resize + Add + Concat) and a head ending in ConvTranspose + Sigmoid; a few hundred nodes."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    count = [0]

    def name(prefix):
        count[0] += 1
        return f"{prefix}_{count[0]}"

    def weight(shape):
        w = numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name("w"))
        inits.append(w)
        return w.name

    def node(op, inputs, **attrs):
        out = name(op.lower())
        nodes.append(helper.make_node(op, inputs, [out], name=out + "_node", **attrs))
        return out

    def conv(x, cin, cout, k=3, stride=1, group=1):
        return node("Conv", [x, weight([cout, cin // group, k, k]), weight([cout])], kernel_shape=[k, k],
                    strides=[stride, stride], pads=[k // 2] * 4, group=group)

    def se(x, c):
        s = node("GlobalAveragePool", [x])
        s = node("Relu", [conv(s, c, c // 4, k=1)])
        s = node("HardSigmoid", [conv(s, c // 4, c, k=1)], alpha=0.2, beta=0.5)
        return node("Mul", [x, s])

    x = node("HardSwish", [conv("x", 3, 16, stride=2)])
    c = 16
    stages = []
    per_stage = max(1, blocks // 4)
    for stage in range(4):
        for b in range(per_stage):
            cout = c * 2 if b == 0 and stage else c
            stride = 2 if b == 0 and stage else 1
            y = node("HardSwish", [conv(x, c, c, stride=stride, group=c)])
            y = se(y, c)
            y = node("HardSwish", [conv(y, c, cout, k=1)])
            x = node("Add", [x, y]) if cout == c and stride == 1 else y
            c = cout
        stages.append((x, c))
    # FPN: top-down with Resize and Add, then every level resized to the finest and concatenated
    lat = [conv(s, ch, 32, k=1) for s, ch in stages]
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales2")
    inits.append(scales)
    top = lat[-1]
    outs = [top]
    for level in reversed(lat[:-1]):
        up = node("Resize", [top, "", "scales2"], mode="nearest")
        top = node("Add", [level, up])
        outs.append(top)
    outs = [conv(o, 32, 8) for o in outs]
    ups = []
    for i, o in enumerate(reversed(outs)):
        for _ in range(i):
            o = node("Resize", [o, "", "scales2"], mode="nearest")
        ups.append(o)
    fused = node("Concat", ups, axis=1)
    h = node("Relu", [conv(fused, 32, 8)])
    h = node("ConvTranspose", [h, weight([8, 8, 2, 2]), weight([8])], kernel_shape=[2, 2], strides=[2, 2])
    h = node("Relu", [h])
    h = node("ConvTranspose", [h, weight([8, 1, 2, 2]), weight([1])], kernel_shape=[2, 2], strides=[2, 2])
    nodes.append(helper.make_node("Sigmoid", [h], ["sigmoid_0.tmp_0"], name="head_sigmoid"))
    graph = helper.make_graph(
        nodes, "det", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))],
        [helper.make_tensor_value_info("sigmoid_0.tmp_0", TensorProto.FLOAT, [dims[0], 1, dims[2], dims[3]])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model
