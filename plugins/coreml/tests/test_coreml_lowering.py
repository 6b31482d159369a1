"""Every lowered op, checked against onnxruntime: claim -> MIL -> .mlpackage (reloaded with coremltools)
-> the emulator of the saved model, in ML Program and (where ORT builds the op there) NeuralNetwork.
A coverage test makes sure every op the backend has a rule for appears below."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from coreml_compile_kit import check_against_onnxruntime, compile_whole
from coreml_testing import I64, MLP, NN, B, F, const, i64, model, single, x
from onnx import helper

from mobile_ep import CompileError

RNG = np.random.default_rng(7)


def w(*shape: int, scale: float = 0.5) -> np.ndarray:
    return RNG.normal(0.0, scale, shape).astype(np.float32)


def pos(*shape: int) -> np.ndarray:
    return RNG.uniform(0.5, 1.5, shape).astype(np.float32)


MLP_ONLY, BOTH = ("mlprogram",), ("mlprogram", "neuralnetwork")


def case(name: str, proto: Any, formats: tuple[str, ...] = BOTH, **kwargs: Any) -> Any:
    return pytest.param(proto, formats, kwargs, id=name)


def two(op: str, shape_b: tuple[int, ...] = (1, 3, 1, 1), **attrs: Any) -> Any:
    return single(op, [x((1, 3, 4, 4)), x(shape_b, name="b")], **attrs)


X4 = x((1, 3, 6, 6))
CASES = [
    # elementwise
    case("Add", two("Add")),
    case("Sub-const", single("Sub", [x((2, 3, 4)), const("b", w(4))])),
    case("Mul", two("Mul", (4,))),
    case("Div", single("Div", [x((2, 3)), const("b", pos(2, 3))])),
    case("Div-int64-truncates", single("Div", [x((8,), I64), i64("b", [3, -3, 2, -2, 5, -5, 7, -1])]), MLP_ONLY),
    case("Pow", single("Pow", [x((2, 3)), x((3,), name="e")]), ranges={"x": (0.5, 2.0)}),
    case("Pow-const-exponent", single("Pow", [x((2, 3)), const("e", w(2, 3))]), MLP_ONLY, ranges={"x": (0.5, 2.0)}),
    case("Pow-scalar-exponent", single("Pow", [x((2, 3)), const("e", np.float32(3.0))])),
    case("Pow-int64", single("Pow", [x((6,), I64), i64("e", [0, 1, 2, 3, 2, 1])]), MLP_ONLY),
    case("Max-3-inputs", model([helper.make_node("Max", ["x", "b", "c"], ["y"], name="n")],
                               [x((2, 3)), x((2, 3), name="b"), x((3,), name="c")]), MLP_ONLY),
    case("Max-int64", single("Max", [x((4,), I64), x((4,), I64, name="b")]), MLP_ONLY),
    case("And", single("And", [x((2, 3), B), x((3,), B, name="b")]), MLP_ONLY),
    case("Where", single("Where", [x((2, 3), B, name="c"), x((2, 3)), x((3,), name="b")]), MLP_ONLY),
    # activations
    case("Relu", single("Relu", [X4])),
    case("Sigmoid", single("Sigmoid", [X4])),
    case("Tanh", single("Tanh", [X4])),
    case("LeakyRelu", single("LeakyRelu", [X4], alpha=0.2)),
    case("PRelu-channel", single("PRelu", [X4, const("s", w(3, 1, 1))])),
    case("PRelu-single", single("PRelu", [X4, const("s", w(1))])),
    case("PRelu-rank3", single("PRelu", [x((3, 4, 5)), const("s", w(3, 1, 1))]), MLP_ONLY),
    case("HardSigmoid", single("HardSigmoid", [X4], alpha=0.3, beta=0.4)),
    case("Gelu", single("Gelu", [X4], opset=20), MLP_ONLY),
    case("Gelu-tanh", single("Gelu", [X4], opset=20, approximate="tanh"), MLP_ONLY),
    case("Elu", single("Elu", [X4], alpha=0.7), MLP_ONLY),
    case("Softplus", single("Softplus", [X4]), MLP_ONLY),
    case("QuickGelu", single("QuickGelu", [X4], domain="com.microsoft", alpha=1.5), MLP_ONLY),
    case("Clip", single("Clip", [X4, const("lo", np.float32(-0.3)), const("hi", np.float32(0.6))])),
    case("Clip-min-only", single("Clip", [X4, const("lo", np.float32(-0.3))])),
    case("Clip-min-above-max", single("Clip", [X4, const("lo", np.float32(0.5)), const("hi", np.float32(-0.5))]),
         MLP_ONLY),
    # unary
    case("Sqrt", single("Sqrt", [X4]), ranges={"x": (0.1, 2.0)}),
    case("Reciprocal", single("Reciprocal", [X4]), ranges={"x": (0.5, 2.0)}),
    case("Erf", single("Erf", [X4]), MLP_ONLY),
    case("Round", single("Round", [x((9,))]), MLP_ONLY, ranges={"x": (-3.0, 3.0)}),
    case("Exp", single("Exp", [X4]), MLP_ONLY),
    case("Sin", single("Sin", [X4]), MLP_ONLY),
    case("Cos", single("Cos", [X4]), MLP_ONLY),
    case("Ceil", single("Ceil", [X4]), MLP_ONLY),
    case("Identity", single("Identity", [X4])),
    # casts
    case("Cast-float-int32", single("Cast", [X4], to=6), MLP_ONLY, ranges={"x": (-3.0, 3.0)}),
    case("Cast-int64-float", single("Cast", [x((2, 3), I64)], to=1), MLP_ONLY),
    case("Cast-float-bool", single("Cast", [X4], to=9), MLP_ONLY),
    case("ArgMax-Cast", model([helper.make_node("ArgMax", ["x"], ["a"], axis=1, keepdims=0, name="m"),
                               helper.make_node("Cast", ["a"], ["y"], to=6, name="n")], [X4])),
    case("ArgMax", single("ArgMax", [X4], axis=1, keepdims=0)),
    # convolutions, pooling, normalization
    case("Conv", single("Conv", [X4, const("w", w(4, 3, 3, 3)), const("b", w(4))], pads=[1, 0, 1, 2],
                        strides=[2, 1])),
    case("Conv-group-dilated", single("Conv", [x((1, 4, 7, 7)), const("w", w(4, 2, 3, 3))], group=2,
                                      dilations=[2, 2])),
    case("Conv-same-upper", single("Conv", [X4, const("w", w(2, 3, 2, 2))], auto_pad="SAME_UPPER", strides=[2, 2])),
    case("Conv-1d", single("Conv", [x((1, 3, 9)), const("w", w(2, 3, 3))], pads=[1, 1]), MLP_ONLY),
    case("Conv-dynamic-weight", single("Conv", [X4, x((2, 3, 3, 3), name="w")]), MLP_ONLY),
    case("FusedConv-Relu", single("FusedConv", [X4, const("w", w(4, 3, 3, 3)), const("b", w(4))], [("y", F, [1, 4, 6, 6])],
                                  domain="com.microsoft", activation="Relu", pads=[1, 1, 1, 1]), MLP_ONLY),
    case("FusedConv-Clip", single("FusedConv", [X4, const("w", w(4, 3, 3, 3))], [("y", F, [1, 4, 4, 4])],
                                  domain="com.microsoft", activation="Clip", activation_params=[-0.2, 0.3]), MLP_ONLY),
    case("FusedConv-LeakyRelu", single("FusedConv", [X4, const("w", w(4, 3, 3, 3))], [("y", F, [1, 4, 4, 4])],
                                       domain="com.microsoft", activation="LeakyRelu", activation_params=[0.1]),
         MLP_ONLY),
    case("ConvTranspose", single("ConvTranspose", [X4, const("w", w(3, 2, 3, 3)), const("b", w(2))], strides=[2, 2],
                                 pads=[1, 1, 1, 1]), MLP_ONLY),
    case("ConvTranspose-group", single("ConvTranspose", [x((1, 4, 3, 3)), const("w", w(4, 1, 2, 2))], group=2),
         MLP_ONLY),
    case("MaxPool", single("MaxPool", [X4], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    case("MaxPool-ceil", single("MaxPool", [x((1, 2, 7, 7))], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
         MLP_ONLY),
    case("AveragePool", single("AveragePool", [X4], kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    case("AveragePool-count-pad", single("AveragePool", [X4], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                         count_include_pad=1)),
    case("AveragePool-ceil-count-pad", single("AveragePool", [x((1, 2, 7, 7))], kernel_shape=[3, 3], strides=[2, 2],
                                              pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1), MLP_ONLY),
    case("GlobalAveragePool", single("GlobalAveragePool", [X4])),
    case("GlobalMaxPool", single("GlobalMaxPool", [X4])),
    case("BatchNormalization", single("BatchNormalization", [X4, const("s", pos(3)), const("b", w(3)),
                                                             const("m", w(3)), const("v", pos(3))], epsilon=1e-3)),
    case("InstanceNormalization", single("InstanceNormalization", [X4, const("s", pos(3)), const("b", w(3))]),
         MLP_ONLY),
    case("LayerNormalization", single("LayerNormalization", [x((2, 3, 4)), const("s", pos(4)), const("b", w(4))]),
         MLP_ONLY),
    case("LayerNormalization-2-axes", single("LayerNormalization", [x((2, 3, 4)), const("s", pos(3, 4))], axis=-2),
         MLP_ONLY),
    case("GroupNormalization", single("GroupNormalization", [x((1, 4, 3, 3)), const("s", pos(4)), const("b", w(4))],
                                      num_groups=2, opset=21), MLP_ONLY),
    case("LRN", single("LRN", [x((1, 5, 3, 3))], size=3, alpha=2e-4, beta=0.75, bias=1.5), ("neuralnetwork",)),
    case("Softmax", single("Softmax", [x((2, 3, 4))], axis=1)),
    case("Softmax-opset11-2d", single("Softmax", [x((2, 3, 4))], axis=1, opset=11), MLP_ONLY),
    # linear algebra
    case("Gemm", single("Gemm", [x((2, 5)), const("w", w(4, 5)), const("c", w(4))], transB=1)),
    case("Gemm-no-trans", single("Gemm", [x((2, 5)), const("w", w(5, 4))])),
    case("MatMul-2d-const", single("MatMul", [x((3, 5)), const("w", w(5, 4))])),
    case("MatMul-batched", single("MatMul", [x((2, 3, 5)), x((2, 5, 4), name="b")]), MLP_ONLY),
    case("MatMul-1d", single("MatMul", [x((5,)), x((5,), name="b")]), MLP_ONLY),
    # tensor shapes and data movement
    case("Concat", single("Concat", [X4, x((1, 2, 6, 6), name="b")], axis=1)),
    case("Concat-axis0", single("Concat", [x((2, 3)), x((1, 3), name="b")], axis=0), MLP_ONLY),
    case("Reshape", single("Reshape", [X4, i64("s", [0, -1, 4])])),
    case("Flatten", single("Flatten", [X4], axis=2), ("neuralnetwork",)),
    case("Transpose", single("Transpose", [X4], perm=[0, 2, 3, 1])),
    case("Squeeze", single("Squeeze", [x((1, 3, 1, 4)), i64("a", [2])])),
    case("Unsqueeze", single("Unsqueeze", [x((3, 4)), i64("a", [0, -1])]), MLP_ONLY),
    case("Split", model([helper.make_node("Split", ["x", "s"], ["a", "b"], axis=1, name="n")],
                        [x((1, 5, 2, 2)), i64("s", [2, 3])], ["a", "b"])),
    case("Split-uneven-opset18", model([helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3,
                                                         name="n")], [x((1, 7, 2))], ["a", "b", "c"], opset=18),
         MLP_ONLY),
    case("Slice", single("Slice", [x((1, 3, 8, 8)), i64("s", [1, 1]), i64("e", [7, 100]), i64("a", [2, 3]),
                                   i64("t", [2, 3])])),
    case("Slice-reverse", single("Slice", [x((4, 6)), i64("s", [-1, 4]), i64("e", [-100, 0]), i64("a", [0, 1]),
                                           i64("t", [-1, -2])]), MLP_ONLY),
    case("Gather", single("Gather", [x((5, 4)), i64("i", [[0, -1], [2, 3]])], axis=0)),
    case("Gather-dynamic-indices", single("Gather", [x((3, 5)), x((2,), I64, name="i")], axis=1), MLP_ONLY,
         ranges={"i": (-0.8, 0.8)}),
    case("GatherND", single("GatherND", [x((3, 4, 2)), i64("i", [[0, 1], [-1, 3]])]), MLP_ONLY),
    case("Tile", single("Tile", [x((2, 3)), i64("r", [2, 3])])),
    case("Tile-dynamic-repeats", single("Tile", [x((2, 3)), x((2,), I64, name="r")]), MLP_ONLY,
         ranges={"r": (0.2, 0.6)}),
    case("Pad", single("Pad", [X4, i64("p", [0, 0, 1, 2, 0, 0, 3, 0]), const("v", np.float32(0.5))])),
    case("Pad-reflect", single("Pad", [X4, i64("p", [0, 0, 2, 1, 0, 0, 1, 2])], mode="reflect"), MLP_ONLY),
    case("Shape", single("Shape", [X4])),
    case("Shape-start-end", single("Shape", [X4], start=1, end=-1, opset=15), MLP_ONLY),
    case("DepthToSpace-DCR", single("DepthToSpace", [x((1, 8, 2, 3))], blocksize=2)),
    case("DepthToSpace-CRD", single("DepthToSpace", [x((1, 8, 2, 3))], blocksize=2, mode="CRD"), MLP_ONLY),
    # resizing and sampling
    case("Resize-nearest-up", single("Resize", [x((1, 2, 3, 4)), None, const("s", [1, 1, 2, 3])], mode="nearest",
                                     coordinate_transformation_mode="asymmetric", nearest_mode="floor")),
    case("Resize-nearest-down", single("Resize", [x((1, 2, 4, 6)), None, const("s", [1, 1, 0.5, 0.5])],
                                       mode="nearest", coordinate_transformation_mode="asymmetric",
                                       nearest_mode="floor"), MLP_ONLY),
    case("Resize-linear-half-pixel", single("Resize", [x((1, 2, 3, 4)), None, const("s", [1, 1, 2, 2])],
                                            mode="linear"), MLP_ONLY),
    case("Resize-linear-align-corners", single("Resize", [x((1, 2, 3, 4)), None, None, i64("z", [1, 2, 7, 5])],
                                               mode="linear", coordinate_transformation_mode="align_corners"),
         MLP_ONLY),
    case("Resize-linear-asymmetric", single("Resize", [x((1, 2, 3, 4)), None, None, i64("z", [1, 2, 6, 8])],
                                            mode="linear", coordinate_transformation_mode="asymmetric")),
    case("GridSample", single("GridSample", [x((1, 2, 4, 5)), x((1, 3, 3, 2), name="g")], align_corners=1,
                              padding_mode="border"), MLP_ONLY, ranges={"g": (-1.2, 1.2)}),
    case("GridSample-zeros", single("GridSample", [x((1, 2, 4, 5)), x((1, 3, 3, 2), name="g")]), MLP_ONLY,
         ranges={"g": (-1.2, 1.2)}),
    case("GridSample-reflection", single("GridSample", [x((1, 2, 4, 5)), x((1, 3, 3, 2), name="g")],
                                         padding_mode="reflection", align_corners=1), MLP_ONLY,
         ranges={"g": (-1.5, 1.5)}),
    # reductions
    case("ReduceSum", single("ReduceSum", [X4, i64("a", [1, 3])], keepdims=0)),
    case("ReduceMean", single("ReduceMean", [X4, i64("a", [-1])], opset=18)),
    case("ReduceMax", single("ReduceMax", [X4], keepdims=0), MLP_ONLY),
    case("ReduceMin", single("ReduceMin", [X4, i64("a", [2])], opset=18), MLP_ONLY),
    case("ReduceProd", single("ReduceProd", [x((2, 3))], axes=[1], opset=17), MLP_ONLY),
]


@pytest.mark.parametrize(("proto", "formats", "kwargs"), CASES)
@pytest.mark.parametrize("backend", [MLP, NN], ids=["mlprogram", "neuralnetwork"])
def test_lowering_matches_onnxruntime(proto, formats, kwargs, backend, tmp_path):
    fmt = "mlprogram" if backend.options.model_format == "MLProgram" else "neuralnetwork"
    if fmt not in formats:
        pytest.skip(f"ORT's CoreML EP builds this op into {', '.join(formats)} only")
    check_against_onnxruntime(proto, backend, tmp_path, **kwargs)


def test_every_rule_is_covered_by_a_lowering_test():
    tested = set()
    for param in CASES:
        proto = param.values[0]
        tested |= {("" if n.domain in ("", "ai.onnx") else n.domain, n.op_type) for n in proto.graph.node}
    missing = sorted(set(MLP.rules.op_types()) - tested)
    assert not missing, f"ops without a lowering test: {missing}"


def test_payload_metadata_names_the_core_ml_ops():
    payload, _ = compile_whole(CASES[0].values[0], MLP)
    assert payload.metadata["ops"] == "add"
    assert payload.format == "coreml-mlpackage/1"
    assert payload.metadata["model_format"] == "MLProgram" and payload.metadata["deployment_target"] == "iOS15"


@pytest.mark.parametrize("name", ["Conv", "MatMul-batched", "Softmax", "LayerNormalization", "Resize-linear-half-pixel",
                                  "GridSample", "AveragePool-ceil-count-pad", "Pow"])
def test_float16_programs_compute_in_float16(name, tmp_path):
    """compute_precision=float16: the saved program computes in fp16 and the emulator rounds as Core ML."""
    from coreml_testing import coreml

    proto, _, kwargs = next(p.values for p in CASES if p.id == name)
    backend = coreml(compute_precision="float16")
    payload = check_against_onnxruntime(proto, backend, tmp_path, rtol=2e-2, atol=2e-2, **kwargs)
    assert payload.metadata["compute_precision"] == "float16"
    assert float(payload.metadata["rtol"]) > 0  # verification allows for fp16
    from mobile_ep_coreml.emulator import Package
    from mobile_ep_coreml.package import read_package

    package = Package(read_package(payload.data))
    function = package.model.mlProgram.functions["main"]
    types = {out.type.tensorType.dataType for op in function.block_specializations[function.opset].operations
             for out in op.outputs if op.type not in ("const", "cast")}
    from coremltools.proto import MIL_pb2

    assert MIL_pb2.DataType.Value("FLOAT16") in types


def test_float16_differs_from_float32_where_fp16_rounds():
    """The emulator really rounds to fp16: a sum that fp32 keeps exactly loses its low bits in fp16."""
    from coreml_compile_kit import onnxruntime_outputs
    from coreml_testing import coreml

    proto = single("Add", [x((4,)), const("b", np.full(4, 2048.0, np.float32))])
    feeds = {"x": np.array([0.25, 1.0, 3.0, -0.5], np.float32)}
    expected = onnxruntime_outputs(proto, feeds)["y"]
    for backend, exact in ((MLP, True), (coreml(compute_precision="float16"), False)):
        payload, _ = compile_whole(proto, backend)
        got = backend.emulate(payload, feeds)["y"]
        assert np.array_equal(got, expected) is exact, (backend.options.compute_precision, got, expected)


def test_neuralnetwork_float16_stores_half_weights(tmp_path):
    from coreml_testing import coreml

    proto = CASES[[p.id for p in CASES].index("Conv")].values[0]
    backend = coreml(model_format="NeuralNetwork", compute_precision="float16")
    payload = check_against_onnxruntime(proto, backend, tmp_path, rtol=5e-3, atol=5e-3)
    from mobile_ep_coreml.emulator import Package
    from mobile_ep_coreml.package import read_package

    layers = Package(read_package(payload.data)).model.neuralNetwork.layers
    conv = next(layer for layer in layers if layer.WhichOneof("layer") == "convolution")
    assert len(conv.convolution.weights.float16Value) > 0 and not len(conv.convolution.weights.floatValue)


def test_neuralnetwork_models_load_on_every_supported_ios():
    payload, _ = compile_whole(CASES[0].values[0], NN)
    assert payload.metadata["model_format"] == "NeuralNetwork"
    assert int(payload.metadata["specification_version"]) <= 5  # Core ML 4 (iOS 14) at most


def test_neuralnetwork_refuses_a_power_with_several_constant_exponents():
    proto = next(p.values[0] for p in CASES if p.id == "Pow-const-exponent")
    with pytest.raises(CompileError, match="power layer takes a single constant exponent"):
        compile_whole(proto, NN)
