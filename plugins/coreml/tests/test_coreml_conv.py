"""conv.py (Conv, com.microsoft:FusedConv), convtranspose.py, pool.py, batchnorm.py, normalization.py, lrn.py."""

from __future__ import annotations

import numpy as np
import pytest
from coreml_testing import BOTH, F16, MLP, NN, F, const, coreml, no, single, x, yes

W = const("w", np.ones((8, 3, 3, 3)))
BIAS = const("b", np.zeros(8))


# -- conv.py --------------------------------------------------------------------------------------------
@BOTH
def test_conv_2d_and_1d(backend):
    yes(single("Conv", [x(), W, BIAS], pads=[1, 1, 1, 1]), backend)
    yes(single("Conv", [x((1, 3, 9)), const("w", np.ones((4, 3, 3)))]), backend)


@BOTH
def test_conv_3d_rejected(backend):
    m = single("Conv", [x((1, 3, 4, 4, 4)), const("w", np.ones((2, 3, 1, 1, 1)))])
    no(m, backend, "weight has rank 5 (3-D conv); ORT takes 1-D and 2-D convolutions only")


def test_conv_dynamic_weight():
    m = single("Conv", [x(), x((8, 3, 3, 3), name="w")])
    yes(m, MLP)
    no(m, NN, "NeuralNetwork: weight (input 1) is not a constant initializer")


@BOTH
def test_conv_dynamic_bias(backend):
    no(single("Conv", [x(), W, x((8,), name="b")]), backend, "bias (input 2) is not a constant initializer")


@BOTH
def test_conv_empty_bias_name(backend):
    no(single("Conv", [x(), W, None]), backend, "bias (input 2) is an empty name")


@BOTH
def test_conv_dim_limit(backend):
    m = single("Conv", [x((1, 3, 1, 16385)), const("w", np.ones((1, 3, 1, 1)))])
    no(m, backend, "input has a dim of 16385; Core ML fails to load convolutions with a dim over 16384")
    yes(single("Conv", [x((1, 3, 1, 16384)), const("w", np.ones((1, 3, 1, 1)))]), backend)


@BOTH
def test_conv_symbolic_dims_are_a_known_shape(backend):
    yes(single("Conv", [x(("N", 3, "H", "W")), W], outputs=[("y", F, None)]), backend)


def test_conv_output_shape_unknown():
    # onnx has no shape inference for com.microsoft:FusedConv
    m = single("FusedConv", [x(), W], outputs=[("y", F, None)], domain="com.microsoft", activation="Relu")
    no(m, MLP, "the output shape is unknown")


@BOTH
def test_conv_kernel_shape_must_match_weight(backend):
    yes(single("Conv", [x(), W], kernel_shape=[3, 3]), backend)
    no(single("Conv", [x((1, 3, 8, 8)), W], kernel_shape=[2, 2]), backend,
       "kernel_shape [2, 2] does not match the weight's spatial dims")


def test_conv_same_lower_needs_coreml6_in_mlprogram():
    m = single("Conv", [x(), W], auto_pad="SAME_LOWER")
    no(m, MLP, "auto_pad=SAME_LOWER in an ML Program needs Core ML 6 (deployment_target=iOS16 or later)")
    yes(m, coreml(deployment_target="iOS16"))
    yes(m, NN)


def test_conv_float16_mlprogram_only():
    m = single("Conv", [x(elem_type=F16), const("w", np.ones((8, 3, 3, 3)), np.float16)])
    yes(m, MLP)
    no(m, NN, "is float16; NeuralNetwork takes float32 only")


def _fused(activation, params=None, inputs=None, elem_type=F):
    attrs = {"activation": activation}
    if params is not None:
        attrs["activation_params"] = params
    wtype = np.float16 if elem_type == F16 else np.float32
    return single("FusedConv", inputs or [x(elem_type=elem_type), const("w", np.ones((8, 3, 3, 3)), wtype)],
                  outputs=[("y", elem_type, [1, 8, 2, 2])], domain="com.microsoft", **attrs)


@pytest.mark.parametrize(("activation", "params"), [("Relu", None), ("Sigmoid", None), ("Tanh", None),
                                                    ("LeakyRelu", [0.1]), ("Clip", [0.0, 6.0]),
                                                    ("HardSigmoid", [0.2, 0.5])])
def test_fusedconv_activations(activation, params):
    yes(_fused(activation, params), MLP)


def test_fusedconv_mlprogram_only():
    no(_fused("Relu"), NN, "needs the ML Program format")


def test_fusedconv_unknown_activation():
    no(_fused("Elu", [1.0]), MLP, "activation 'Elu' is not one ORT's CoreML EP fuses")


def test_fusedconv_param_count():
    no(_fused("LeakyRelu"), MLP, "activation LeakyRelu needs 1 activation_params, got 0")


def test_fusedconv_residual_input():
    inputs = [x(), const("w", np.ones((8, 3, 3, 3))), BIAS, x((1, 8, 2, 2), name="z")]
    no(_fused("Relu", inputs=inputs), MLP, "has the residual input Z (input 3)")


def test_fusedconv_float16_and_conv_conditions():
    yes(_fused("Relu", elem_type=F16), MLP)
    dynamic_bias = [x(), const("w", np.ones((8, 3, 3, 3))), x((8,), name="b")]
    no(_fused("Relu", inputs=dynamic_bias), MLP, "bias (input 2) is not a constant initializer")


# -- convtranspose.py -----------------------------------------------------------------------------------
WT = const("w", np.ones((3, 2, 3, 3)))


def test_convtranspose_mlprogram_only():
    m = single("ConvTranspose", [x(), WT], pads=[1, 1, 1, 1])
    yes(m, MLP)
    no(m, NN, "needs the ML Program format")


def test_convtranspose_weight_and_bias_constant():
    no(single("ConvTranspose", [x(), x((3, 2, 3, 3), name="w")]), MLP, "weight (input 1) is not a constant")
    no(single("ConvTranspose", [x(), WT, x((2,), name="b")]), MLP, "bias (input 2) is not a constant")


def test_convtranspose_pads():
    no(single("ConvTranspose", [x(), WT], pads=[0, 1, 0, 1]), MLP, "pads [0, 1, 0, 1] are not all equal")
    no(single("ConvTranspose", [x(), WT], auto_pad="SAME_UPPER"), MLP, "auto_pad=SAME_UPPER is not supported")
    yes(single("ConvTranspose", [x(), WT], auto_pad="VALID"), MLP)
    yes(single("ConvTranspose", [x(), WT]), MLP)  # no pads: all 0


def test_convtranspose_output_shape_and_padding():
    no(single("ConvTranspose", [x(), WT], output_shape=[6, 6]), MLP, "output_shape is set")
    no(single("ConvTranspose", [x(), WT], strides=[2, 2], output_padding=[1, 1]), MLP, "output_padding [1, 1]")
    yes(single("ConvTranspose", [x(), WT], output_padding=[0, 0]), MLP)


def test_convtranspose_kernel_shape_and_dim_limit():
    no(single("ConvTranspose", [x(), WT], kernel_shape=[2, 2]), MLP, "kernel_shape [2, 2] does not match")
    no(single("ConvTranspose", [x((1, 3, 1, 20000)), const("w", np.ones((3, 1, 1, 1)))]), MLP,
       "input has a dim of 20000")


# -- pool.py ---------------------------------------------------------------------------------------------
@BOTH
@pytest.mark.parametrize("op", ["AveragePool", "MaxPool"])
def test_pool(backend, op):
    yes(single(op, [x()], kernel_shape=[2, 2], strides=[2, 2]), backend)


@BOTH
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool(backend, op):
    yes(single(op, [x()]), backend)
    no(single(op, [x((1, 3, 4))]), backend, "rank-3 input; ORT takes 4-D (2-D pooling) only")


@BOTH
def test_pool_rank(backend):
    no(single("MaxPool", [x((1, 3, 8))], kernel_shape=[2]), backend, "rank-3 input")


def test_pool_ceil_mode_neuralnetwork():
    m = single("AveragePool", [x()], kernel_shape=[3, 3], ceil_mode=1)
    yes(m, MLP)
    no(m, NN, "NeuralNetwork: ceil_mode=1 is not supported")


@BOTH
def test_pool_dilations_storage_order_indices(backend):
    no(single("MaxPool", [x()], kernel_shape=[2, 2], dilations=[2, 2]), backend, "dilations [2, 2]")
    yes(single("MaxPool", [x()], kernel_shape=[2, 2], dilations=[1, 1]), backend)
    no(single("MaxPool", [x()], kernel_shape=[2, 2], storage_order=1), backend, "storage_order=1")
    no(single("MaxPool", [x()], ["y", "i"], kernel_shape=[2, 2]), backend, "the Indices output is not supported")


# -- batchnorm.py ------------------------------------------------------------------------------------------
def _bn(inputs=None, outputs=("y",), shape=(1, 3, 4, 4), opset=15, **attrs):
    params = [const(n, np.ones(3)) for n in ("scale", "bias", "mean", "var")]
    return single("BatchNormalization", inputs or [x(shape)] + params, outputs, opset=opset, **attrs)


@BOTH
def test_batchnorm(backend):
    yes(_bn(), backend)


@BOTH
def test_batchnorm_rank(backend):
    no(_bn(shape=(1, 3, 4)), backend, "rank-3 input; ORT takes 4-D only")


@BOTH
def test_batchnorm_params_must_be_initializers(backend):
    params = [const("scale", np.ones(3)), x((3,), name="bias"), const("mean", np.ones(3)), const("var", np.ones(3))]
    no(_bn(inputs=[x()] + params), backend, "B (input 2) is not an initializer")


@BOTH
def test_batchnorm_overridable_initializer_is_accepted(backend):
    # ORT reads all initializers here, overridable ones included
    params = [const("scale", np.ones(3)), ("bias", np.ones(3, np.float32), "input"), const("mean", np.ones(3)),
              const("var", np.ones(3))]
    yes(_bn(inputs=[x()] + params), backend)


@BOTH
def test_batchnorm_training_mode_and_opset(backend):
    no(_bn(outputs=("y", "m", "v"), opset=14, training_mode=1), backend, "3 outputs (training mode)")
    no(_bn(opset=6), backend, "takes it from opset 7")
    no(_bn(opset=7, spatial=0), backend, "spatial=0")


# -- normalization.py -----------------------------------------------------------------------------------
def _ln(elem_type=F, scale=None, bias=True, outputs=("y",), **attrs):
    dtype = np.float16 if elem_type == F16 else np.float32
    inputs = [x((2, 8), elem_type), scale or const("s", np.ones(8), dtype)]
    if bias:
        inputs.append(const("b", np.zeros(8), dtype))
    return single("LayerNormalization", inputs, outputs, **attrs)


def test_layernorm_mlprogram_only():
    yes(_ln(), MLP)
    yes(_ln(bias=False), MLP)
    yes(_ln(elem_type=F16), MLP)
    no(_ln(), NN, "needs the ML Program format")


def test_layernorm_conditions():
    no(_ln(scale=x((8,), name="s")), MLP, "scale (input 1) is not a constant initializer")
    no(_ln(stash_type=0), MLP, "stash_type=0")
    no(_ln(outputs=("y", "mean", "inv")), MLP, "3 outputs (training mode)")


def test_layernorm_mixed_types():
    m = single("LayerNormalization", [x((2, 8), F16), const("s", np.ones(8))])
    no(m, MLP, "inputs have mixed types (float16, float32, float16)")


def test_groupnorm_and_instancenorm():
    gn = single("GroupNormalization", [x((1, 4, 2, 2)), const("s", np.ones(4)), const("b", np.zeros(4))],
                opset=21, num_groups=2)
    yes(gn, MLP)
    no(single("GroupNormalization", [x((1, 4, 2, 2)), const("s", np.ones(4)), const("b", np.zeros(4))],
              opset=21, num_groups=2, stash_type=0), MLP, "stash_type=0")
    inorm = single("InstanceNormalization", [x(), const("s", np.ones(3)), const("b", np.zeros(3))])
    yes(inorm, MLP)
    no(inorm, NN, "needs the ML Program format")
    no(single("InstanceNormalization", [x(), const("s", np.ones(3)), x((3,), name="b")]), MLP,
       "B (input 2) is not a constant initializer")


# -- lrn.py -------------------------------------------------------------------------------------------------
def test_lrn_neuralnetwork_only():
    m = single("LRN", [x()], size=3)
    yes(m, NN)
    no(m, MLP, "needs model_format=NeuralNetwork; ORT's CoreML EP has no ML Program builder for it")


def test_lrn_rank():
    yes(single("LRN", [x((3, 4, 4))], size=3), NN)
    no(single("LRN", [x((1, 3, 4, 4, 4))], size=3), NN, "input rank 5; Core ML treats extra leading dims as batch")
