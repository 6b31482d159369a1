"""A small built-in sample model, so ``mobile-ep convert --ep nnapi`` works with no model at hand.

A MobileNet-style CNN (conv/batch-norm/relu stem, depthwise-separable blocks, a residual ``Sum``, a
HardSwish, global pooling and a classifier), with deterministic weights.  It exercises what makes real
models split into partitions: ops one backend takes and another does not.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["SAMPLE_NAME", "build_sample", "write_sample"]

SAMPLE_NAME = "mobilenet_sample"
_OPSET = 14
_IR_VERSION = 8


def build_sample(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def weight(name: str, shape: tuple[int, ...], scale: float = 0.2) -> str:
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def conv_bn_relu(x: str, name: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1,
                     act: str | None = "Relu") -> str:
        w = weight(f"{name}.w", (cout, cin // group, k, k), scale=(2.0 / (cin // group * k * k)) ** 0.5)
        nodes.append(helper.make_node("Conv", [x, w], [f"{name}.conv"], name=f"{name}/Conv", kernel_shape=[k, k],
                                      strides=[stride, stride], pads=[k // 2] * 4, group=group))
        inits.append(numpy_helper.from_array(rng.uniform(0.5, 1.5, cout).astype(np.float32), f"{name}.bn.scale"))
        inits.append(numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), f"{name}.bn.bias"))
        inits.append(numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), f"{name}.bn.mean"))
        inits.append(numpy_helper.from_array(rng.uniform(0.5, 1.5, cout).astype(np.float32), f"{name}.bn.var"))
        nodes.append(helper.make_node(
            "BatchNormalization",
            [f"{name}.conv", f"{name}.bn.scale", f"{name}.bn.bias", f"{name}.bn.mean", f"{name}.bn.var"],
            [f"{name}.bn"], name=f"{name}/BatchNormalization", epsilon=1e-5))
        if act is None:
            return f"{name}.bn"
        nodes.append(helper.make_node(act, [f"{name}.bn"], [f"{name}.act"], name=f"{name}/{act}"))
        return f"{name}.act"

    x = conv_bn_relu("input", "stem", 3, 16, 3, stride=2)
    # Depthwise-separable block with a residual connection (the Sum).
    y = conv_bn_relu(x, "block1.dw", 16, 16, 3, group=16)
    y = conv_bn_relu(y, "block1.pw", 16, 16, 1, act=None)
    nodes.append(helper.make_node("Sum", [x, y], ["block1.out"], name="block1/Sum"))
    # Expansion block with a HardSwish activation.
    z = conv_bn_relu("block1.out", "block2.expand", 16, 32, 1, act="HardSwish")
    z = conv_bn_relu(z, "block2.dw", 32, 32, 3, stride=2, group=32)
    z = conv_bn_relu(z, "block2.project", 32, 24, 1, act=None)
    nodes.append(helper.make_node("GlobalAveragePool", [z], ["pool"], name="head/GlobalAveragePool"))
    nodes.append(helper.make_node("Flatten", ["pool"], ["flat"], name="head/Flatten", axis=1))
    fc_w = weight("head.fc.w", (24, 10), scale=0.3)
    fc_b = weight("head.fc.b", (10,), scale=0.1)
    nodes.append(helper.make_node("Gemm", ["flat", fc_w, fc_b], ["logits"], name="head/Gemm"))
    nodes.append(helper.make_node("Softmax", ["logits"], ["probabilities"], name="head/Softmax", axis=-1))

    graph = helper.make_graph(
        nodes, SAMPLE_NAME,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 96, 96])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [1, 10])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)], ir_version=_IR_VERSION,
                              producer_name="mobile-ep", doc_string="mobile-ep's built-in sample CNN")
    onnx.checker.check_model(model)
    return model


def write_sample(directory: str | pathlib.Path) -> pathlib.Path:
    """Write the sample to ``directory/mobilenet_sample.onnx`` (atomically) and return the path."""
    from mobile_ep.model_io import atomic_path

    target = pathlib.Path(directory) / f"{SAMPLE_NAME}.onnx"
    with atomic_path(target) as tmp:
        tmp.write_bytes(build_sample().SerializeToString())
    return target
