"""activation.py, quickgelu.py, unary.py, binary.py, logical.py, where.py, clip.py."""

from __future__ import annotations

import numpy as np
import pytest
from coreml_testing import BOTH, F16, I32, I64, MLP, NN, B, F, const, no, single, x, yes


# -- activation.py --------------------------------------------------------------------------------------
@BOTH
@pytest.mark.parametrize("op", ["Sigmoid", "Tanh", "Relu", "LeakyRelu"])
def test_basic_activations_both_formats(backend, op):
    yes(single(op, [x()]), backend)


@BOTH
def test_activation_min_opset_6(backend):
    no(single("Sigmoid", [x()], opset=1), backend, "takes it from opset 6")


@pytest.mark.parametrize(("op", "opset"), [("Gelu", 20), ("Elu", 17), ("Softplus", 17)])
def test_mlprogram_only_activations(op, opset):
    yes(single(op, [x()], opset=opset), MLP)
    no(single(op, [x()], opset=opset), NN, "needs the ML Program format")


def test_softplus_has_no_opset_minimum():
    yes(single("Softplus", [x()], opset=1), MLP)


@BOTH
def test_hardsigmoid_float_and_float16_only(backend):
    yes(single("HardSigmoid", [x()]), backend)
    no(single("HardSigmoid", [x((2, 3), I64)]), MLP, "is int64; ML Program takes float32 or float16")


def test_hardsigmoid_float16_mlprogram_only():
    yes(single("HardSigmoid", [x(elem_type=F16)]), MLP)
    no(single("HardSigmoid", [x(elem_type=F16)]), NN, "NeuralNetwork takes float32 only")


@BOTH
def test_prelu_per_channel_and_single_slope(backend):
    yes(single("PRelu", [x((1, 3, 4, 4)), const("s", np.ones((3, 1, 1)))]), backend)
    yes(single("PRelu", [x((1, 3, 4, 4)), const("s", [0.2])]), backend)
    yes(single("PRelu", [x((3, 4, 4)), const("s", [0.2])]), backend)


@BOTH
def test_prelu_rank(backend):
    no(single("PRelu", [x((2, 3)), const("s", [0.2])]), backend, "X has rank 2; Core ML's prelu takes rank 3 or 4")


@BOTH
def test_prelu_dynamic_channel(backend):
    no(single("PRelu", [x((1, "C", 4, 4)), const("s", [0.2])]), backend, "channel dim (shape[-3]) is dynamic")


@BOTH
def test_prelu_slope_not_constant(backend):
    no(single("PRelu", [x(), x((3, 1, 1), name="s")]), backend, "slope (input 1) is not a constant initializer")


@BOTH
def test_prelu_slope_shape(backend):
    no(single("PRelu", [x(), const("s", np.ones((1, 4, 4)))]), backend, "slope has shape [1, 4, 4]")


@BOTH
def test_prelu_single_slope_needs_more_than_one_channel(backend):
    no(single("PRelu", [x((1, 1, 4, 4)), const("s", [0.2])]), backend, "single slope value with one channel")


# -- quickgelu.py -----------------------------------------------------------------------------------------
def test_quickgelu_mlprogram_only():
    m = single("QuickGelu", [x()], outputs=[("y", F, [1, 3, 4, 4])], domain="com.microsoft", alpha=1.702)
    yes(m, MLP)
    no(m, NN, "needs the ML Program format")


def test_quickgelu_needs_a_shape():
    m = single("QuickGelu", [x(None)], outputs=[("y", F, None)], domain="com.microsoft")
    no(m, MLP, "has no known shape")


# -- unary.py ---------------------------------------------------------------------------------------------
@BOTH
@pytest.mark.parametrize("op", ["Sqrt", "Reciprocal"])
def test_unary_both_formats(backend, op):
    yes(single(op, [x()]), backend)


@pytest.mark.parametrize("op", ["Erf", "Round", "Exp", "Sin", "Cos", "Ceil"])
def test_unary_mlprogram_only(op):
    yes(single(op, [x()]), MLP)
    no(single(op, [x()]), NN, "needs the ML Program format (model_format=MLProgram)")


def test_unary_type_check():
    no(single("Sqrt", [x(elem_type=F16)]), NN, "is float16; NeuralNetwork takes float32 only")
    yes(single("Sqrt", [x(elem_type=F16)]), MLP)


# -- binary.py ------------------------------------------------------------------------------------------
@BOTH
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow"])
def test_binary_both_formats(backend, op):
    yes(single(op, [x(), x((1, 3, 1, 1), name="b")]), backend)


@BOTH
def test_binary_min_opset_7(backend):
    no(single("Add", [x(), x(name="b")], opset=6), backend, "opset 6; ORT's CoreML EP takes it from opset 7")


def test_integer_div_mlprogram_only():
    m = single("Div", [x((4,), I64), x((4,), I64, "b")])
    yes(m, MLP)
    no(m, NN, "is int64; NeuralNetwork takes float32 only (ML Program also takes int64)")
    no(single("Div", [x((4,), I32), x((4,), I32, "b")]), MLP, "is int32; ML Program takes float32, float16 or int64")


@BOTH
def test_pow_needs_one_type(backend):
    no(single("Pow", [x(), x((1,), I64, "e")]), backend, "base is float32 and exponent int64")


def test_max_mlprogram_only():
    m = single("Max", [x(), x(name="b"), x(name="c")])
    yes(m, MLP)
    no(m, NN, "needs the ML Program format")


def test_max_opset_7_model_has_max_6():
    # ORT checks the since-version (>= 7); an opset-7 model's Max is Max-6.
    no(single("Max", [x(), x(name="b")], opset=7), MLP, "opset 7; ORT's CoreML EP takes it from opset 8")
    yes(single("Max", [x(), x(name="b")], opset=8), MLP)


def test_max_single_input():
    no(single("Max", [x()]), MLP, "a single input")


# -- logical.py -----------------------------------------------------------------------------------------
def test_and():
    m = single("And", [x((2, 3), B, "a"), x((2, 3), B, "b")])
    yes(m, MLP)
    no(m, NN, "needs the ML Program format")


def test_and_of_non_bool():
    m = single("And", [x((2, 3), B, "a"), x((2, 3), F, "b")])
    # onnx shape inference does not check types, ORT's rule does
    no(m, MLP, "input 1 ('b') is float32; Core ML's logical_and takes bool only")


# -- where.py --------------------------------------------------------------------------------------------
def test_where():
    m = single("Where", [x((2, 3), B, "c"), x((2, 3), F, "a"), x((2, 3), F, "b")])
    yes(m, MLP)
    no(m, NN, "needs the ML Program format")
    yes(single("Where", [x((2, 3), B, "c"), x((2, 3), F16, "a"), x((2, 3), F16, "b")]), MLP)


def test_where_types():
    no(single("Where", [x((2, 3), I64, "c"), x((2, 3), F, "a"), x((2, 3), F, "b")]), MLP,
       "condition (input 0) is int64; Core ML's select takes bool only")
    no(single("Where", [x((2, 3), B, "c"), x((2, 3), I64, "a"), x((2, 3), I64, "b")]), MLP,
       "X is int64 and Y int64; Core ML's select takes both float32 or both float16")


# -- clip.py ---------------------------------------------------------------------------------------------
@BOTH
def test_clip_constant_bounds(backend):
    yes(single("Clip", [x(), const("lo", 0.0), const("hi", 6.0)]), backend)
    yes(single("Clip", [x(), const("lo", 0.0)]), backend)
    yes(single("Clip", [x(), None, const("hi", 6.0)]), backend)
    yes(single("Clip", [x()]), backend)


@BOTH
def test_clip_attributes_before_opset_11(backend):
    yes(single("Clip", [x()], opset=10, min=0.0, max=6.0), backend)
    no(single("Clip", [x()], opset=10, min=1.0, max=1.0), backend, "min and max are both 1")


@BOTH
def test_clip_dynamic_bound(backend):
    no(single("Clip", [x(), x((), name="lo")]), backend, "min (input 1) is not a constant initializer")


@BOTH
def test_clip_equal_bounds(backend):
    no(single("Clip", [x(), const("lo", 2.0), const("hi", 2.0)]), backend, "min and max are both 2")


def test_clip_integer_input():
    yes(single("Clip", [x((4,), I64)]), MLP)  # no bounds to read
    no(single("Clip", [x((4,), I64), const("lo", 0, np.int64)]), MLP, "min is given for a int64 input")
    no(single("Clip", [x((4,), I64)]), NN, "is int64; NeuralNetwork takes float32 only")


def test_clip_float16_bounds():
    m = single("Clip", [x(elem_type=F16), const("lo", 0.0, np.float16), const("hi", 6.0, np.float16)])
    yes(m, MLP)
