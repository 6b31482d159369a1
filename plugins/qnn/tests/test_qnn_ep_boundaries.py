"""Boundaries of the QNN rules, each pinned to a one- or two-node graph and judged by the real QNN EP
(onnxruntime-qnn on the HTP simulator, through the oracle): a case on each side of each boundary."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from mobile_ep.cli.main import main
from mobile_ep.testing import run_oracle

T = TensorProto
DTYPES = {"f32": T.FLOAT, "f16": T.FLOAT16, "i32": T.INT32, "i64": T.INT64, "u8": T.UINT8, "i8": T.INT8,
          "u16": T.UINT16, "i16": T.INT16, "bool": T.BOOL}


def graph_model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    """A model of *nodes*; *inputs* and *outputs* as (name, element type, shape)."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs], initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def one_node(op, inputs, outputs, inits=(), opset=17, **attrs) -> onnx.ModelProto:
    """One node *op* named ``op`` reading *inputs* then the initializers *inits*."""
    node = helper.make_node(op, [i[0] for i in inputs] + [t.name for t in inits], [o[0] for o in outputs],
                            name="op", **attrs)
    return graph_model([node], inputs, outputs, inits, opset)


def const(name, value, dtype=None):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def taken(qnn_backend, qnn_ep, model, case) -> bool:
    """Whether the real EP takes node ``op``, after checking that the backend predicts the same placement."""
    result = run_oracle(qnn_backend, model, qnn_ep, case=case)
    assert result.built, result.diff()
    assert result.matches, result.diff()
    return "op" in result.real_nodes


# -- the internal error: a Cast to float16 that onnxruntime merges with the Cast it inserts -----------------------
@pytest.mark.parametrize("source", ["u8", "bool", "i64"])
def test_cast_to_float16_feeding_a_matmul_is_checked_as_the_real_ep(qnn_backend, qnn_ep, tmp_path, source):
    """The CPU EP has no float16 MatMul: onnxruntime inserts a Cast to float32 before it and merges it with the
    model's Cast (uint8 -> float16 -> float32 in one Cast).  The model's Cast is given back: ``check`` ends
    normally, and the EP takes both nodes, as predicted."""
    model = graph_model([helper.make_node("Cast", ["x"], ["c"], to=T.FLOAT16, name="cast"),
                         helper.make_node("MatMul", ["c", "w"], ["y"], name="mm")],
                        [("x", DTYPES[source], [2, 3, 4])], [("y", T.FLOAT16, [2, 3, 5])],
                        [const("w", np.ones((4, 5)), np.float16)])
    result = run_oracle(qnn_backend, model, qnn_ep, case=f"cast {source} to float16")
    assert result.matches, result.diff()
    assert {result.nodes[n] for n in result.real_nodes} == {"Cast", "MatMul"}
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    run = CliRunner().invoke(main, ["check", str(path), "--ep", "qnn", "-O", "qnn.soc_model=60"])
    assert run.exit_code == 0, run.output
    assert "internal error" not in run.output and "2/2 nodes claimed" in run.output


# -- one node, its types, ranks and attributes: (case, model, whether the real EP takes it) ---------------------------
def _unary(op, dtype, shape, opset=17, out=None, **attrs):
    return one_node(op, [("x", DTYPES[dtype], shape)], [("y", DTYPES[out or dtype], None)], opset=opset, **attrs)


def _with(op, dtype, shape, inits, opset=17, outputs=1, **attrs):
    outs = [("y", DTYPES[dtype], None)] + [(f"y{i}", T.INT64, None) for i in range(1, outputs)]
    return one_node(op, [("x", DTYPES[dtype], shape)], outs, inits, opset=opset, **attrs)


def _gather_then(elem, also_output=False):
    """Gather (``op``) of rank-2 data with a scalar index, then an Add reading the result (the Gather's output a graph
    output too with *also_output*): the shape arithmetic of ONNX's Attention body, rank-2 in its tests."""
    outputs = [("y", elem, [3]), ("g", elem, [3])] if also_output else [("y", elem, [3])]
    return graph_model([helper.make_node("Gather", ["x", "i"], ["g"], axis=1, name="op"),
                        helper.make_node("Add", ["g", "g"], ["y"], name="add")],
                       [("x", elem, [3, 2])], outputs, [const("i", 0, np.int64)])


def _binary(op, dtype, shape, **attrs):
    return one_node(op, [("a", DTYPES[dtype], shape), ("b", DTYPES[dtype], shape)], [("y", 0, None)], **attrs)


def _reduce(op, dtype, shape, axes, opset=18):
    return _with(op, dtype, shape, [const("axes", axes, np.int64)], opset=opset)


def _topk(dtype, shape, **attrs):
    return _with("TopK", dtype, shape, [const("k", [2], np.int64)], opset=13, outputs=2, **attrs)


def _cumsum(dtype, shape, **attrs):
    return _with("CumSum", dtype, shape, [const("axis", 1, np.int64)], opset=14, **attrs)


def _layer_norm(shape, axis):
    normalized = shape[axis % len(shape):]
    return _with("LayerNormalization", "f32", shape, [const("scale", np.ones(normalized), np.float32),
                                                       const("bias", np.zeros(normalized), np.float32)], axis=axis)


def _einsum(equation, a, b):
    return one_node("Einsum", [("a", T.FLOAT, a), ("b", T.FLOAT, b)], [("y", T.FLOAT, None)], opset=12,
                    equation=equation)


def _resize(shape, nearest_mode, transform):
    scales = [1.0, 1.0] + [2.0] * (len(shape) - 2)
    return _with("Resize", "f32", shape, [const("roi", [], np.float32), const("scales", scales, np.float32)],
                 opset=13, mode="nearest", nearest_mode=nearest_mode, coordinate_transformation_mode=transform)


def _pad(shape, mode):
    return _with("Pad", "f32", shape, [const("pads", [0, 0] + [1] * (len(shape) - 2) + [0, 0] + [1] * (len(shape) - 2),
                                             np.int64)], mode=mode)


R2, R4, R5 = [3, 4], [2, 3, 2, 2], [2, 3, 2, 2, 2]
CASES = [
    # class 2: integer reductions, TopK, ArgMax, Clip
    ("reducesum_int32", lambda: _reduce("ReduceSum", "i32", [2, 3, 4], [1]), True),
    ("reducesum_int64_rank5", lambda: _reduce("ReduceSum", "i32", R5, [1, 2]), True),
    ("reducemax_int64", lambda: _reduce("ReduceMax", "i64", [2, 3, 4], [1]), True),
    ("reducemin_int32", lambda: _reduce("ReduceMin", "i32", [2, 3, 4], [1]), True),
    ("reducemax_int32_rank5", lambda: _reduce("ReduceMax", "i32", R5, [1]), False),
    ("reducemean_int32", lambda: _reduce("ReduceMean", "i32", [2, 3, 4], [1]), False),
    ("argmax_int32", lambda: _unary("ArgMax", "i32", [2, 3, 4], out="i64", axis=1), True),
    ("argmin_int32", lambda: _unary("ArgMin", "i32", [2, 3, 4], out="i64", axis=1), False),
    ("topk_int64", lambda: _topk("i64", [2, 3, 4]), True),
    ("clip_int32", lambda: _with("Clip", "i32", R2, [const("lo", 1, np.int32), const("hi", 5, np.int32)], opset=13), True),
    ("clip_int64_no_bounds", lambda: _unary("Clip", "i64", R2, opset=13), True),
    # class 3: Einsum in matrix-product form
    ("einsum_bhij_bhjk", lambda: _einsum("bhij,bhjk->bhik", [1, 2, 3, 4], [1, 2, 4, 5]), True),
    ("einsum_bij_bkj", lambda: _einsum("bij,bkj->bik", [2, 3, 4], [2, 5, 4]), True),
    ("einsum_ij_jk", lambda: _einsum("ij,jk->ik", [3, 4], [4, 5]), True),
    ("einsum_bhwc_hkc", lambda: _einsum("bhwc,hkc->bhwk", [1, 2, 3, 4], [2, 5, 4]), True),
    ("einsum_bchq_bkhc", lambda: _einsum("bchq,bkhc->bkhq", [1, 4, 3, 6], [1, 5, 3, 4]), True),
    ("einsum_bhji_bhjk", lambda: _einsum("bhji,bhjk->bhik", [1, 2, 4, 3], [1, 2, 4, 5]), False),
    ("einsum_abc_cd", lambda: _einsum("abc,cd->abd", [2, 3, 4], [4, 5]), False),
    ("einsum_ellipsis", lambda: _einsum("...ij,...jk->...ik", [2, 3, 4], [2, 4, 5]), False),
    # torchvision's MaxViT: uppercase letters with spaces, rank 5
    ("einsum_maxvit_scores", lambda: _einsum("B G H I D, B G H J D -> B G H I J", [1, 2, 3, 4, 8], [1, 2, 3, 5, 8]), True),
    ("einsum_maxvit_values", lambda: _einsum("B G H I J, B G H J D -> B G H I D", [1, 2, 3, 4, 5], [1, 2, 3, 5, 8]), True),
    ("einsum_mixed_case", lambda: _einsum("bHij,bHjk->bHik", [1, 2, 3, 4], [1, 2, 4, 5]), True),
    ("einsum_uppercase_bhji_bhjk", lambda: _einsum("BHJI,BHJK->BHIK", [1, 2, 4, 3], [1, 2, 4, 5]), False),
    # class 4: plain 8/16-bit tensors moved, integer Neg/Sign, rank-5 bool and int
    ("gather_uint8", lambda: _with("Gather", "u8", R2, [const("i", [0, 2], np.int64)]), False),
    ("gather_bool", lambda: _with("Gather", "bool", R2, [const("i", [0, 2], np.int64)]), True),
    ("concat_uint8", lambda: _binary("Concat", "u8", R2, axis=0), False),
    ("concat_int32", lambda: _binary("Concat", "i32", R2, axis=0), True),
    ("transpose_uint8", lambda: _unary("Transpose", "u8", R2), False),
    ("transpose_int64", lambda: _unary("Transpose", "i64", R2), False),
    ("transpose_int32", lambda: _unary("Transpose", "i32", R2), True),
    ("transpose_int32_rank5", lambda: _unary("Transpose", "i32", R5), False),
    ("transpose_bool_rank5", lambda: _unary("Transpose", "bool", R5), True),
    ("expand_uint8", lambda: _with("Expand", "u8", [1, 4], [const("s", [3, 4], np.int64)]), False),
    ("expand_bool_rank5", lambda: _with("Expand", "bool", [1, 3, 1, 2, 2], [const("s", [2, 3, 1, 2, 2], np.int64)]),
     False),
    ("expand_bool_rank4", lambda: _with("Expand", "bool", [1, 3, 2, 2], [const("s", [2, 3, 2, 2], np.int64)]), True),
    ("tile_uint8", lambda: _with("Tile", "u8", R2, [const("r", [2, 1], np.int64)]), False),
    ("tile_bool_rank5", lambda: _with("Tile", "bool", R5, [const("r", [2, 1, 1, 1, 1], np.int64)]), False),
    ("tile_float_rank5", lambda: _with("Tile", "f32", R5, [const("r", [2, 1, 1, 1, 1], np.int64)]), True),
    ("reshape_uint8", lambda: _with("Reshape", "u8", R2, [const("s", [12], np.int64)]), True),
    ("reshape_int8", lambda: _with("Reshape", "i8", R2, [const("s", [12], np.int64)]), False),
    ("gatherelements_rank5_axis0", lambda: _with("GatherElements", "f32", R5, [const("i", np.zeros(R5), np.int64)]),
     False),
    ("gatherelements_rank5_axis1", lambda: _with("GatherElements", "f32", R5, [const("i", np.zeros(R5), np.int64)],
                                                 axis=1), True),
    ("gatherelements_rank4", lambda: _with("GatherElements", "f32", R4, [const("i", np.zeros(R4), np.int64)]), True),
    ("neg_int32", lambda: _unary("Neg", "i32", R2), False),
    ("neg_float", lambda: _unary("Neg", "f32", R2), True),
    ("sign_int64", lambda: _unary("Sign", "i64", R2), False),
    ("and_rank5", lambda: _binary("And", "bool", R5), False),
    ("and_rank4", lambda: _binary("And", "bool", R4), True),
    ("not_rank5", lambda: _unary("Not", "bool", R5), False),
    ("identity_int32_rank5", lambda: _unary("Identity", "i32", R5), False),
    ("max_int32_rank5", lambda: _binary("Max", "i32", R5), True),
    ("max_float_rank5", lambda: _binary("Max", "f32", R5), False),
    ("add_int64_rank5_inside", lambda: graph_model(
        [helper.make_node("Cast", ["x"], ["c"], to=T.INT64), helper.make_node("Add", ["c", "c"], ["a"], name="op"),
         helper.make_node("Cast", ["a"], ["y"], to=T.INT32)], [("x", T.INT32, R5)], [("y", T.INT32, R5)]), True),
    ("mod_rank5", lambda: _binary("Mod", "i32", R5), False),
    ("isnan_rank5", lambda: _unary("IsNaN", "f32", R5, out="bool"), True),
    # class 5: LayerNormalization over the last axis only, rank 4 at most
    ("layernorm_last_axis", lambda: _layer_norm([2, 3, 4], -1), True),
    ("layernorm_axis1", lambda: _layer_norm([2, 3, 4], 1), False),
    ("layernorm_rank2_axis0", lambda: _layer_norm([3, 4], 0), False),
    ("layernorm_rank5", lambda: _layer_norm([2, 3, 2, 2, 4], -1), False),
    # class 6: CumSum
    ("cumsum", lambda: _cumsum("f32", [2, 3, 4]), True),
    ("cumsum_int64", lambda: _cumsum("i64", [2, 3, 4]), True),
    ("cumsum_exclusive", lambda: _cumsum("f32", [2, 3, 4], exclusive=1), False),
    ("cumsum_reverse", lambda: _cumsum("f32", [2, 3, 4], reverse=1), False),
    ("cumsum_rank5", lambda: _cumsum("f32", R5), False),
    # class 7: Cast to int64, float16 to uint8/bool
    ("cast_float_to_int64", lambda: _unary("Cast", "f32", R2, out="i64", to=T.INT64), False),
    ("cast_uint8_to_int64", lambda: _unary("Cast", "u8", R2, out="i64", to=T.INT64), False),
    ("cast_bool_to_int64", lambda: _unary("Cast", "bool", R2, out="i64", to=T.INT64), False),
    ("cast_int32_to_int64", lambda: _unary("Cast", "i32", R2, out="i64", to=T.INT64), True),
    ("cast_float_to_int64_inside", lambda: graph_model(
        [helper.make_node("Cast", ["x"], ["c"], to=T.INT64, name="op"), helper.make_node("Add", ["c", "c"], ["y"])],
        [("x", T.FLOAT, R2)], [("y", T.INT64, R2)]), True),
    ("cast_float16_to_uint8", lambda: _unary("Cast", "f16", R2, out="u8", to=T.UINT8), False),
    ("cast_float_to_uint8", lambda: _unary("Cast", "f32", R2, out="u8", to=T.UINT8), True),
    # class 8: Resize nearest by rank
    ("resize_ceil_rank3", lambda: _resize([1, 2, 4], "ceil", "half_pixel"), False),
    ("resize_round_prefer_floor_rank5", lambda: _resize([1, 2, 2, 4, 4], "round_prefer_floor", "half_pixel"), False),
    ("resize_floor_rank5", lambda: _resize([1, 2, 2, 4, 4], "floor", "half_pixel"), True),
    ("resize_ceil_rank4", lambda: _resize([1, 2, 4, 4], "ceil", "half_pixel"), True),
    ("resize_ceil_asymmetric_rank4", lambda: _resize([1, 2, 4, 4], "ceil", "asymmetric"), False),
    # class 10: rank-5 reductions over several axes, rank-5 reflect Pad
    ("reducemax_rank5_3_axes", lambda: _reduce("ReduceMax", "f32", R5, [1, 2, 3]), False),
    ("reducemax_rank5_1_axis", lambda: _reduce("ReduceMax", "f32", R5, [1]), True),
    ("reducemax_rank4_3_axes", lambda: _reduce("ReduceMax", "f32", R4, [1, 2, 3]), True),
    ("reducel2_rank5", lambda: _reduce("ReduceL2", "f32", R5, [1]), False),
    ("reducel2_rank5_keepdims0", lambda: _with("ReduceL2", "f32", R5, [const("axes", [2, 3, 4], np.int64)], opset=18,
                                               keepdims=0), True),
    ("pad_reflect_rank5", lambda: _pad(R5, "reflect"), False),
    ("pad_constant_rank5", lambda: _pad(R5, "constant"), True),
    ("pad_reflect_rank4", lambda: _pad(R4, "reflect"), True),
    # class 12: TopK smallest, any axis, rank 4 at most
    ("topk_smallest", lambda: _topk("f32", [2, 3, 4], largest=0), True),
    ("topk_axis1", lambda: _topk("f32", [2, 3, 4], axis=1), True),
    ("topk_rank5", lambda: _topk("f32", [2, 3, 2, 2, 4]), False),
    # class 14: InstanceNormalization of rank 5
    ("instancenorm_rank5", lambda: _with("InstanceNormalization", "f32", R5, [const("s", np.ones(3), np.float32),
                                                                               const("b", np.zeros(3), np.float32)]),
     False),
    ("instancenorm_rank4", lambda: _with("InstanceNormalization", "f32", R4, [const("s", np.ones(3), np.float32),
                                                                               const("b", np.zeros(3), np.float32)]),
     True),
    # NonZero: the EP needs its output's shape static ("NonZero output shape must be static"), which only a declared
    # shape makes it (torchvision's detection heads: [2, N] with N unknown)
    ("nonzero_dynamic_output", lambda: _unary("NonZero", "f32", R2, out="i64"), False),
    ("nonzero_output_declared_static", lambda: one_node("NonZero", [("x", T.FLOAT, R2)], [("y", T.INT64, [2, 12])]),
     True),
]


@pytest.mark.parametrize(("case", "build", "expected"), CASES, ids=[c[0] for c in CASES])
def test_one_node_as_the_real_ep(qnn_backend, qnn_ep, case, build, expected):
    assert taken(qnn_backend, qnn_ep, build(), case) is expected


# -- graphs onnxruntime-qnn 2.7 cannot build: the backend refuses the node and says the session fails -------------------
def _qdq_io(outputs):
    inits = [const("s", 0.05, np.float32), const("z", 128, np.uint8)]
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("QuantizeLinear", ["r", "s", "z"], ["q"], name="q"),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="dq"),
             helper.make_node("Relu", ["d"], ["y"], name="relu2")]
    infos = {"y": ("y", T.FLOAT, R2), "q": ("q", T.UINT8, R2), "d": ("d", T.FLOAT, R2)}
    return graph_model(nodes, [("x", T.FLOAT, R2)], [infos[o] for o in outputs], inits)


def _qdq_matmul(zero_point, weight_type=np.int8, conv=False):
    """x -> Q -> DQ -> MatMul (or Conv) with a weight quantized per channel -> Q -> DQ."""
    rng = np.random.default_rng(0)
    shape = (4, 3, 3, 3) if conv else (8, 6)
    low, high = (0, 200) if weight_type == np.uint8 else (-50, 50)
    channels = shape[0] if conv else shape[1]
    inits = [const("w", rng.integers(low, high, shape), weight_type), const("sw", np.full(channels, 0.01), np.float32),
             const("zw", np.full(channels, zero_point), weight_type), const("sx", 0.05, np.float32),
             const("zx", 128, np.uint8)]
    nodes = [helper.make_node("Relu", ["x"], ["xr"], name="relu"),
             helper.make_node("QuantizeLinear", ["xr", "sx", "zx"], ["xq"], name="qx"),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"], name="dqx"),
             helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wf"], axis=0 if conv else 1, name="dqw"),
             helper.make_node("Conv" if conv else "MatMul", ["xd", "wf"], ["m"], name="op"),
             helper.make_node("QuantizeLinear", ["m", "sx", "zx"], ["mq"], name="qy"),
             helper.make_node("DequantizeLinear", ["mq", "sx", "zx"], ["md"], name="dqy"),
             helper.make_node("Relu", ["md"], ["y"], name="relu2")]
    x, y = ([1, 3, 5, 5], [1, 4, 3, 3]) if conv else ([2, 8], [2, 6])
    return graph_model(nodes, [("x", T.FLOAT, x)], [("y", T.FLOAT, y)], inits, opset=21)


FAILING = [
    ("max_int32_rank6", lambda: _binary("Max", "i32", [2, 1, 2, 1, 2, 2]), "op", "fails the session"),
    ("min_int64_rank6", lambda: _binary("Min", "i64", [2, 1, 2, 1, 2, 2]), "op", "fails the session"),
    ("add_int64_graph_input_rank5", lambda: _binary("Add", "i64", R5), "op", "int64 graph input of rank 5"),
    ("cast_uint8_rank5_to_float", lambda: _unary("Cast", "u8", R5, out="f32", to=T.FLOAT), "op", "fails the session"),
    ("sign_rank5", lambda: _unary("Sign", "f32", R5), "op", "fails the session"),
    ("tan_rank6", lambda: _unary("Tan", "f32", [2, 1, 2, 1, 2, 2]), "op", "fails the session"),
    ("isnan_rank6", lambda: _unary("IsNaN", "f32", [2, 1, 2, 1, 2, 2], out="bool"), "op", "fails the session"),
    ("mean_float16", lambda: _binary("Mean", "f16", R2), "op", "fails the session"),
    ("resize_floor_align_corners_rank3", lambda: _resize([1, 2, 4], "floor", "align_corners"), "op",
     "fails the session"),
    ("conv_per_channel_weight_zero_point_3", lambda: _qdq_matmul(3, conv=True), "op", "fails the session"),
    ("maxpool_uint8", lambda: _unary("MaxPool", "u8", [1, 2, 4, 4], kernel_shape=[2, 2]), "op", "fails the session"),
    ("reducemin_int64_graph_input_rank5", lambda: _reduce("ReduceMin", "i64", R5, [1]), "op", "int64 graph input"),
    ("resize_int32", lambda: _with("Resize", "i32", [1, 2, 4, 4], [const("roi", [], np.float32), const(
        "scales", [1, 1, 2, 2], np.float32)], opset=13, mode="linear"), "op", "fails the session"),
    ("resize_uint8_rank3", lambda: _with("Resize", "u8", [1, 2, 4], [const("roi", [], np.float32), const(
        "scales", [1, 1, 2], np.float32)], opset=13, mode="nearest", nearest_mode="floor"), "op", "fails the session"),
    ("depthtospace_uint8", lambda: _unary("DepthToSpace", "u8", [1, 4, 2, 2], blocksize=2), "op", "fails the session"),
    ("spacetodepth_int8", lambda: _unary("SpaceToDepth", "i8", [1, 2, 4, 4], blocksize=2), "op", "fails the session"),
    ("conv_dilated_same_upper", lambda: _with("Conv", "f32", [1, 3, 6, 7], [const("w", np.ones([2, 3, 2, 3]), np.float32)],
                                              dilations=[2, 1], auto_pad="SAME_UPPER"), "op", "fails the session"),
    ("hardswish_float16_rank6", lambda: _unary("HardSwish", "f16", [2, 1, 2, 1, 2, 2], opset=18), None,
     "zero graph inputs"),  # (the Casts of the constants of the body onnxruntime inlines: a partition of their own)
    ("conv3d_dilated_first_axis", lambda: _with("Conv", "f32", [1, 2, 5, 5, 5], [
        const("w", np.ones([2, 2, 2, 2, 2]), np.float32)], dilations=[2, 1, 1]), "op", "fails the session"),
    ("conv3d_dilated_last_axis_strided", lambda: _with("Conv", "f32", [1, 2, 5, 5, 5], [
        const("w", np.ones([2, 2, 2, 2, 2]), np.float32)], dilations=[1, 1, 2], strides=[2, 2, 2]), "op",
     "fails the session"),
]


@pytest.mark.parametrize(("case", "build", "node", "reason"), FAILING, ids=[c[0] for c in FAILING])
def test_a_graph_the_real_ep_cannot_build_is_predicted_so(qnn_backend, qnn_ep, case, build, node, reason):
    """onnxruntime-qnn 2.7 takes the node and then fails (or crashes) creating the session: the backend refuses the
    node, its reason saying the session fails, and the crash stays in the child process the oracle runs it in."""
    result = run_oracle(qnn_backend, build(), qnn_ep, case=case)
    assert not result.built
    said = [result.reasons[node]] if node else list(result.reasons.values())
    assert any(reason in text and "session" in text for text in said), said


def test_q_as_graph_output_without_its_dq_builds(qnn_backend, qnn_ep):
    """The other side: a QuantizeLinear's output alone among the graph outputs is fine."""
    result = run_oracle(qnn_backend, _qdq_io(["y", "q"]), qnn_ep, case="q output")
    assert result.built and result.matches, result.diff()
    assert "q" in result.real_nodes


# -- QDQ: per-channel weights (classes 1 and 13) ---------------------------------------------------------------------
@pytest.mark.parametrize(("weight", "zero_point", "expected"), [
    (np.int8, 0, True), (np.int8, 3, False), (np.uint8, 128, True), (np.uint8, 0, False)])
def test_qdq_matmul_per_channel_weight_zero_points_as_the_real_ep(qnn_backend, qnn_ep, weight, zero_point, expected):
    """The HTP quantizes weights per channel symmetrically: the QDQ MatMul unit is taken with zero points 0 (int8)
    or 128 (uint8) only."""
    result = run_oracle(qnn_backend, _qdq_matmul(zero_point, weight), qnn_ep, case=f"per channel {zero_point}")
    assert result.matches, result.diff()
    assert ("op" in result.real_nodes) is expected


@pytest.mark.parametrize("output", [False, True])
@pytest.mark.parametrize("per_channel", [False, True])
def test_standalone_dequantize_linear_as_the_real_ep(qnn_backend, qnn_ep, per_channel, output):
    """A DequantizeLinear of a weight outside a QDQ unit (feeding a float Add; also a graph output, which onnxruntime
    duplicates it for) is taken per tensor, left on the CPU per channel."""
    w = np.random.default_rng(0).integers(-50, 50, (8, 6)).astype(np.int8)
    scale, zero = (np.full(6, 0.01), np.zeros(6)) if per_channel else (0.01, 0)
    model = graph_model([helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wf"], axis=1, name="dqw"),
                         helper.make_node("Add", ["x", "wf"], ["y"], name="add")],
                        [("x", T.FLOAT, [8, 6])], [("y", T.FLOAT, [8, 6])] + ([("wf", T.FLOAT, [8, 6])] if output else []),
                        [numpy_helper.from_array(w, "w"), const("s", scale, np.float32), const("z", zero, np.int8)],
                        opset=21)
    result = run_oracle(qnn_backend, model, qnn_ep, case=f"standalone dq {per_channel} {output}")
    assert result.matches, result.diff()
    assert any(result.nodes[n] == "DequantizeLinear" for n in result.real_nodes) is not per_channel


# -- found by the independent generator (qnn_random_graphs) -----------------------------------------------------------
def test_reduce_with_noop_with_empty_axes_and_axes_given_as_the_real_ep(qnn_backend, qnn_ep):
    model = _with("ReduceSum", "f32", [3, 4], [const("axes", [1], np.int64)], opset=18, noop_with_empty_axes=1)
    assert taken(qnn_backend, qnn_ep, model, "noop_with_empty_axes with axes")


@pytest.mark.parametrize(("shape", "expected"), [([2, 3, 4], True), ([2, 3, 2, 2, 2], False)])
def test_reduce_log_sum_exp_as_the_real_ep(qnn_backend, qnn_ep, shape, expected):
    model = _reduce("ReduceLogSumExp", "f32", shape, [1])
    assert taken(qnn_backend, qnn_ep, model, f"ReduceLogSumExp rank {len(shape)}") is expected


@pytest.mark.parametrize("per_axis", [False, True])
def test_standalone_quantize_linear_as_the_real_ep(qnn_backend, qnn_ep, per_axis):
    """A QuantizeLinear whose DequantizeLinear writes a graph output (offloaded to the CPU) stands alone: taken per
    tensor, left on the CPU per axis."""
    scale = const("s", np.full([4] if per_axis else [], 0.05), np.float32)
    model = graph_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                         helper.make_node("QuantizeLinear", ["r", "s"], ["q"], name="op", axis=1),
                         helper.make_node("DequantizeLinear", ["q", "s"], ["y"], name="dq", axis=1)],
                        [("x", T.FLOAT, [3, 4])], [("y", T.FLOAT, [3, 4])], [scale], opset=21)
    assert taken(qnn_backend, qnn_ep, model, f"standalone q per axis {per_axis}") is not per_axis


def test_q_and_dq_graph_outputs_build_when_a_cpu_node_reads_the_quantized_value(qnn_backend, qnn_ep):
    """The other side of 'Duplicate definition of name': with the QuantizeLinear's input also read by a node left
    on the CPU (a Mean of one input), the session builds and the QuantizeLinear is taken."""
    model = graph_model([helper.make_node("Cos", ["x"], ["c"], name="cos"),
                         helper.make_node("Mean", ["c"], ["m"], name="mean"),
                         helper.make_node("QuantizeLinear", ["c", "s"], ["q"], name="op"),
                         helper.make_node("DequantizeLinear", ["q", "s"], ["d"], name="dq")],
                        [("x", T.FLOAT, [1, 1, 4])],
                        [("c", T.FLOAT, [1, 1, 4]), ("m", T.FLOAT, [1, 1, 4]), ("q", T.UINT8, [1, 1, 4]),
                         ("d", T.FLOAT, [1, 1, 4])], [const("s", 0.05, np.float32)], opset=21)
    assert taken(qnn_backend, qnn_ep, model, "q and dq outputs, c read on the CPU")


@pytest.mark.parametrize(("case", "build", "expected"), [
    ("expand_bool_to_rank5", lambda: _with("Expand", "bool", [4, 4, 5, 3], [const("s", [1, 4, 4, 5, 3], np.int64)]),
     False),
    ("batchnorm_rank5", lambda: _with("BatchNormalization", "f32", R5, [const(n, np.ones(3), np.float32)
                                                                         for n in "abcd"]), False),
    ("batchnorm_rank4", lambda: _with("BatchNormalization", "f32", R4, [const(n, np.ones(3), np.float32)
                                                                         for n in "abcd"]), True),
    ("globalmaxpool_rank5", lambda: _unary("GlobalMaxPool", "f32", [1, 2, 3, 3, 3]), False),
    ("globalaveragepool_rank5", lambda: _unary("GlobalAveragePool", "f32", [1, 2, 3, 3, 3]), True),
    ("lppool_rank3", lambda: _unary("LpPool", "f32", [1, 1, 3], kernel_shape=[1], p=2), True),
    ("gathernd_bool", lambda: _with("GatherND", "bool", R2, [const("i", [[0, 1]], np.int64)]), False),
    ("gathernd_int64", lambda: _with("GatherND", "i64", R2, [const("i", [[0, 1]], np.int64)]), False),
    ("gathernd_int32", lambda: _with("GatherND", "i32", R2, [const("i", [[0, 1]], np.int64)]), True),
    ("scatterelements_rank5", lambda: _with("ScatterElements", "f32", R5, [
        const("i", np.zeros([2, 1, 2, 2, 2]), np.int64), const("u", np.ones([2, 1, 2, 2, 2]), np.float32)], axis=1),
     False),
    ("scatterelements_rank4", lambda: _with("ScatterElements", "f32", R4, [
        const("i", np.zeros([2, 1, 2, 2]), np.int64), const("u", np.ones([2, 1, 2, 2]), np.float32)], axis=1), True),
    ("scatterelements_uint8_max", lambda: _with("ScatterElements", "u8", R2, [
        const("i", np.zeros([3, 1]), np.int64), const("u", np.ones([3, 1]), np.uint8)], axis=1, reduction="max"), True),
    ("scatterelements_float_max", lambda: _with("ScatterElements", "f32", R2, [
        const("i", np.zeros([3, 1]), np.int64), const("u", np.ones([3, 1]), np.float32)], axis=1, reduction="max"),
     False),
    ("scatterelements_int32_min", lambda: _with("ScatterElements", "i32", R2, [
        const("i", np.zeros([3, 1]), np.int64), const("u", np.ones([3, 1]), np.int32)], axis=1, reduction="min"),
     False),
    ("lppool_p1", lambda: _unary("LpPool", "f32", [1, 2, 4, 4], kernel_shape=[2, 2], p=1), True),
    ("lppool_p3", lambda: _unary("LpPool", "f32", [1, 2, 4, 4], kernel_shape=[2, 2], p=3), False),
    ("cast_float_to_int8", lambda: _unary("Cast", "f32", R2, out="i8", to=T.INT8), False),
    ("cast_int32_to_uint16", lambda: _unary("Cast", "i32", R2, out="u16", to=T.UINT16), False),
    ("gathernd_float16_rank5", lambda: _with("GatherND", "f16", [1, 2, 3, 4, 5], [const("i", [[0, 0, 0, 3, 0]], np.int64)]),
     False),
    ("gathernd_float16_rank4", lambda: _with("GatherND", "f16", [2, 3, 4, 5], [const("i", [[0, 0, 3, 0]], np.int64)]),
     True),
    ("cast_input_to_float64_graph_output", lambda: one_node("Cast", [("x", T.FLOAT, R2)], [("y", T.DOUBLE, R2)],
                                                            to=T.DOUBLE), False),
    ("cast_to_float64_graph_output", lambda: graph_model(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Cast", ["r"], ["y"], to=T.DOUBLE, name="op")],
        [("x", T.FLOAT, R2)], [("y", T.DOUBLE, R2)]), False),
    ("lpnorm_rank5", lambda: _unary("LpNormalization", "f32", [3, 3, 1, 1, 2], axis=1, p=2), False),
    ("lpnorm_rank4", lambda: _unary("LpNormalization", "f32", [3, 3, 2, 2], axis=1, p=2), True),
    ("gather_int64_scalar_index", lambda: _with("Gather", "i64", [3, 2], [const("i", -1, np.int64)], axis=1), False),
    ("gather_int64_vector_index", lambda: _with("Gather", "i64", [3, 2], [const("i", [-1], np.int64)], axis=1), True),
    ("gather_int64_rank1_scalar_index", lambda: _with("Gather", "i64", [4], [const("i", 2, np.int64)]), True),
    ("gather_int64_scalar_index_read_by_a_node", lambda: _gather_then(T.INT64), True),
    ("gather_int64_scalar_index_read_and_output", lambda: _gather_then(T.INT64, also_output=True), False),
    ("cast_int8_to_float", lambda: _unary("Cast", "i8", R2, out="f32", to=T.FLOAT), False),
    ("cast_int16_to_float", lambda: _unary("Cast", "i16", R2, out="f32", to=T.FLOAT), False),
    ("cast_int16_to_int32", lambda: _unary("Cast", "i16", R2, out="i32", to=T.INT32), True),
    ("matmul_rank5", lambda: _with("MatMul", "f32", [1, 1, 3, 4, 2], [const("w", np.ones([2, 4]), np.float32)]), False),
    ("matmul_rank4", lambda: _with("MatMul", "f32", [1, 3, 4, 2], [const("w", np.ones([2, 4]), np.float32)]), True),
    ("matmul_rank5_input_rank2", lambda: one_node("MatMul", [("a", T.FLOAT, [1, 1, 3, 4, 2]), ("b", T.FLOAT, [2, 4])],
                                                 [("y", T.FLOAT, None)]), True),
    ("matmul_rank2_constant_rank5", lambda: graph_model([helper.make_node("MatMul", ["w", "b"], ["y"], name="op")], [
        ("b", T.FLOAT, [1, 1, 2, 4, 2])], [("y", T.FLOAT, None)], [const("w", np.ones([3, 4]), np.float32)]), True),
    ("matmul_rank5_both", lambda: one_node("MatMul", [("a", T.FLOAT, [1, 1, 4, 3, 4]), ("b", T.FLOAT, [1, 1, 4, 4, 8])],
                                          [("y", T.FLOAT, None)]), True),
    # asked with onnxruntime's assignment info (no EPContext output)
    ("lppool_1d_ceil", lambda: _unary("LpPool", "f32", [1, 2, 5], opset=18, kernel_shape=[2], strides=[2], p=2,
                                      ceil_mode=1), False),
    ("lppool_2d_ceil_even", lambda: _unary("LpPool", "f32", [1, 2, 4, 4], opset=18, kernel_shape=[2, 2],
                                           strides=[2, 2], p=2, ceil_mode=1), False),
    ("lppool_1d_pads", lambda: _unary("LpPool", "f32", [1, 2, 5], opset=18, kernel_shape=[2], p=2, pads=[1, 1]), True),
    ("split_uint8_one_output", lambda: one_node("Split", [("x", T.UINT8, [2, 4])], [("y", T.UINT8, None)], opset=18,
                                                axis=1, num_outputs=1), True),
    ("split_uint8_two_outputs", lambda: one_node("Split", [("x", T.UINT8, [2, 4])],
                                                 [("y", T.UINT8, None), ("z", T.UINT8, None)], opset=18, axis=1,
                                                 num_outputs=2), False),
    ("resize_cubic_scales", lambda: _with("Resize", "f32", [1, 2, 3, 3], [
        const("roi", [], np.float32), const("scales", [1, 1, 2, 2], np.float32)], opset=13, mode="cubic"), True),
    ("resize_cubic_scales_down", lambda: _with("Resize", "f32", [1, 2, 6, 6], [
        const("roi", [], np.float32), const("scales", [1, 1, 0.5, 0.5], np.float32)], opset=13, mode="cubic"), True),
    ("topk_axis_minus2", lambda: _topk("f32", [4, 5, 5], axis=-2), False),
    ("topk_int64_axis_0", lambda: _topk("i64", [3, 3, 5], axis=0), False),
    ("topk_int64_last_axis", lambda: _topk("i64", [3, 3, 5], axis=2), True),
    ("topk_axis_1_of_rank3", lambda: _topk("f32", [4, 5, 5], axis=1), True),
    ("topk_float16_smallest_axis_minus2", lambda: _topk("f16", [3, 5], axis=-2, largest=0), False),
    ("topk_axis_minus1_smallest", lambda: _topk("f32", [4, 5, 5], axis=-1, largest=0), True),
    ("reducesum_axes_named_empty", lambda: graph_model(
        [helper.make_node("ReduceSum", ["x", ""], ["y"], keepdims=0, name="op")], [("x", T.FLOAT, [2, 3, 4])],
        [("y", T.FLOAT, None)], opset=18), False),
    ("reducesum_no_axes_input", lambda: graph_model(
        [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0, name="op")], [("x", T.FLOAT, [2, 3, 4])],
        [("y", T.FLOAT, None)], opset=18), True),
    ("split_int64_one_output_graph_output", lambda: graph_model(
        [helper.make_node("Add", ["x", "x"], ["a"], name="add"),
         helper.make_node("Split", ["a"], ["y"], axis=1, num_outputs=1, name="op")],
        [("x", T.INT64, [2, 4])], [("y", T.INT64, None)], opset=18), False),
    ("split_int64_one_output_read_inside", lambda: graph_model(
        [helper.make_node("Split", ["x"], ["s"], axis=1, num_outputs=1, name="op"),
         helper.make_node("Mul", ["s", "s"], ["y"], name="mul")], [("x", T.INT64, [2, 4])], [("y", T.INT64, None)],
        opset=18), True),
    ("pad_reflect_wider_than_axis", lambda: _with("Pad", "f32", [1, 2, 4, 5], [
        const("pads", [0, 0, 4, 0, 0, 0, 0, 0], np.int64)], mode="reflect"), False),
    ("pad_reflect_axis_less_one", lambda: _with("Pad", "f32", [1, 2, 4, 5], [
        const("pads", [0, 1, 3, 4, 0, 0, 0, 0], np.int64)], mode="reflect"), True),
    ("quickgelu_float", lambda: _quick_gelu(T.FLOAT), True),
    ("quickgelu_float16", lambda: _quick_gelu(T.FLOAT16), False),  # (onnxruntime does not fuse it: Sigmoid, Muls)
    # Resize nearest: pytorch_half_pixel at rank 4 only; tf_half_pixel_for_nn with floor at rank 4 only
    ("resize_pytorch_half_pixel_rank3", lambda: _resize([1, 2, 4], "floor", "pytorch_half_pixel"), False),
    ("resize_pytorch_half_pixel_rank5", lambda: _resize([1, 2, 2, 4, 4], "round_prefer_ceil", "pytorch_half_pixel"),
     False),
    ("resize_pytorch_half_pixel_rank4", lambda: _resize([1, 2, 4, 4], "ceil", "pytorch_half_pixel"), True),
    ("resize_tf_half_pixel_for_nn_floor_rank4", lambda: _resize([1, 2, 4, 4], "floor", "tf_half_pixel_for_nn"), True),
    ("resize_tf_half_pixel_for_nn_round_rank4", lambda: _resize([1, 2, 4, 4], "round_prefer_floor",
                                                                "tf_half_pixel_for_nn"), False),
    ("resize_tf_half_pixel_for_nn_floor_rank3", lambda: _resize([1, 2, 4], "floor", "tf_half_pixel_for_nn"), False),
    ("resize_linear_tf_half_pixel_for_nn", lambda: _with("Resize", "f32", [1, 2, 4, 4], [
        const("roi", [], np.float32), const("scales", [1, 1, 2, 2], np.float32)], opset=13, mode="linear",
        coordinate_transformation_mode="tf_half_pixel_for_nn"), False),
    ("hardswish_float16_rank4", lambda: _unary("HardSwish", "f16", [2, 1, 2, 2], opset=18), True),
    # cubic by scales the graph computes or reads (the ONNX node cases' scales are a graph input)
    ("resize_cubic_scales_of_a_graph_input", lambda: graph_model(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="op", mode="cubic")],
        [("x", T.FLOAT, [1, 2, 3, 3]), ("scales", T.FLOAT, [4])], [("y", T.FLOAT, [1, 2, 6, 6])], opset=13), False),
    ("resize_linear_scales_of_a_graph_input", lambda: graph_model(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="op", mode="linear")],
        [("x", T.FLOAT, [1, 2, 3, 3]), ("scales", T.FLOAT, [4])], [("y", T.FLOAT, [1, 2, 6, 6])], opset=13), True),
    ("resize_cubic_scales_not_sizes_ratio", lambda: _with("Resize", "f32", [1, 2, 3, 2], [
        const("roi", [], np.float32), const("scales", [1, 1, 1.5, 3], np.float32)], opset=13, mode="cubic",
        coordinate_transformation_mode="align_corners"), False),
    ("cast_int16_to_int64_inside", lambda: graph_model(
        [helper.make_node("Cast", ["x"], ["c"], to=T.INT64, name="op"), helper.make_node("Add", ["c", "c"], ["y"])],
        [("x", T.INT16, R2)], [("y", T.INT64, R2)]), True),
    ("scatterelements_uint16_max", lambda: _with("ScatterElements", "u16", R2, [
        const("i", np.zeros([3, 1]), np.int64), const("u", np.ones([3, 1]), np.uint16)], axis=1, reduction="max"), False),
    ("scatterelements_uint16_add", lambda: _with("ScatterElements", "u16", R2, [
        const("i", np.zeros([3, 1]), np.int64), const("u", np.ones([3, 1]), np.uint16)], axis=1, reduction="add"), True),
    ("transpose_of_a_quantize_linear_the_ep_takes", lambda: _after_q("Transpose", perm=[1, 0]), True),
    ("transpose_of_a_graph_input_quantize_linear", lambda: _after_q("Transpose", relu=False, perm=[1, 0]), False),
    ("reshape_of_a_quantize_linear_the_ep_takes", lambda: _after_q("Reshape", [const("shape", [12], np.int64)]), False),
    ("reshape_of_a_graph_input_quantize_linear", lambda: _after_q("Reshape", [const("shape", [12], np.int64)],
                                                                  relu=False), True),
    ("slice_of_a_quantize_linear_the_ep_takes", lambda: _after_q("Slice", [
        const("starts", [0], np.int64), const("ends", [2], np.int64)]), False),
    # the other side of the dilated Conv sessions that fail (below): explicit pads, 3-D along the last axis unstrided
    ("conv_dilated_explicit_pads", lambda: _with("Conv", "f32", [1, 3, 6, 7], [const("w", np.ones([2, 3, 2, 3]),
                                                                                     np.float32)],
                                                 dilations=[1, 2], strides=[2, 2], pads=[1, 1, 1, 1]), True),
    ("conv3d_dilated_middle_axis", lambda: _with("Conv", "f32", [1, 2, 5, 5, 5], [const("w", np.ones([2, 2, 2, 2, 2]),
                                                                                         np.float32)],
                                                 dilations=[1, 2, 1], pads=[1] * 6), True),
    ("conv3d_dilated_strided_first_axis", lambda: _with("Conv", "f32", [1, 2, 5, 5, 5], [
        const("w", np.ones([2, 2, 2, 2, 2]), np.float32)], dilations=[1, 1, 2], strides=[2, 1, 1]), True),
    ("conv3d_dilated_last_axis", lambda: _with("Conv", "f32", [1, 2, 5, 5, 5], [const("w", np.ones([2, 2, 2, 2, 2]),
                                                                                       np.float32)],
                                               dilations=[1, 1, 2]), True),
], ids=lambda c: c if isinstance(c, str) else "")
def test_found_by_the_generator_as_the_real_ep(qnn_backend, qnn_ep, case, build, expected):
    assert taken(qnn_backend, qnn_ep, build(), case) is expected


def _quick_gelu(dtype):
    node = helper.make_node("QuickGelu", ["x"], ["y"], domain="com.microsoft", name="op", alpha=1.702)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", dtype, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", dtype, [2, 3, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=10)


@pytest.mark.parametrize(("case", "build"), [
    ("resize_cubic_scales", lambda: _with("Resize", "f32", [1, 2, 3, 3], [
        const("roi", [], np.float32), const("scales", [1, 1, 2, 2], np.float32)], opset=13, mode="cubic")),
    ("split_uint8_one_output", lambda: one_node("Split", [("x", T.UINT8, [2, 4])], [("y", T.UINT8, None)], opset=18,
                                                axis=1, num_outputs=1)),
    ("quickgelu_float", lambda: _quick_gelu(T.FLOAT)),
    ("q_and_dq_graph_outputs", lambda: _qdq_io(["y", "q", "d"])),
    ("cast_to_float64_graph_output_after_conv", lambda: _after_conv(["Relu", "Sqrt"], "cast")),
    ("cast_to_int64_graph_output_after_conv", lambda: _after_conv([], "cast64")),
    ("matmul_rank5_input_rank2", lambda: one_node("MatMul", [("a", T.FLOAT, [1, 1, 3, 4, 2]), ("b", T.FLOAT, [2, 4])],
                                                 [("y", T.FLOAT, None)])),
    ("transpose_of_a_quantize_linear_the_ep_takes", lambda: _after_q("Transpose", perm=[1, 0])),
    ("cast_int16_to_int64_inside", lambda: graph_model(
        [helper.make_node("Cast", ["x"], ["c"], to=T.INT64, name="op"), helper.make_node("Add", ["c", "c"], ["y"])],
        [("x", T.INT16, R2)], [("y", T.INT64, R2)])),
    ("dq_graph_output_after_conv_add", lambda: _after_conv(["AddConst"], "qdq")),
    ("dq_graph_output_after_globalmaxpool", lambda: graph_model(
        [helper.make_node("GlobalMaxPool", ["x"], ["r"]), helper.make_node("QuantizeLinear", ["r", "s", "z"], ["q"]),
         helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])], [("x", T.FLOAT, [1, 3, 5, 3])],
        [("y", T.FLOAT, None)], [const("s", 0.05, np.float32), const("z", 0, np.int8)], opset=21))])
def test_newly_claimed_nodes_run_on_the_simulator_as_on_the_cpu(qnn_ep, tmp_path, case, build):
    """What the rules newly claim runs with the real EP (HTP simulator) as onnxruntime's CPU EP computes it, within
    the HTP's float16 arithmetic (0.01 + 1% of the output's scale)."""
    from mobile_ep import ep_libraries, runtime

    path = tmp_path / "m.onnx"
    onnx.save(build(), path)
    feeds = runtime.make_inputs(path, seed=0)
    reference = runtime.run(path, feeds)
    got = ep_libraries.run_outputs(path, qnn_ep.ep_library(), qnn_ep.options, feeds)
    for name, ref in reference.items():
        ref = np.asarray(ref, np.float64)
        step = 0.05 if case.startswith(("q_and", "dq_")) else 0.0
        step = 1.0 if case.startswith(("transpose_of", "cast_to_int64")) else step  # (one step: a uint8, an integer)  # (one quantization step: re-quantized on the HTP)
        assert np.max(np.abs(ref - np.asarray(got[name], np.float64))) <= 0.01 + step + 0.01 * np.max(np.abs(ref)), case


def _q_shared_by_two_dq():
    return graph_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                        helper.make_node("QuantizeLinear", ["r", "s"], ["q"], name="q"),
                        helper.make_node("DequantizeLinear", ["q", "s"], ["d"], name="dq"),
                        helper.make_node("DequantizeLinear", ["q", "s"], ["d2"], name="dq2"),
                        helper.make_node("Relu", ["d2"], ["y"], name="relu2")],
                       [("x", T.FLOAT, R2)], [("q", T.UINT8, R2), ("d", T.FLOAT, R2), ("y", T.FLOAT, R2)],
                       [const("s", 0.05, np.float32)])


@pytest.mark.parametrize(("case", "build"), [("q_and_dq_graph_outputs", lambda: _qdq_io(["y", "q", "d"])),
                                             ("q_shared_by_two_dq", _q_shared_by_two_dq)])
def test_q_and_its_dq_both_graph_outputs_as_the_real_ep(qnn_backend, qnn_ep, case, build):
    """A QuantizeLinear whose output and the output of a DequantizeLinear of it are both graph outputs: a session
    builds (only with EPContext output on does onnxruntime-qnn 2.7 fail it, 'Duplicate definition of name') and the
    EP takes the QuantizeLinear, as predicted; the DequantizeLinear writing a graph output stays on the CPU."""
    result = run_oracle(qnn_backend, build(), qnn_ep, case=case)
    assert result.matches, result.diff()
    assert "q" in result.real_nodes and "dq" not in result.real_nodes


@pytest.mark.parametrize(("shape", "whole"), [([2, 3, 4, 5], True), ([2, 3, 2, 2, 2], False)])
def test_hardswish_rank5_is_inlined_as_the_real_ep(qnn_backend, qnn_ep, shape, whole):
    """Class 15: the EP takes HardSwish whole up to rank 4; at rank 5 it refuses it, onnxruntime inlines the body and
    the EP takes its Mul, the HardSigmoid staying on the CPU.  The backend judges the body too."""
    result = run_oracle(qnn_backend, _unary("HardSwish", "f32", shape, opset=14), qnn_ep, case=f"HardSwish {shape}")
    assert result.matches, result.diff()
    cpu = sorted(result.nodes[n] for n in result.real.cpu_nodes)
    assert cpu == ([] if whole else ["HardSigmoid"])



def test_float16_function_op_the_cpu_inlines_is_taken_whole_as_the_real_ep(qnn_backend, qnn_ep):
    """The CPU EP has no float16 LeakyRelu: the CPU-only session inlines it (Mul, Less, Where), its output only as a
    float32 copy.  The EP takes LeakyRelu whole, with the ReduceMin after it, in one partition, and so does the
    backend (core gives the node back although only its float32 copy is in the basic-level graph)."""
    model = graph_model([helper.make_node("LeakyRelu", ["x"], ["a"], name="op"),
                         helper.make_node("ReduceMin", ["a"], ["y"], keepdims=1, name="reduce")],
                        [("x", T.FLOAT16, [2, 3, 4])], [("y", T.FLOAT16, [1, 1, 1])], opset=18)
    result = run_oracle(qnn_backend, model, qnn_ep, case="float16 LeakyRelu")
    assert result.matches, result.diff()
    assert {"op", "reduce"} <= result.real_nodes and len(result.real.partitions) == 1


@pytest.mark.parametrize(("op", "attrs", "expected"), [("GlobalMaxPool", {}, True), ("LRN", {"size": 1}, True),
                                                     ("AveragePool", {"kernel_shape": [1, 1]}, True),
                                                     ("Relu", {}, False)])
def test_graph_output_dequantize_after_a_layout_op_as_the_real_ep(qnn_backend, qnn_ep, op, attrs, expected):
    """op -> QuantizeLinear -> DequantizeLinear writing a graph output: offload_graph_io_quantization leaves the
    DequantizeLinear to the CPU, unless the op is one the EP takes in NHWC layout (the Transpose back to NCHW is
    moved after the Q/DQ pair: the DequantizeLinear is inside the EP's graph)."""
    model = graph_model([helper.make_node(op, ["x"], ["r"], name="first", **attrs),
                         helper.make_node("QuantizeLinear", ["r", "s", "z"], ["q"], name="q"),
                         helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="op")],
                        [("x", T.FLOAT, [1, 3, 5, 3])], [("y", T.FLOAT, None)],
                        [const("s", 0.05, np.float32), const("z", 0, np.int8)], opset=21)
    assert taken(qnn_backend, qnn_ep, model, f"{op} q dq output") is expected


def test_float16_function_body_the_cpu_inlines_is_a_partition_of_its_own_as_the_real_ep(qnn_backend, qnn_ep):
    """A float16 Softsign (no float16 kernel on the CPU, no QNN op: onnxruntime inlines it, its values float32 copies
    named ``InsertedPrecisionFreeCast__inlfunc_...`` in the CPU session) beside a Relu the EP takes first: the body
    is a partition of its own, as predicted."""
    model = graph_model([helper.make_node("Softsign", ["x"], ["y"], name="op"),
                         helper.make_node("Relu", ["z"], ["w"], name="relu")],
                        [("x", T.FLOAT16, [2, 3, 4]), ("z", T.FLOAT, [2, 3])],
                        [("y", T.FLOAT16, [2, 3, 4]), ("w", T.FLOAT, [2, 3])], opset=18)
    result = run_oracle(qnn_backend, model, qnn_ep, case="float16 Softsign")
    assert result.matches, result.diff()
    assert len(result.real.partitions) == 2 and {"relu"} in [set(p.nodes) for p in result.real.partitions]


def _after_conv(chain, last, first="Conv"):
    """*first* (a Conv, in NHWC on the EP) -> the ops of *chain* -> a Cast to a float64 graph output (*last*
    ``"cast"``) or a QuantizeLinear -> DequantizeLinear writing a graph output (``"qdq"``); the last node ``op``."""
    inits = [const("s", 0.05, np.float32), const("z", 0, np.int8)]
    inputs = ["x", "w"] if first == "Conv" else ["x"]  # (GlobalMaxPool, AveragePool, Relu: x only)
    if first == "Conv":
        inits.append(const("w", np.full((3, 3, 1, 1), 0.3), np.float32))
    attrs = {"kernel_shape": [1, 1]} if first == "AveragePool" else {}
    nodes = [helper.make_node(first, inputs, ["v0"], name="first", **attrs)]
    for i, op in enumerate(chain):
        ins = [f"v{i}"]
        if op == "AddConst":
            op, ins = "Add", ins + ["c"]
            inits.append(const("c", np.ones((1, 3, 1, 1)), np.float32))
        elif op == "Reshape":
            ins.append("shape")
            inits.append(const("shape", [1, 3, 16, 1], np.int64))
        nodes.append(helper.make_node(op, ins, [f"v{i + 1}"], name=f"mid{i}"))
    value = f"v{len(chain)}"
    if last in ("cast", "cast64"):
        to = T.DOUBLE if last == "cast" else T.INT64
        nodes.append(helper.make_node("Cast", [value], ["y"], to=to, name="op"))
        out = ("y", to, None)
    elif last == "two_dq":  # (the QuantizeLinear's output a graph output read by two DequantizeLinears)
        nodes += [helper.make_node("QuantizeLinear", [value, "s", "z"], ["q"], name="q"),
                  helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="op"),
                  helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y2"], name="dq2")]
        return graph_model(nodes, [("x", T.FLOAT, [1, 3, 4, 4])], [("y", T.FLOAT, None), ("q", T.INT8, None)], inits,
                           opset=21)
    elif last == "q_output":
        nodes += [helper.make_node("QuantizeLinear", [value, "s", "z"], ["q"], name="q"),
                  helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="op")]
        out = ("y", T.FLOAT, None)
        return graph_model(nodes, [("x", T.FLOAT, [1, 3, 4, 4])], [out, ("q", T.INT8, None)], inits, opset=21)
    else:
        nodes += [helper.make_node("QuantizeLinear", [value, "s", "z"], ["q"], name="q"),
                  helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="op")]
        out = ("y", T.FLOAT, None)
    return graph_model(nodes, [("x", T.FLOAT, [1, 3, 4, 4])], [out], inits, opset=21)


@pytest.mark.parametrize(("first", "chain", "last", "expected"), [
    ("Conv", [], "cast", True), ("Conv", ["Sqrt", "Neg"], "cast", True), ("Relu", ["Sqrt"], "cast", False),
    ("Conv", ["Reshape"], "cast", False), ("AveragePool", ["Sqrt"], "qdq", True), ("Conv", ["AddConst"], "qdq", True),
    ("Relu", ["Sqrt"], "qdq", False), ("Conv", ["Reshape"], "qdq", False), ("AveragePool", ["Sqrt"], "q_output", True),
    ("Conv", [], "cast64", True), ("Relu", [], "cast64", False), ("GlobalMaxPool", [], "two_dq", True)])
def test_graph_output_node_after_a_layout_op_and_a_chain_as_the_real_ep(qnn_backend, qnn_ep, first, chain, last,
                                                                        expected):
    """A node left to the CPU only because it writes a graph output (a Cast to float64, a DequantizeLinear offloaded)
    is taken when it reads, through ops onnxruntime's transpose optimizer moves a Transpose through, what a Conv or a
    pooling op the EP takes in NHWC makes: the Transpose back to NCHW goes down to the graph output.  Not after a
    Reshape (the Transpose stops there) nor without a layout op."""
    model = _after_conv(chain, last, first)
    assert taken(qnn_backend, qnn_ep, model, f"{first} {chain} {last}") is expected


@pytest.mark.parametrize("case", ["reducesum_noop_rank1", "resize_cubic_exclude_outside", "reducemin_int32_rank5"])
def test_nodes_the_real_ep_takes_and_computes_wrongly_stay_on_the_cpu(qnn_backend, qnn_ep, tmp_path, case):
    """onnxruntime-qnn 2.7 takes these and computes something else than the CPU: a ReduceSum with
    noop_with_empty_axes=1 and no axes on a rank-1 tensor (keepdims=0) as a sum over every axis, a cubic Resize with
    exclude_outside=1 as without it, an int32 ReduceMin of rank 5.  The backend leaves them to the CPU, saying why: the one placement it predicts
    differently from the real EP, on purpose."""
    from mobile_ep import ep_libraries, runtime

    if case == "reducesum_noop_rank1":
        model = graph_model([helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0, noop_with_empty_axes=1, name="op")],
                            [("x", T.FLOAT, [4])], [("y", T.FLOAT, None)], opset=18)
        said = "computes"
    elif case == "reducemin_int32_rank5":
        model = _reduce("ReduceMin", "i32", R5, [0, 2, 3])
        said = "computes"
    else:
        model = _with("Resize", "f32", [1, 2, 4, 4], [const("roi", [], np.float32), const("scales", [1, 1, 2, 2],
                                                                                           np.float32)],
                      opset=13, mode="cubic", exclude_outside=1)
        said = "computes"
    result = run_oracle(qnn_backend, model, qnn_ep, case=case)
    assert "op" in result.real_nodes and "op" not in result.predicted_nodes
    assert said in result.reasons["op"]
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    feeds = runtime.make_inputs(path, seed=0)
    reference = runtime.run(path, feeds)["y"]
    got = ep_libraries.run_outputs(path, qnn_ep.ep_library(), qnn_ep.options, feeds)["y"]
    assert np.max(np.abs(np.asarray(reference, np.float64) - got)) > 0.05 * np.max(np.abs(reference))


def _after_q(op, inits=(), relu=True, **attrs):
    """(Relu ->) QuantizeLinear -> *op* on its uint8 output: with the Relu the EP takes the QuantizeLinear, without it
    the QuantizeLinear of the graph input is offloaded to the CPU."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu")] if relu else []
    nodes += [helper.make_node("QuantizeLinear", ["r" if relu else "x", "s", "z"], ["q"], name="q"),
              helper.make_node(op, ["q"] + [t.name for t in inits], ["y"], name="op", **attrs)]
    return graph_model(nodes, [("x", T.FLOAT, [3, 4])], [("y", T.UINT8, None)],
                       [const("s", 0.05, np.float32), const("z", 128, np.uint8), *inits], opset=21)


def _loss(op, reduction="mean"):
    """One SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss node (opset 13): no CPU kernel, no QNN op, so
    onnxruntime inlines it after partitioning; SoftmaxCrossEntropyLoss's body holds a NegativeLogLikelihoodLoss node,
    inlined a round later again, and a ``Reshape`` to ``Shape(scores)`` that onnxruntime knows the shape of."""
    return graph_model([helper.make_node(op, ["x", "t"], ["z"], reduction=reduction, name="op")],
                       [("x", T.FLOAT, [3, 5]), ("t", T.INT64, [3])], [("z", T.FLOAT, [])], opset=13)


@pytest.mark.parametrize(("op", "partitions"), [("SoftmaxCrossEntropyLoss", 2), ("NegativeLogLikelihoodLoss", 1)])
def test_a_function_node_in_an_inlined_body_is_a_partition_of_its_own_as_the_real_ep(qnn_backend, qnn_ep, op,
                                                                                      partitions):
    """The EP takes SoftmaxCrossEntropyLoss's body in two partitions: its own nodes, then those of the
    NegativeLogLikelihoodLoss body onnxruntime inlines in the next round; NegativeLogLikelihoodLoss alone is one.
    The Reshape to ``Shape(x)`` is taken (static there), the Shape left on the CPU."""
    result = run_oracle(qnn_backend, _loss(op), qnn_ep, case=op)
    assert result.matches, result.diff()
    assert len(result.real.partitions) == len(result.predicted) == partitions
    if op == "SoftmaxCrossEntropyLoss":
        assert sorted(result.nodes[n] for n in result.real.cpu_nodes) == ["Shape"]


def test_check_takes_the_nodes_after_a_reshape_to_a_shape_onnxruntime_knows(tmp_path):
    path = tmp_path / "sce.onnx"
    onnx.save(_loss("SoftmaxCrossEntropyLoss"), path)
    result = CliRunner().invoke(main, ["check", str(path), "--ep", "qnn"])
    assert result.exit_code == 0, result.output
    assert "11/12 nodes claimed (91.7%) in 2 partitions" in result.output
    assert "dynamic shape" not in result.output


# -- com.microsoft QuantizeLinear/DequantizeLinear: what get_qnn_qdq_config writes for 16-bit activations ------------
def _contrib_qdq(model: onnx.ModelProto) -> onnx.ModelProto:
    """*model* with every QuantizeLinear/DequantizeLinear in the ``com.microsoft`` domain and no value infos, as
    onnxruntime.quantization writes a model quantized to uint16 activations (``get_qnn_qdq_config(...,
    activation_type=QUInt16)``): the weights' 8-bit DequantizeLinear nodes too, the ONNX opset kept."""
    for node in model.graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
            node.domain = "com.microsoft"
    del model.graph.value_info[:]
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def _qdq_matmul_u16(zero_point, conv=False, opset=21):
    """:func:`_qdq_matmul` with uint16 activations (zero point 32768) and contrib-domain Q/DQ nodes."""
    model = _qdq_matmul(zero_point, conv=conv)
    for init in model.graph.initializer:
        if init.name == "zx":
            init.CopyFrom(const("zx", 32768, np.uint16))
    model.opset_import[0].version = opset
    return _contrib_qdq(model)


@pytest.mark.parametrize(("conv", "zero_point", "expected"), [(True, 0, True), (False, 0, True), (False, 3, False)])
def test_contrib_domain_qdq_with_16_bit_activations_as_the_real_ep(qnn_backend, qnn_ep, conv, zero_point, expected):
    """The QNN EP takes com.microsoft Q/DQ units as the standard ones (opset 21, uint16 activations, int8 weights
    per channel): taken with a symmetric weight, a MatMul with weight zero point 3 left on the CPU, as the real EP
    does."""
    result = run_oracle(qnn_backend, _qdq_matmul_u16(zero_point, conv), qnn_ep, case=f"contrib u16 {conv} {zero_point}")
    assert result.built and result.matches, result.diff()
    assert ("op" in result.real_nodes) is expected



# -- If nodes: values their branches read from the outer graph (implicit inputs) -------------------------------------
def _branch(op, read, name):
    return helper.make_graph([helper.make_node(op, [read], [f"{name}_o"], name=name)], name, [],
                             [helper.make_tensor_value_info(f"{name}_o", T.FLOAT, R2)])


def _if_reading(read, tail):
    """x -> Relu ``a``; x or a -> Erf ``u_cpu`` (the EP has no Erf); ``op``: an If on the graph input ``c`` whose
    branches read *read* from the outer graph; *tail*: the nodes after it."""
    erf_input = "a" if tail == "relu" else "x"
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="a"),
             helper.make_node("Erf", [erf_input], ["u"], name="u_cpu"),
             helper.make_node("If", ["c"], ["i"], name="op", then_branch=_branch("Identity", read, "t"),
                              else_branch=_branch("Neg", read, "e"))]
    if tail == "relu":
        nodes.append(helper.make_node("Relu", ["i"], ["y"], name="b"))
    else:
        nodes += [helper.make_node("Add", ["i", "a"], ["s"], name="s"), helper.make_node("Add", ["s", "u"], ["y"], name="y")]
    return graph_model(nodes, [("x", T.FLOAT, R2), ("c", T.BOOL, [])], [("y", T.FLOAT, R2)],
                       [const("w", np.ones(R2), np.float32)])


@pytest.mark.parametrize(("read", "expected"), [("x", True), ("w", True), ("a", True), ("u", False)])
def test_if_reading_an_outer_value_as_the_real_ep(qnn_backend, qnn_ep, read, expected):
    """The EP refuses an If whose branches read a value made by a node it leaves on the CPU ("If implicit input
    is produced outside the QNN partition"); one reading a graph input, an initializer or a value of a node it
    takes is taken."""
    assert taken(qnn_backend, qnn_ep, _if_reading(read, "add"), f"If reading {read}") is expected


def test_group_joined_across_an_if_implicit_input_is_refused_as_the_real_ep(qnn_backend, qnn_ep):
    """a -> Erf -> (read by the If's branches) If -> b: the EP puts a and b in one group (to it the If only
    depends on its condition); onnxruntime, counting the branches' read of Erf's output as an edge, finds a path
    from a to b through CPU nodes, logs "set nodes that cannot be fused together" and the EP takes nothing."""
    result = run_oracle(qnn_backend, _if_reading("u", "relu"), qnn_ep, case="group across an If's implicit input")
    assert result.built, result.diff()
    assert not result.real_nodes  # (the real EP: every node on the CPU)
    assert result.matches, result.diff()
