"""QDQ node units: taken or left whole, with ORT's quantized I/O rules."""

from __future__ import annotations

import numpy as np
import pytest
from nnapi_models import I8, U8, at_api, backend, model, node, qdq_binary, qdq_conv, qdq_unary, support

from mobile_ep import RuleContext
from mobile_ep.testing import as_model, proposal, supports_all

QDQ_REJECTED = ("NNAPI does not take this op as a QDQ node unit (DequantizeLinear → op → QuantizeLinear); "
                "the whole unit stays on the CPU")


def test_qdq_conv_is_claimed_whole():
    m = qdq_conv()
    answers = supports_all(m, backend())
    assert set(answers) == {"dq_x", "dq_w", "dq_b", "conv", "q_y"}
    assert all(answers.values()), answers
    result = proposal(m, backend())
    (partition,) = result.partitions
    assert [n.name for n in partition.nodes] == ["dq_x", "dq_w", "dq_b", "conv", "q_y"]


def test_qdq_conv_is_one_unit():
    ir_model = as_model(qdq_conv())
    be = backend()
    ctx = RuleContext(ir_model, be)
    from mobile_ep.partitioning.units import build_node_units

    units = build_node_units(ir_model.graph, be.qdq_ops())
    conv = next(n for n in ir_model.graph if n.op_type == "Conv")
    unit = units[conv]
    assert unit.kind == "qdq" and len(unit.nodes) == 5
    assert be.supports(unit, ctx)


def test_qdq_conv_rejected_whole_with_int8_activations():
    m = qdq_conv(act=np.int8)
    answers = supports_all(m, backend())
    reasons = {answer.reason for answer in answers.values()}
    assert reasons == {"quantized input 0 is int8; NNAPI takes uint8 activations only (no int8/s8s8)"}
    assert proposal(m, backend()).partitions == []


def test_qdq_conv_per_channel_weight():
    per_channel = qdq_conv(w_scale=[0.01, 0.02, 0.03, 0.04], w_zp=[0, 0, 0, 0])
    assert support(per_channel, "conv")
    assert support(per_channel, "conv", be=at_api(28)).reason.startswith(
        "a per-channel quantized weight needs NNAPI feature level 3")
    assert support(qdq_conv(w_zp=5), "conv").reason == \
        "the int8 weight (input 1) has non-zero zero points; NNAPI needs symmetric (zero point 0)"


def test_qdq_unit_for_an_op_nnapi_does_not_accept():
    m = qdq_unary("Sigmoid")
    answers = supports_all(m, backend())
    assert {a.reason for a in answers.values()} == {QDQ_REJECTED}
    # the float Sigmoid alone would be fine, so it is the unit that is refused
    assert support(model(node("Sigmoid", ["x"]), {"x": [1, 3, 8, 8]}))
    assert proposal(m, backend()).partitions == []


def test_qdq_max_pool_unit_is_not_accepted():
    assert support(qdq_unary("MaxPool", kernel_shape=[2, 2]), "target").reason == QDQ_REJECTED


@pytest.mark.parametrize("op", ["Add", "Mul"])
def test_qdq_add_mul_u8u8(op):
    m = qdq_binary(op)
    assert support(m, "target", be=at_api(27))
    # ORT's binary selector groups only equal input and output types: a u8/s8 pair forms no unit, the
    # float op is asked alone and the int8 DequantizeLinear stays on the CPU.
    mixed = supports_all(qdq_binary(op, b_type=I8), backend())
    assert mixed["target"] and not mixed["dq_b"] and mixed["dq_a"]


def test_qdq_sub_is_rejected_as_a_unit():
    assert support(qdq_binary("Sub"), "target").reason == QDQ_REJECTED


def test_qdq_matmul_and_gemm():
    matmul = qdq_binary("MatMul", a_shape=(2, 4), b_shape=(4, 3), b_const=True, b_type=I8)
    assert support(matmul, "target")
    dynamic_b = qdq_binary("MatMul", a_shape=(2, 4), b_shape=(4, 3), b_const=False)
    assert support(dynamic_b, "target").reason == "B (input 1) is not a constant initializer"
    per_channel = qdq_binary("MatMul", a_shape=(2, 4), b_shape=(4, 3), b_const=True, b_type=I8,
                             b_scale=[0.1, 0.1, 0.1], b_zp=[0, 0, 0])
    assert support(per_channel, "target").reason == \
        "the MatMul weight (input 1) is quantized per channel; only per-tensor is supported"
    gemm = qdq_binary("Gemm", a_shape=(2, 4), b_shape=(3, 4), b_const=True, b_type=I8, transB=1)
    assert support(gemm, "target")
    batched = qdq_binary("MatMul", a_shape=(2, 2, 4), b_shape=(2, 4, 3), b_const=True)
    assert support(batched, "target").reason == "3-D+ inputs are supported for a float MatMul only, not QDQ MatMul"


def test_qdq_softmax_needs_output_scale_1_over_256():
    good = qdq_unary("Softmax", shape=(1, 10), out_scale=1 / 256, out_zp=0, axis=-1)
    assert support(good, "target")
    bad = qdq_unary("Softmax", shape=(1, 10), out_scale=0.01, out_zp=0, axis=-1)
    assert support(bad, "target").reason == "output scale is 0.01; needs 0.00390625"


def test_qdq_average_pool_keeps_scale():
    assert support(qdq_unary("AveragePool", kernel_shape=[2, 2]), "target")
    changed = qdq_unary("AveragePool", out_scale=0.04, kernel_shape=[2, 2])
    assert support(changed, "target").reason == "output scale 0.04 differs from input scale 0.02; they must be equal"


def test_qdq_transpose_and_reshape():
    assert support(qdq_unary("Transpose", perm=[0, 2, 3, 1]), "target", be=at_api(28))
    reshape = qdq_unary("Reshape", extra_inputs=["shape"], extra_inits={"shape": np.array([1, -1])})
    assert support(reshape, "target", be=at_api(27))


def _qdq_concat(second_scale):
    inits = {"s1": np.float32(0.02), "z1": np.uint8(128), "s2": np.float32(second_scale), "z2": np.uint8(128),
             "ys": np.float32(0.02), "yz": np.uint8(128)}
    nodes = [node("DequantizeLinear", ["a", "s1", "z1"], ["a_dq"], name="dq_a"),
             node("DequantizeLinear", ["b", "s2", "z2"], ["b_dq"], name="dq_b"),
             node("Concat", ["a_dq", "b_dq"], ["cat"], name="target", axis=1),
             node("QuantizeLinear", ["cat", "ys", "yz"], ["y"], name="q_y")]
    return model(nodes, {"a": ([1, 2], U8), "b": ([1, 3], U8)}, {"y": U8}, inits)


def test_qdq_concat_scales_below_feature_level_3():
    assert support(_qdq_concat(0.05), "target", be=at_api(29))
    assert support(_qdq_concat(0.02), "target", be=at_api(28))
    assert support(_qdq_concat(0.05), "target", be=at_api(28)).reason == (
        "input 1 scale is 0.05; needs 0.02 (all inputs and the output need one scale and zero point below "
        "feature level 3; target is API 28)")


def test_uint8_transpose_after_a_qdq_unit_is_outside_the_partition():
    # ORT records only the unit's target outputs as "in the group": a Q output does not count.
    base = qdq_conv()
    base.graph.node.append(node("Transpose", ["y"], ["t"], name="t", perm=[0, 2, 3, 1]))
    base.graph.output[0].name = "t"
    assert support(base, "t").reason == \
        "uint8 input 0 is produced by the QuantizeLinear of a QDQ unit, which ORT does not count as inside the partition"
