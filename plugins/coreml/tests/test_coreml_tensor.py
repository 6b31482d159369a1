"""argmax.py, cast.py, concat.py, depthtospace.py, flatten.py, gather.py, gathernd.py, gemm.py, matmul.py,
gridsample.py, reduction.py, identity.py, transpose.py."""

from __future__ import annotations

import numpy as np
import pytest
from coreml_testing import BOTH, F16, I32, I64, MLP, NN, B, F, const, coreml, i64, model, no, single, x, yes
from onnx import TensorProto, helper


# -- argmax.py + cast.py ----------------------------------------------------------------------------------
@BOTH
def test_argmax(backend):
    yes(single("ArgMax", [x()], axis=1), backend)
    no(single("ArgMax", [x()], axis=1, select_last_index=1), backend, "select_last_index=1")


def _argmax_cast(extra_consumer=False, to=TensorProto.INT32):
    nodes = [helper.make_node("ArgMax", ["x"], ["a"], name="argmax", axis=1),
             helper.make_node("Cast", ["a"], ["y"], name="cast", to=to)]
    outputs = ["y"]
    if extra_consumer:
        nodes.append(helper.make_node("Identity", ["a"], ["z"], name="other"))
        outputs.append("z")
    return model(nodes, [x()], outputs)


def test_argmax_cast_int32_neuralnetwork():
    m = _argmax_cast()
    yes(m, NN, "argmax")
    yes(m, NN, "cast")


def test_argmax_with_cast_and_other_consumers_neuralnetwork():
    m = _argmax_cast(extra_consumer=True)
    no(m, NN, "NeuralNetwork: the output feeds a Cast to int32 and other nodes", "argmax")
    no(m, NN, "the ArgMax producing the input is not supported itself", "cast")
    yes(m, MLP, "argmax")
    yes(m, MLP, "cast")


def test_cast_neuralnetwork_needs_argmax_and_int32():
    no(_argmax_cast(to=TensorProto.FLOAT), NN, "NeuralNetwork: only to int32 after an ArgMax, not to float", "cast")
    no(single("Cast", [x((4,), I64)], to=TensorProto.INT32), NN, "the input is a graph input or initializer")
    no(single("Cast", [x((4,), F)], to=TensorProto.INT32), NN, "the input is float32; NeuralNetwork (only an ArgMax")
    relu_cast = model([helper.make_node("Abs", ["x"], ["a"], name="abs"),
                       helper.make_node("Cast", ["a"], ["y"], name="n", to=TensorProto.INT32)], [x((4,), I64)])
    no(relu_cast, NN, "not after Abs")


@pytest.mark.parametrize(("src", "dst"), [(F, I64), (I64, F), (F16, F), (B, I32), (I32, B)])
def test_cast_mlprogram_types(src, dst):
    yes(single("Cast", [x((4,), src)], to=dst), MLP)


def test_cast_mlprogram_unsupported_types():
    no(single("Cast", [x((4,), TensorProto.DOUBLE)], to=F), MLP, "the input is float64; Core ML's cast takes")
    no(single("Cast", [x((4,), F)], to=TensorProto.UINT8), MLP, "the output is uint8; Core ML's cast takes")


# -- concat.py -------------------------------------------------------------------------------------------
@BOTH
def test_concat_channel_axis(backend):
    yes(single("Concat", [x(), x(name="b")], axis=1), backend)
    yes(single("Concat", [x(), x(name="b")], axis=-3), backend)


def test_concat_neuralnetwork_rank_and_axis():
    no(single("Concat", [x((2, 3)), x((2, 3), name="b")], axis=0), NN, "NeuralNetwork: rank-2 inputs")
    no(single("Concat", [x(), x(name="b")], axis=2), NN, "NeuralNetwork: axis 2")
    yes(single("Concat", [x((2, 3)), x((2, 3), name="b")], axis=0), MLP)
    yes(single("Concat", [x(), x(name="b")], axis=2), MLP)


@BOTH
def test_concat_single_input(backend):
    no(single("Concat", [x()], axis=1), backend, "1 input; Core ML's concat takes 2 or more")


# -- depthtospace.py ---------------------------------------------------------------------------------------
@BOTH
def test_depthtospace_dcr(backend):
    yes(single("DepthToSpace", [x((1, 8, 2, 2))], blocksize=2), backend)


def test_depthtospace_crd():
    m = single("DepthToSpace", [x((1, 8, 2, 2))], blocksize=2, mode="CRD")
    yes(m, MLP)
    no(m, NN, "NeuralNetwork: mode CRD; only DCR")
    no(single("DepthToSpace", [x(("N", 8, 2, 2))], blocksize=2, mode="CRD"), MLP, "mode CRD needs a static input")


def test_depthtospace_dcr_float16_needs_coreml7():
    m = single("DepthToSpace", [x((1, 8, 2, 2), F16)], blocksize=2)
    no(m, MLP, "needs Core ML 7 (deployment_target=iOS17 or later)")
    no(m, coreml(deployment_target="iOS16"), "needs Core ML 7")
    yes(m, coreml(deployment_target="iOS17"))


# -- flatten.py -------------------------------------------------------------------------------------------
def test_flatten():
    yes(single("Flatten", [x()], axis=1), NN)
    no(single("Flatten", [x(())], axis=0), NN, "the input is a scalar")
    no(single("Flatten", [x()], axis=1), MLP, "needs model_format=NeuralNetwork")


# -- gather.py ------------------------------------------------------------------------------------------
@BOTH
def test_gather(backend):
    yes(single("Gather", [x((5, 4)), i64("i", [0, 2])], axis=0), backend)
    yes(single("Gather", [x((5, 4), I64), x((2,), I32, "i")]), backend)  # int64 data in both formats


@BOTH
def test_gather_data_types(backend):
    no(single("Gather", [x((5, 4), I32), i64("i", [0])]), backend, "data is int32")


def test_gather_float16_needs_mlprogram_and_coreml6():
    m = single("Gather", [x((5, 4), F16), i64("i", [0])])
    no(m, NN, "NeuralNetwork takes float32 or int64")
    no(m, MLP, "float16 data needs Core ML 6 (deployment_target=iOS16 or later)")
    yes(m, coreml(deployment_target="iOS16"))


@BOTH
def test_gather_scalar_indices(backend):
    yes(single("Gather", [x((5, 4)), i64("i", 1)]), backend)
    no(single("Gather", [x(("N", 4)), i64("i", 1)], axis=1), backend, "scalar indices need a static data shape")
    no(single("Gather", [x((2, 2, 2, 2, 2)), i64("i", 1)]), backend, "scalar indices with rank-5 data")


@BOTH
def test_gather_output_rank(backend):
    no(single("Gather", [x((2, 2, 2, 2)), i64("i", np.zeros((1, 1, 1)))]), backend, "output rank 6")


# -- gathernd.py ---------------------------------------------------------------------------------------------
def test_gathernd():
    m = single("GatherND", [x((2, 3, 4)), i64("i", [[0, 1], [1, 2]])])
    yes(m, MLP)
    no(m, NN, "needs the ML Program format")
    no(single("GatherND", [x((2, 3, 4), B), i64("i", [[0, 1]])]), MLP, "data (input 0) is bool")  # (coremltools: fp16/fp32/int32)


def test_gathernd_conditions():
    no(single("GatherND", [x((2, 3)), x((1, 1), I64, "i")]), MLP, "indices (input 1) is not a constant initializer")
    no(single("GatherND", [x((2, 3, 4)), i64("i", [[0], [1]])], batch_dims=1), MLP, "batch_dims=1")
    no(single("GatherND", [x(("N", 3)), i64("i", [[0, 1]])]), MLP, "the first 2 data dims must be static")
    yes(single("GatherND", [x((2, "N")), i64("i", [[0]])]), MLP)
    no(single("GatherND", [x((2, 3), TensorProto.DOUBLE), i64("i", [[0]])]), MLP, "data (input 0) is float64")


# -- gemm.py -----------------------------------------------------------------------------------------------
@BOTH
def test_gemm(backend):
    yes(single("Gemm", [x((2, 4)), const("b", np.ones((4, 5))), const("c", np.ones(5))]), backend)
    yes(single("Gemm", [x((2, 4)), const("b", np.ones((5, 4))), const("c", np.ones((1, 5)))], transB=1), backend)
    yes(single("Gemm", [x((2, 4)), const("b", np.ones((4, 5))), const("c", 1.0)]), backend)


@BOTH
def test_gemm_conditions(backend):
    no(single("Gemm", [x((2, 4)), x((4, 5), name="b")]), backend, "B (input 1) is not a constant initializer")
    no(single("Gemm", [x((4, 2)), const("b", np.ones((4, 5)))], transA=1), backend, "transA=1, alpha=1, beta=1")
    no(single("Gemm", [x((2, 4)), const("b", np.ones((4, 5)))], alpha=2.0), backend, "alpha=2")
    no(single("Gemm", [x((2, 4)), const("b", np.ones((4, 5))), x((5,), name="c")]), backend,
       "C (input 2) is not a constant initializer")
    no(single("Gemm", [x((2, 4)), const("b", np.ones((4, 5))), const("c", np.ones((2, 5)))]), backend,
       "C has shape [2, 5]; ORT takes [], [1], [N] or [1,N] with N=5")


# -- matmul.py ---------------------------------------------------------------------------------------------
@BOTH
def test_matmul_2d_constant_b(backend):
    yes(single("MatMul", [x((2, 4)), const("b", np.ones((4, 5)))]), backend)


def test_matmul_dynamic_b_and_batched():
    m = single("MatMul", [x((2, 4)), x((4, 5), name="b")])
    yes(m, MLP)
    no(m, NN, "NeuralNetwork: B (input 1) is not a constant initializer")
    batched = single("MatMul", [x((3, 2, 4)), const("b", np.ones((4, 5)))])
    yes(batched, MLP)
    no(batched, NN, "NeuralNetwork: A rank 3, B rank 2; only 2-D x 2-D")


def test_matmul_1d_inputs_mlprogram():
    no(single("MatMul", [x((4,)), const("b", np.ones((4, 5)))]), MLP, "rank-1 A with rank-2 B")
    no(single("MatMul", [x((2, 4)), const("b", np.ones(4))]), MLP, "rank-2 A with rank-1 B")
    yes(single("MatMul", [x((4,)), const("b", np.ones(4))]), MLP)


# -- gridsample.py -----------------------------------------------------------------------------------------
def _grid(**attrs):
    return single("GridSample", [x((1, 3, 4, 4)), x((1, 2, 2, 2), name="g")], opset=20, **attrs)


def test_gridsample():
    yes(_grid(), MLP)
    yes(_grid(padding_mode="border"), MLP)
    yes(_grid(padding_mode="reflection", align_corners=1), MLP)
    no(_grid(), NN, "needs the ML Program format")


def test_gridsample_conditions():
    no(_grid(mode="nearest"), MLP, "mode nearest; Core ML's resample takes linear (bilinear) only")
    no(_grid(padding_mode="reflection"), MLP, "padding_mode=reflection with align_corners=0")
    m = single("GridSample", [x((1, 3, 4, 4, 4)), x((1, 2, 2, 2, 3), name="g")], opset=20)
    no(m, MLP, "rank-5 input; ORT takes 4-D only")


# -- reduction.py -------------------------------------------------------------------------------------------
@BOTH
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
def test_reduce_sum_mean(backend, op):
    yes(single(op, [x(), i64("axes", [2, 3])], opset=18), backend)
    yes(single(op, [x()], opset=18), backend)
    no(single(op, [x(), x((2,), I64, "axes")], opset=18), backend, "axes (input 1) is not a constant initializer")


def test_reduce_attribute_axes_before_opset_18():
    yes(single("ReduceMean", [x()], opset=13, axes=[2, 3]), NN)


def test_reduce_noop_with_empty_axes_neuralnetwork():
    m = single("ReduceSum", [x()], opset=13, noop_with_empty_axes=1)
    yes(m, MLP)
    no(m, NN, "NeuralNetwork: noop_with_empty_axes=1 is not supported")


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ReduceProd"])
def test_reduce_mlprogram_only(op):
    m = single(op, [x(), i64("axes", [1])], opset=18)
    yes(m, MLP)
    no(m, NN, "needs the ML Program format")


# -- identity.py, transpose.py ---------------------------------------------------------------------------
@BOTH
@pytest.mark.parametrize(("op", "attrs"), [("Identity", {}), ("Transpose", {"perm": [0, 2, 3, 1]})])
def test_identity_and_transpose_base_checks_only(backend, op, attrs):
    yes(single(op, [x()], **attrs), backend)
    no(single(op, [x((1, 1, 1, 1, 1, 2))], **attrs), backend, "Core ML takes rank <= 5")
    no(single(op, [x((2, 3), I32)], **attrs), backend, "is int32")
