"""The convolution, pool and pad rewrites: onnxruntime gives the same results before and after, on edge
values, and each applies only where a mobile-like backend takes every node it makes."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from test_rewrites import EDGE, assert_same, rnd, run

from mepkit import const, make_model, tensor
from mobile_ep import RuleRegistry, Support
from mobile_ep import model_io as mir
from mobile_ep.contract import Backend, OpRule, attr
from mobile_ep.passes import rewrites
from mobile_ep.passes.legalize import LegalizePass


class MobileRule(OpRule):
    """What NNAPI-like accelerators take: rank <= 4, 2-D convolutions and pools in floor mode, constant pads."""

    op_types = ("Add", "Sub", "Mul", "Div", "Max", "Min", "Abs", "Exp", "Sigmoid", "Tanh", "Relu", "Concat", "Slice",
                "Reshape", "Transpose", "Gather", "Gemm", "MatMul", "Conv", "MaxPool", "AveragePool", "DepthToSpace",
                "Pad", "Squeeze", "Identity", "Split")

    def check(self, unit, ctx):
        node = unit.target
        for value in [*node.inputs, *node.outputs]:
            rank = ctx.rank(value) if value is not None else 0
            if rank is None or rank > 4:
                return Support.no("rank > 4")
        if node.op_type in ("Conv", "MaxPool", "AveragePool") and ctx.rank(node.inputs[0]) != 4:
            return Support.no("only 2-D")
        if attr(node, "ceil_mode", 0):
            return Support.no("ceil_mode=1")
        if node.op_type == "Pad" and attr(node, "mode", "constant") != "constant":
            return Support.no("constant pads only")
        return Support.yes()


class Mobile(Backend):
    name = "mobile"

    def __init__(self, *chosen):
        super().__init__()
        self.chosen = chosen

    def build_rules(self):
        return RuleRegistry([MobileRule()])

    def rewrites(self):
        return self.chosen


def legalized(model_proto, rewrite, tmp_path, backend):
    import onnx

    model = mir.from_proto(model_proto)
    legal = LegalizePass(backend)
    legal(model)
    return onnx.load(mir.save(model, tmp_path / "legal.onnx")), legal


def check(tmp_path, proto, feeds, rewrite, exact=True, applied=1):
    before = run(proto, feeds)
    new_proto, legal = legalized(proto, rewrite, tmp_path, backend=Mobile(rewrite))
    assert len(legal.applied) == applied, legal.skipped
    after = run(new_proto, feeds)
    assert_same(before, after, exact)
    return new_proto, legal


def _one(op, inputs, x_shape, y_shape, inits=(), opset=17, **attrs):
    return make_model([helper.make_node(op, ["x", *inputs], ["y"], name="n", **attrs)], [tensor("x", x_shape)],
                      [tensor("y", y_shape)], inits, opset=opset)


def _edges(*shape):
    values = np.resize(np.concatenate([EDGE[:10], rnd(40)]), int(np.prod(shape)))  # finite edges, then random
    return values.reshape(shape).astype(np.float32)


@pytest.mark.parametrize("kw, out_len", [
    ({"kernel_shape": [3], "pads": [1, 1]}, 20),
    ({"kernel_shape": [3], "pads": [2, 0], "strides": [2], "dilations": [2]}, 9),
    ({"kernel_shape": [5], "group": 4, "auto_pad": "SAME_UPPER"}, 20),
])
def test_conv1d_to_conv2d_is_exact(tmp_path, kw, out_len):
    group = kw.get("group", 1)
    proto = _one("Conv", ["w", "b"], [1, 4, 20], [1, 6 if group == 1 else 8, out_len],
                 [const("w", rnd(6 if group == 1 else 8, 4 // group, kw["kernel_shape"][0])),
                  const("b", rnd(6 if group == 1 else 8))], **kw)
    # (the same sums; onnxruntime's 1-D and 2-D kernels order them differently)
    new, legal = check(tmp_path, proto, {"x": _edges(1, 4, 20)}, rewrites.ConvTo2D(), exact=False)
    assert legal.applied[0].into == ["Reshape", "Conv", "Reshape"]


@pytest.mark.parametrize("op, kw, out_len", [
    ("MaxPool", {"kernel_shape": [3], "strides": [2]}, 9),
    ("AveragePool", {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}, 10),
    ("AveragePool", {"kernel_shape": [2], "count_include_pad": 1, "pads": [1, 1]}, 21),
    ("MaxPool", {"kernel_shape": [3], "strides": [2], "ceil_mode": 1}, 10),  # ceil mode becomes end pads
    ("AveragePool", {"kernel_shape": [3], "strides": [2], "pads": [1, 0], "ceil_mode": 1}, 10),
])
def test_pool1d_to_pool2d_is_exact(tmp_path, op, kw, out_len):
    check(tmp_path, _one(op, [], [1, 3, 20], [1, 3, out_len], **kw), {"x": _edges(1, 3, 20)}, rewrites.ConvTo2D())


@pytest.mark.parametrize("spatial, k, bias", [((5, 7), 2, True), ((4, 4), 3, False), ((9,), 2, True), ((6,), 4, False)])
def test_convtranspose_kernel_equal_stride_to_depthtospace(tmp_path, spatial, k, bias):
    n = len(spatial)
    x_shape, y_shape = [1, 5, *spatial], [1, 3, *(d * k for d in spatial)]
    inits = [const("w", rnd(5, 3, *[k] * n))] + ([const("b", rnd(3, seed=1))] if bias else [])
    proto = _one("ConvTranspose", ["w", "b"] if bias else ["w"], x_shape, y_shape, inits,
                 kernel_shape=[k] * n, strides=[k] * n)
    new, legal = check(tmp_path, proto, {"x": _edges(*x_shape)}, rewrites.ConvTransposeToDepthToSpace(), exact=False)
    assert "ConvTranspose" not in {node.op_type for node in new.graph.node}
    assert ("DepthToSpace" in legal.applied[0].into) == (n == 2)


def test_convtranspose_with_pads_or_another_stride_is_left_alone(tmp_path):
    inits = [const("w", rnd(2, 2, 3, 3))]
    proto = _one("ConvTranspose", ["w"], [1, 2, 4, 4], [1, 2, 9, 9], inits, kernel_shape=[3, 3], strides=[2, 2])
    _, legal = legalized(proto, rewrites.ConvTransposeToDepthToSpace(), tmp_path,
                         backend=Mobile(rewrites.ConvTransposeToDepthToSpace()))
    assert legal.applied == [] and legal.skipped[0].reason == "the kernel is not square and equal to the stride"


@pytest.mark.parametrize("op, size, kw", [
    ("MaxPool", 13, {"kernel_shape": [3, 3], "strides": [2, 2]}),  # SqueezeNet's
    ("MaxPool", 12, {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 1, 0]}),
    ("MaxPool", 10, {"kernel_shape": [2, 2], "strides": [2, 2], "dilations": [2, 2]}),
    ("AveragePool", 13, {"kernel_shape": [3, 3], "strides": [2, 2]}),
    ("AveragePool", 12, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
])
def test_pool_ceil_mode_to_pads_is_exact(tmp_path, op, size, kw):
    import onnx

    probe = onnx.shape_inference.infer_shapes(_one(op, [], [1, 2, size, size], None, ceil_mode=1, **kw))
    out = [d.dim_value for d in probe.graph.output[0].type.tensor_type.shape.dim] or None
    proto = _one(op, [], [1, 2, size, size], out, ceil_mode=1, **kw)
    x = _edges(1, 2, size, size)
    x[0, 0, -1, -1] = -1e30  # a maximum over a window that hangs over the end is this value, not a pad's
    check(tmp_path, proto, {"x": x}, rewrites.PoolCeilToPads())


def test_average_pool_counting_its_pads_in_ceil_mode_is_left_alone(tmp_path):
    proto = _one("AveragePool", [], [1, 1, 7, 7], [1, 1, 3, 3], kernel_shape=[3, 3], strides=[2, 2],
                 count_include_pad=1, ceil_mode=1)
    _, legal = legalized(proto, rewrites.PoolCeilToPads(), tmp_path, backend=Mobile(rewrites.PoolCeilToPads()))
    assert legal.applied == [] and legal.skipped[0].reason.startswith("count_include_pad=1")


@pytest.mark.parametrize("mode", ["reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads, opset", [([0, 0, 3, 0, 0, 2], 17), ([0, 1, 1, 0, 2, 4], 17), ([0, 0, 1, 0, 0, 1], 11)])
def test_pad_modes_to_gather_are_exact(tmp_path, mode, pads, opset):
    x_shape = [1, 3, 5]
    y_shape = [s + pads[i] + pads[i + 3] for i, s in enumerate(x_shape)]
    proto = _one("Pad", ["pads"], x_shape, y_shape, [const("pads", np.array(pads, np.int64))], opset=opset, mode=mode)
    x = _edges(*x_shape)
    x[0, 0, 0], x[0, 1, -1] = np.nan, -0.0
    new, legal = check(tmp_path, proto, {"x": x}, rewrites.PadToGather())
    assert set(legal.applied[0].into) == {"Gather"}


def test_reflect_pad_wider_than_its_axis_is_left_alone(tmp_path):
    proto = _one("Pad", ["pads"], [1, 3], [1, 9], [const("pads", np.array([0, 3, 0, 3], np.int64))], mode="reflect")
    _, legal = legalized(proto, rewrites.PadToGather(), tmp_path, backend=Mobile(rewrites.PadToGather()))
    assert legal.applied == [] and legal.skipped[0].reason == "a reflect pad is not smaller than its axis"


@pytest.mark.parametrize("kw, in_hw", [
    ({"kernel_shape": [3, 3], "strides": [2, 2]}, (4, 5)),
    ({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}, (4, 4)),
    ({"kernel_shape": [4, 2], "strides": [2, 2], "pads": [1, 0, 2, 1]}, (3, 5)),
    ({"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}, (5, 5)),
    ({"kernel_shape": [2, 3], "strides": [3, 3], "dilations": [2, 1]}, (3, 4)),
])
def test_general_convtranspose_to_zero_insertion_and_conv(tmp_path, kw, in_hw):
    import onnx

    kh, kw_ = kw["kernel_shape"]
    inits = [const("w", rnd(4, 3, kh, kw_)), const("b", rnd(3, seed=2))]
    probe = onnx.shape_inference.infer_shapes(_one("ConvTranspose", ["w", "b"], [1, 4, *in_hw], None, inits, **kw))
    out = [d.dim_value for d in probe.graph.output[0].type.tensor_type.shape.dim]
    proto = _one("ConvTranspose", ["w", "b"], [1, 4, *in_hw], out, inits, **kw)
    rewrite = rewrites.ConvTransposeToConv()
    new, legal = check(tmp_path, proto, {"x": _edges(1, 4, *in_hw)}, rewrite, exact=False)
    assert "ConvTranspose" not in {n.op_type for n in new.graph.node}
    assert "Conv" in legal.applied[0].into


@pytest.mark.parametrize("kw", [{"kernel_shape": [4], "strides": [2], "pads": [1, 1]},  # a vocoder's upsampler
                                {"kernel_shape": [3], "strides": [3], "output_padding": [2]},
                                {"kernel_shape": [5], "dilations": [2], "pads": [2, 3]}])
def test_1d_convtranspose_to_zero_insertion_and_conv(tmp_path, kw):
    import onnx

    inits = [const("w", rnd(4, 3, kw["kernel_shape"][0])), const("b", rnd(3, seed=2))]
    probe = onnx.shape_inference.infer_shapes(_one("ConvTranspose", ["w", "b"], [1, 4, 9], None, inits, **kw))
    out = [d.dim_value for d in probe.graph.output[0].type.tensor_type.shape.dim]
    proto = _one("ConvTranspose", ["w", "b"], [1, 4, 9], out, inits, **kw)
    new, legal = check(tmp_path, proto, {"x": _edges(1, 4, 9)}, rewrites.ConvTransposeToConv(), exact=False)
    assert "ConvTranspose" not in {n.op_type for n in new.graph.node}


def test_convtranspose_with_pads_beyond_its_kernel_is_left_alone(tmp_path):
    proto = _one("ConvTranspose", ["w"], [1, 2, 6, 6], [1, 2, 7, 7], [const("w", rnd(2, 2, 2, 2))],
                 kernel_shape=[2, 2], strides=[2, 2], pads=[2, 2, 2, 2])
    rewrite = rewrites.ConvTransposeToConv()
    _, legal = legalized(proto, rewrite, tmp_path, backend=Mobile(rewrite))
    assert legal.applied == [] and legal.skipped[0].reason == "pads are larger than the dilated kernel extent"
