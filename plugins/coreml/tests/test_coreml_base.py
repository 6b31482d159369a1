"""The checks every op goes through (rules/_base.py), in ORT's order."""

from __future__ import annotations

import numpy as np
from coreml_testing import BOTH, F16, I32, I64, MLP, NN, F, const, coreml, model, no, single, x, yes
from onnx import helper

from mobile_ep_coreml.rules import CoreMLRule


def relu(shape=(1, 3, 4, 4), elem_type=F, opset=17):
    return single("Relu", [x(shape, elem_type)], opset=opset)


@BOTH
def test_plain_float_relu_is_supported(backend):
    yes(relu(), backend)


def test_format_flatten_and_lrn_are_neuralnetwork_only():
    flat = single("Flatten", [x()])
    yes(flat, NN)
    no(flat, MLP, "needs model_format=NeuralNetwork")


def test_format_mlprogram_only_op_under_neuralnetwork():
    gelu = single("Gelu", [x()], opset=20)
    yes(gelu, MLP)
    no(gelu, NN, "needs the ML Program format (model_format=MLProgram)")


@BOTH
def test_opset_below_the_minimum(backend):
    no(relu(opset=5), backend, "opset 5; ORT's CoreML EP takes it from opset 6")


@BOTH
def test_input_without_shape(backend):
    no(relu(shape=None), backend, "input 0 ('x') has no known shape")


@BOTH
def test_rank_6_input(backend):
    no(relu(shape=(1, 1, 1, 1, 1, 2)), backend, "has rank 6; Core ML takes rank <= 5")


@BOTH
def test_rank_5_input_is_fine(backend):
    yes(relu(shape=(1, 1, 1, 1, 2)), backend)


@BOTH
def test_zero_dim_input(backend):
    no(relu(shape=(1, 0, 4)), backend, "has a 0 dim [1,0,4]; Core ML takes no empty tensors")


@BOTH
def test_dynamic_dims_are_fine_by_default(backend):
    yes(relu(shape=("N", 3, 4, 4)), backend)


def test_dynamic_dims_rejected_with_require_static_input_shapes():
    strict = coreml(require_static_input_shapes="true")
    reason = no(relu(shape=("N", 3, 4, 4)), strict, "require_static_input_shapes is set")
    assert "[N,3,4,4]" in reason
    yes(relu(), strict)


def test_every_input_is_checked_not_only_input_0():
    # the second input of Add has rank 6
    m = single("Add", [x((2,)), x((1, 1, 1, 1, 1, 2), name="b")])
    no(m, MLP, "input 1 ('b') has rank 6")


def test_default_type_check_neuralnetwork_float32_only():
    no(relu(elem_type=F16), NN, "input 0 ('x') is float16; NeuralNetwork takes float32 only (ML Program also takes float16)")
    no(relu(elem_type=I32), NN, "is int32; NeuralNetwork takes float32 only")


def test_default_type_check_mlprogram_float_float16_int64():
    yes(relu(elem_type=F16), MLP)
    yes(single("Identity", [x((2,), I64)]), MLP)
    no(relu(elem_type=I32), MLP, "is int32; ML Program takes float32, float16 or int64")


def test_constant_node_output_counts_as_a_constant_initializer():
    # ORT turns Constant nodes into initializers when it loads a model.
    shape = helper.make_node("Constant", [], ["s"], value=helper.make_tensor("v", 7, [2], [2, 6]))
    reshape = helper.make_node("Reshape", ["x", "s"], ["y"], name="n")
    yes(model([shape, reshape], [x((3, 4))]), MLP)


def test_overridable_initializer_is_not_constant():
    m = single("Reshape", [x((3, 4)), ("s", np.array([2, 6], np.int64), "input")])
    no(m, MLP, "shape (input 1) is not a constant initializer")
    yes(single("Reshape", [x((3, 4)), const("s", [2, 6], np.int64)]), MLP)


def test_conditions_render_declarative_attributes():
    rules = MLP.rules
    flatten = rules.lookup("", "Flatten", 17)
    assert isinstance(flatten, CoreMLRule)
    text = "; ".join(flatten.conditions("Flatten"))
    assert "NeuralNetwork only" in text and "trivial" in text and "Input not a scalar" in text
    gelu = "; ".join(rules.lookup("", "Gelu", 20).conditions("Gelu"))
    assert "ML Program only" in gelu
    reshape = "; ".join(rules.lookup("", "Reshape", 17).conditions("Reshape"))
    assert "opset 5–27" in reshape and "NeuralNetwork float32 only; ML Program float32, float16 or int64" in reshape


def test_every_rule_documents_its_conditions():
    for domain, op_type, rule in MLP.rules:
        items = rule.conditions(op_type)
        assert items, f"{domain}:{op_type} has no documented conditions"
        assert all(item and not item.endswith(".") for item in items), (op_type, items)
