"""Rule by rule: what the example NPU claims, why it declines the rest, and its options."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from mobile_ep import pipeline as api
from mobile_ep.testing import node_support, run_case, supports_all
from mobile_ep_example.backend import ExampleNpu


def model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def tensor(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def weight(name, shape):
    return numpy_helper.from_array(np.ones(shape, np.float32), name)


def conv_model(weight_is_constant=True, auto_pad="NOTSET", rank=4):
    x_shape = [1, 3, 8, 8][: rank]
    w_shape = [4, 3, 3, 3][: rank]
    attrs = {"auto_pad": auto_pad} if auto_pad != "NOTSET" else {"pads": [1] * (2 * (rank - 2))}
    inits = [weight("w", w_shape)] if weight_is_constant else []
    inputs = [tensor("x", x_shape)] + ([] if weight_is_constant else [tensor("w", w_shape)])
    y_shape = [1, 4, 8, 8][: rank]  # pads of 1 (or SAME) around a 3x3 kernel keep the spatial size
    return model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", **attrs)], inputs,
                 [tensor("y", y_shape)], inits)


@pytest.fixture
def npu():
    return ExampleNpu()


def test_conv_with_constant_weights_is_claimed(npu):
    assert node_support(conv_model(), npu)
    assert node_support(conv_model(auto_pad="SAME_UPPER"), npu)


@pytest.mark.parametrize(("kwargs", "reason"), [
    ({"weight_is_constant": False}, "the weight (input 1) is not a constant initializer"),
    ({"rank": 3}, "only 2-D convolutions (4-D input) are supported, not 1-D"),
])
def test_conv_declines_with_a_reason(npu, kwargs, reason):
    answer = node_support(conv_model(**kwargs), npu)
    assert not answer and answer.reason == reason


def test_dtype_dynamic_shape_and_rank_are_checked_for_every_op(npu):
    ints = model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [2], TensorProto.INT32)],
                 [tensor("y", [2], TensorProto.INT32)])
    assert node_support(ints, npu).reason == "input 0 is INT32, not float32"
    dynamic = model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", ["n", 2])], [tensor("y", ["n", 2])])
    assert node_support(dynamic, npu).reason == "input 0 has a dynamic or unknown shape"
    rank5 = model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [1] * 5)], [tensor("y", [1] * 5)])
    assert node_support(rank5, npu).reason == "input 0 has rank 5; the NPU handles rank <= 4"


def test_unknown_op_is_declined_by_the_core_with_a_reason(npu):
    m = model([helper.make_node("Sigmoid", ["x"], ["y"])], [tensor("x", [2])], [tensor("y", [2])])
    assert node_support(m, npu).reason == "example has no rule for Sigmoid"


def test_allow_broadcast_option(npu):
    m = model([helper.make_node("Add", ["a", "b"], ["y"], name="add")], [tensor("a", [2, 3]), tensor("b", [3])],
              [tensor("y", [2, 3])])
    assert node_support(m, npu)
    strict = npu.configure({"allow_broadcast": "false"})
    assert node_support(m, strict).reason == "inputs have shapes [2, 3] and [3] and allow_broadcast is off"


def test_maxpool_with_indices_is_declined(npu):
    m = model([helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2])], [tensor("x", [1, 1, 4, 4])],
              [tensor("y", [1, 1, 2, 2]), tensor("i", [1, 1, 2, 2], TensorProto.INT64)])
    assert node_support(m, npu).reason == "the Indices output is not supported"


def test_a_whole_block_is_one_partition_and_compiles(npu, tmp_path):
    m = model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
               helper.make_node("Relu", ["c"], ["r"], name="relu"),
               helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
               helper.make_node("Mul", ["p", "p"], ["y"], name="square")],
              [tensor("x", [1, 3, 8, 8])], [tensor("y", [1, 4, 4, 4])], [weight("w", [4, 3, 3, 3])])
    assert all(supports_all(m, npu).values())
    path = tmp_path / "block.onnx"
    path.write_bytes(m.SerializeToString())
    from mobile_ep.testing import run_model

    result = run_model(npu, path)
    assert (result.status, result.partitions, result.emulated) == ("passed", 1, 1), result.detail


def test_min_partition_nodes_drops_small_partitions(mobile_ep_register, tmp_path):
    m = model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
               helper.make_node("Sigmoid", ["r"], ["s"], name="sigmoid"),
               helper.make_node("Relu", ["s"], ["t"], name="relu2"),
               helper.make_node("Relu", ["t"], ["y"], name="relu3")],
              [tensor("x", [1, 4])], [tensor("y", [1, 4])])
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    plugins = mobile_ep_register(ExampleNpu())
    report = api.check(path, ["example"], plugins=plugins).backends["example"]
    assert [len(p.nodes) for p in report.partitions] == [1, 2]
    report = api.check(path, ["example"], plugins=plugins,
                       options={"example": {"min_partition_nodes": "2"}}).backends["example"]
    assert [len(p.nodes) for p in report.partitions] == [2]
    assert "fewer than min_partition_nodes=2" in next(u.reason for u in report.unsupported if u.node == "relu")


def test_cli_with_the_backend_registered_for_this_test_only(mobile_ep_register, mobile_ep_cli, tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(conv_model().SerializeToString())
    mobile_ep_register(ExampleNpu())
    result = mobile_ep_cli("check", path, "--ep", "example", "--json")
    assert result.exit_code == 0, result.output
    assert '"supported_nodes": 1' in result.stdout
    assert mobile_ep_cli("list").stdout.startswith("example ")


def test_nothing_is_left_registered_after_a_test(mobile_ep_plugins):
    assert mobile_ep_plugins.backends() == {}


def test_a_wrong_emulator_is_caught_by_the_kit(npu, monkeypatch):
    from mobile_ep.testing import onnx_node_cases
    from mobile_ep_example import emulator
    from mobile_ep_example.enpu import Op

    monkeypatch.setitem(emulator._KERNELS, Op.RELU, lambda args, params, shape: np.abs(args[0]))
    case = next(c for c in onnx_node_cases() if c.name == "test_relu")
    result = run_case(npu, case)
    assert result.status == "failed" and "values differ" in result.detail


def test_conformance_command_passes(mobile_ep_register, mobile_ep_cli):
    mobile_ep_register(ExampleNpu())
    result = mobile_ep_cli("conformance", "--ep", "example")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("example 0.1.0: ") and " 0 failed" in result.stdout
