"""QDQ node units formed as ORT's selectors form them: each condition on its boundary, both directions.

1. a Relu/Clip between the target and its QuantizeLinear joins the unit when the quantization makes it
   redundant (``IsClipMadeRedundantByQ``);
2. a Conv unit needs an int32 bias (``ConvNodeGroupSelector``), and NNAPI needs its scale to be input scale ×
   weight scale with zero point 0;
3. the selectors' type rules (input and output types equal; int8 activations only with an int8 weight);
4. NNAPI's uint8 input outside QDQ form must come from the partition being built (``IsInternalQuantizationSupported``).
"""

from __future__ import annotations

import numpy as np
import pytest
from nnapi_compile_kit import compile_whole, emulate, ort_run
from nnapi_models import I8, U8, backend, model, node, qdq_binary, qdq_unary
from onnx import helper, numpy_helper

from mobile_ep.partitioning.units import build_node_units
from mobile_ep.testing import as_model, proposal, supports_all

X_SCALE, W_SCALE = 0.02, 0.01


def conv_act(act: str | None = "Relu", y_zp: int = 0, y_scale: float = 0.05, clip=(0.0, 6.0), bias_dtype=np.int32,
             bias_scale: float | None = None, extra_consumer: bool = False, x_type=U8, w_dtype=np.int8):
    """x(u8) → DQ → Conv(DQ(w), DQ(b)) → [Relu | Clip] → Q → y."""
    rng = np.random.default_rng(3)
    x_np = np.uint8 if x_type == U8 else np.int8
    inits = {
        "x_scale": np.array(X_SCALE, np.float32), "x_zp": np.array(128 if x_type == U8 else 0, x_np),
        "w_q": rng.integers(-60, 60, (4, 3, 3, 3)).astype(w_dtype), "w_scale": np.array(W_SCALE, np.float32),
        "w_zp": np.array(0, w_dtype),
        "y_scale": np.array(y_scale, np.float32), "y_zp": np.array(y_zp, x_np),
    }
    nodes = [node("DequantizeLinear", ["x", "x_scale", "x_zp"], ["x_dq"], name="dq_x"),
             node("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["w_dq"], name="dq_w")]
    conv_inputs = ["x_dq", "w_dq"]
    if bias_dtype is not None:
        scale = np.float32(X_SCALE) * np.float32(W_SCALE) if bias_scale is None else bias_scale
        inits.update({"b_q": rng.integers(-500, 500, 4).astype(bias_dtype), "b_scale": np.array(scale, np.float32)})
        nodes.append(node("DequantizeLinear", ["b_q", "b_scale"], ["b_dq"], name="dq_b"))
        conv_inputs.append("b_dq")
    elif bias_scale is not None:  # a float bias
        inits["b_f"] = rng.standard_normal(4).astype(np.float32)
        conv_inputs.append("b_f")
    nodes.append(node("Conv", conv_inputs, ["conv_out"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    outputs = {"y": x_type}
    last = "conv_out"
    if act == "Relu":
        nodes.append(node("Relu", ["conv_out"], ["act_out"], name="act"))
        last = "act_out"
    elif act == "Clip":
        inits.update({"lo": np.array(clip[0], np.float32), "hi": np.array(clip[1], np.float32)})
        nodes.append(node("Clip", ["conv_out", "lo", "hi"], ["act_out"], name="act"))
        last = "act_out"
    nodes.append(node("QuantizeLinear", [last, "y_scale", "y_zp"], ["y"], name="q_y"))
    if extra_consumer:
        nodes.append(node("Sigmoid", ["conv_out"], ["side"], name="side"))
        outputs["side"] = 1
    return model(nodes, {"x": ([1, 3, 8, 8], x_type)}, outputs, inits)


def unit_of(m, name: str):
    ir_model = as_model(m)
    units = build_node_units(ir_model.graph, backend().qdq_ops())
    target = next(n for n in ir_model.graph if n.name == name)
    unit = units[target]
    return unit.kind, sorted(n.name for n in unit.nodes)


def claimed(m) -> list[list[str]]:
    return [[n.name for n in p.nodes] for p in proposal(m, backend()).partitions]


def assert_within_one_step(m, seed: int = 0):
    """The NNAPI lowering of the whole model, emulated, is within one output step of onnxruntime's CPU result."""
    feeds = {"x": np.random.default_rng(seed).integers(0, 256, (1, 3, 8, 8)).astype(np.uint8)}
    expected = ort_run(m, feeds)["y"]
    got = emulate(compile_whole(m), feeds)["y"]
    assert np.abs(got.astype(np.int32) - expected.astype(np.int32)).max() <= 1


# -- 1. a redundant Relu / Clip ----------------------------------------------------------------------------
def test_relu_joins_the_unit_when_the_zero_point_is_the_type_minimum():
    m = conv_act("Relu", y_zp=0)
    assert unit_of(m, "conv") == ("qdq", ["act", "conv", "dq_b", "dq_w", "dq_x", "q_y"])
    assert claimed(m) == [["dq_x", "dq_w", "dq_b", "conv", "act", "q_y"]]
    assert_within_one_step(m)


def test_relu_is_not_redundant_with_a_higher_zero_point():
    m = conv_act("Relu", y_zp=1)
    assert unit_of(m, "conv") == ("single", ["conv"])
    answers = supports_all(m, backend())
    assert not answers["conv"] and answers["conv"].reason == "weight (input 1) is not a constant initializer"
    assert answers["act"] and answers["q_y"] and answers["dq_x"]


def test_clip_covering_the_quantized_range_joins_the_unit():
    m = conv_act("Clip", y_zp=0, y_scale=6 / 255, clip=(0.0, 6.0))
    assert unit_of(m, "conv")[0] == "qdq" and "act" in unit_of(m, "conv")[1]
    assert claimed(m) == [["dq_x", "dq_w", "dq_b", "conv", "act", "q_y"]]
    assert_within_one_step(m)


def test_clip_inside_the_quantized_range_is_not_redundant():
    m = conv_act("Clip", y_zp=0, y_scale=6 / 255, clip=(0.0, 5.9))  # 5.9 quantizes to 251 < 255
    assert unit_of(m, "conv") == ("single", ["conv"])
    assert not supports_all(m, backend())["conv"]


def test_relu_is_not_taken_when_the_target_has_another_consumer():
    m = conv_act("Relu", y_zp=0, extra_consumer=True)
    assert unit_of(m, "conv") == ("single", ["conv"])


# -- 2. the Conv bias ----------------------------------------------------------------------------------------
def test_conv_unit_with_int32_bias_of_input_times_weight_scale():
    m = conv_act(None, y_zp=128)
    assert unit_of(m, "conv")[0] == "qdq"
    assert claimed(m) == [["dq_x", "dq_w", "dq_b", "conv", "q_y"]]
    assert_within_one_step(m)


def test_conv_with_a_non_int32_bias_forms_no_unit():
    m = conv_act(None, y_zp=128, bias_dtype=np.int8)
    assert unit_of(m, "conv") == ("single", ["conv"])
    assert not supports_all(m, backend())["conv"]


def test_conv_with_a_float_bias_forms_no_unit():
    m = conv_act(None, y_zp=128, bias_dtype=None, bias_scale=1.0)
    assert unit_of(m, "conv") == ("single", ["conv"])


def test_conv_unit_with_another_bias_scale_is_refused():
    m = conv_act(None, y_zp=128, bias_scale=0.0003)
    assert unit_of(m, "conv")[0] == "qdq"  # ORT groups it ...
    answers = supports_all(m, backend())
    assert answers["conv"].reason == ("the bias (input 2) is quantized with scale 0.0003; NNAPI needs input scale × "
                                      "weight scale = 0.0002")  # ... but NNAPI would read the bias as 0.0002
    assert claimed(m) == []


# -- 3. the selectors' type rules ------------------------------------------------------------------------------
def test_unary_unit_needs_equal_input_and_output_types():
    same = qdq_unary("AveragePool", kernel_shape=[2, 2])
    assert unit_of(same, "target")[0] == "qdq" and claimed(same) == [["dq_x", "target", "q_y"]]
    mixed = qdq_unary("AveragePool", kernel_shape=[2, 2], out_zp=0)
    mixed.graph.initializer[3].CopyFrom(numpy_helper.from_array(np.array(0, np.int8), "y_zp"))
    mixed.graph.output[0].type.tensor_type.elem_type = I8
    assert unit_of(mixed, "target") == ("single", ["target"])
    answers = supports_all(mixed, backend())
    assert answers["target"] and answers["dq_x"] and not answers["q_y"]  # the float pool alone; Q to int8 refused


def test_data_movement_unit_needs_equal_scales():
    shape = {"extra_inputs": ["shape"], "extra_inits": {"shape": np.array([1, -1])}}
    same = qdq_unary("Reshape", **shape)
    assert unit_of(same, "target")[0] == "qdq"
    differs = qdq_unary("Reshape", out_scale=0.04, **shape)
    assert unit_of(differs, "target") == ("single", ["target"])
    # not grouped, the Reshape is a float node between DEQUANTIZE and QUANTIZE: all three still taken
    assert claimed(differs) == [["dq_x", "target", "q_y"]]


@pytest.mark.parametrize("op", ["Add", "Mul"])
def test_binary_unit_needs_equal_input_types(op):
    assert unit_of(qdq_binary(op), "target")[0] == "qdq"
    assert unit_of(qdq_binary(op, b_type=I8), "target") == ("single", ["target"])


def test_conv_unit_with_int8_activations_needs_an_int8_weight():
    assert unit_of(conv_act(None, x_type=I8, y_zp=0), "conv")[0] == "qdq"
    assert unit_of(conv_act(None, x_type=I8, y_zp=0, w_dtype=np.uint8), "conv") == ("single", ["conv"])


# -- 4. uint8 data outside QDQ form, from the partition being built ------------------------------------------------
def _internal_concat(middle: str):
    """QLinearConv → a (u8); a → DequantizeLinear → *middle* → QuantizeLinear → b (u8); Concat(a, b)."""
    inits = {"s": np.array(0.02, np.float32), "z": np.array(128, np.uint8),
             "w": np.ones((3, 3, 1, 1), np.uint8), "ws": np.array(0.01, np.float32), "wz": np.array(0, np.uint8),
             "qs": np.array(1 / 256, np.float32), "qz": np.array(0, np.uint8)}
    nodes = [node("QLinearConv", ["x", "s", "z", "w", "ws", "wz", "s", "z"], ["a"], name="qconv"),
             node("DequantizeLinear", ["a", "s", "z"], ["a_f"], name="dq"),
             node(middle, ["a_f"], ["m"], name="middle"),
             node("QuantizeLinear", ["m", "s", "z"], ["b"], name="q"),
             node("Concat", ["a", "b"], ["y"], name="concat", axis=1)]
    return model(nodes, {"x": ([1, 3, 4, 4], U8)}, {"y": U8}, inits)


def test_uint8_concat_reading_the_group_being_built_is_claimed():
    m = _internal_concat("Identity")  # (an op ORT's selectors do not group, so DQ and Q stay single nodes)
    assert claimed(m) == [["qconv", "dq", "middle", "q", "concat"]]


def test_uint8_concat_reading_an_earlier_partition_is_refused():
    # Sinh stays on the CPU, so the QuantizeLinear after it and the Concat are reached in a second wave, when
    # the first partition (holding the QLinearConv) is closed: ORT's EP no longer counts `a` as internal.
    m = _internal_concat("Sinh")
    result = proposal(m, backend())
    assert [[n.name for n in p.nodes] for p in result.partitions] == [["qconv", "dq"], ["q"]]
    reason = next(p.reason for n, p in result.placements.items() if n.name == "concat")
    assert reason == ("nnapi: uint8 input 0 comes from QLinearConv 'qconv', which is in an earlier partition: NNAPI "
                      "takes uint8 data outside QDQ form only from the partition being built")


# -- the group's shape (CanCreateNodeGroup, CheckQDQNodes) --------------------------------------------------------
def test_a_dequantize_feeding_two_nodes_forms_no_unit():
    m = conv_act(None, y_zp=128)
    m.graph.node.append(node("Identity", ["x_dq"], ["copy"], name="copy"))
    m.graph.output.append(helper.make_tensor_value_info("copy", 1, None))
    assert unit_of(m, "conv") == ("single", ["conv"])


def test_a_target_output_that_is_also_a_graph_output_forms_no_unit():
    m = conv_act(None, y_zp=128)
    m.graph.output.append(helper.make_tensor_value_info("conv_out", 1, None))
    assert unit_of(m, "conv") == ("single", ["conv"])


@pytest.mark.parametrize("opset, grouped", [(13, True), (21, True), (22, False)])
def test_max_pool_is_grouped_only_in_its_opset_12_definition(opset, grouped):
    m = qdq_unary("MaxPool", kernel_shape=[2, 2], opset=opset)
    assert (unit_of(m, "target")[0] == "qdq") is grouped
