"""Every legalizing rewrite: onnxruntime gives the same results before and after, on shapes that
broadcast and on edge values (infinities, NaN, signed zeros, large magnitudes)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from mepkit import const, make_model, tensor
from mobile_ep import RuleRegistry, Support
from mobile_ep import model_io as mir
from mobile_ep.contract import Backend, OpRule
from mobile_ep.passes import rewrites
from mobile_ep.passes.legalize import LegalizePass

EDGE = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 3.0, 6.0, 1e30, -1e30, np.inf, -np.inf, np.nan, 1e-30],
                dtype=np.float32)


class TakesAll(OpRule):
    op_types = ("Add", "Sub", "Mul", "Div", "Clip", "Max", "Min", "Concat", "Slice", "Reshape", "HardSigmoid", "Gather",
                "ReduceMean", "Sqrt", "Pow", "Conv", "Identity")


def backend_for(rewrite):
    class TakesAllButThis(OpRule):
        op_types = tuple(op for op in TakesAll.op_types if op not in rewrite.op_types)

    class Legalizing(Backend):
        name = "legalizing"

        def build_rules(self):
            return RuleRegistry([TakesAllButThis()])

        def rewrites(self):
            return (rewrite,)

    return Legalizing()


def run(model_proto, feeds):
    session = ort.InferenceSession(model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def legalized(model_proto, rewrite, tmp_path):
    model = mir.from_proto(model_proto)
    legal = LegalizePass(backend_for(rewrite))
    legal(model)
    path = mir.save(model, tmp_path / "legal.onnx")
    import onnx

    return onnx.load(path), legal


def assert_same(before, after, exact):
    for a, b in zip(before, after, strict=True):
        assert a.shape == b.shape
        if exact:
            np.testing.assert_array_equal(b, a)  # NaN == NaN here; -0.0 == 0.0
            if np.issubdtype(a.dtype, np.floating):  # signed zeros kept (the sign of a NaN means nothing)
                numbers = ~np.isnan(a)
                assert np.array_equal(np.signbit(a[numbers]), np.signbit(b[numbers]))
        else:
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def check(tmp_path, proto, feeds, rewrite, exact=True, applied=1):
    before = run(proto, feeds)
    new_proto, legal = legalized(proto, rewrite, tmp_path)
    assert len(legal.applied) == applied, legal.skipped
    old_ops = {n.op_type for n in proto.graph.node}
    assert not old_ops & set(rewrite.op_types) or applied == 0 or not {
        n.op_type for n in new_proto.graph.node} & set(rewrite.op_types)
    assert_same(before, run(new_proto, feeds), exact)
    return legal


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 3


def test_sum_to_add_broadcasts_and_keeps_edges(tmp_path):
    proto = make_model([helper.make_node("Sum", ["a", "b", "c"], ["y"], name="sum")],
                       [tensor("a", [2, 1, 14]), tensor("b", [3, 1]), tensor("c", [14])], [tensor("y", [2, 3, 14])])
    feeds = {"a": np.stack([EDGE, EDGE[::-1]])[:, None, :], "b": rnd(3, 1), "c": EDGE[::-1].copy()}
    legal = check(tmp_path, proto, feeds, rewrites.SumToAdd())
    assert legal.applied[0].into == ["Add", "Add"]


def test_mean_to_add_div(tmp_path):
    proto = make_model([helper.make_node("Mean", ["a", "b"], ["y"])], [tensor("a", [2, 14]), tensor("b", [14])],
                       [tensor("y", [2, 14])])
    check(tmp_path, proto, {"a": np.stack([EDGE, rnd(14)]), "b": EDGE[::-1].copy()}, rewrites.MeanToAddDiv())


@pytest.mark.parametrize("alpha, beta", [(0.2, 0.5), (1 / 6, 0.5), (0.5, 0.1)])
def test_hardsigmoid_to_relu6(tmp_path, alpha, beta):
    proto = make_model([helper.make_node("HardSigmoid", ["x"], ["y"], alpha=alpha, beta=beta)],
                       [tensor("x", [3, 14])], [tensor("y", [3, 14])])
    finite = EDGE[np.isfinite(EDGE)]
    x = np.stack([np.resize(finite, 14), rnd(14), np.linspace(-8, 8, 14, dtype=np.float32)])
    check(tmp_path, proto, {"x": x}, rewrites.HardSigmoidToRelu6(), exact=False)
    # infinities saturate the same way
    check(tmp_path, proto, {"x": np.resize(np.array([np.inf, -np.inf], np.float32), (3, 14))},
          rewrites.HardSigmoidToRelu6(), exact=False)


@pytest.mark.parametrize("rewrite", [rewrites.HardSwishToRelu6(), rewrites.HardSwishToHardSigmoid()])
def test_hardswish(tmp_path, rewrite):
    proto = make_model([helper.make_node("HardSwish", ["x"], ["y"])], [tensor("x", [2, 14])],
                       [tensor("y", [2, 14])], opset=14)
    finite = EDGE[np.isfinite(EDGE) & (np.abs(EDGE) < 1e20)]
    x = np.stack([np.resize(finite, 14), np.linspace(-5, 5, 14, dtype=np.float32)])
    check(tmp_path, proto, {"x": x}, rewrite, exact=False)


@pytest.mark.parametrize("opset, bounds", [(13, (-2.0, 2.0)), (13, (0.5, None)), (13, (None, 3.0)), (9, (-1.5, 4.0))])
def test_clip_to_max_min(tmp_path, opset, bounds):
    lo, hi = bounds
    if opset >= 11:
        inits = [const(n, np.array(v, np.float32)) for n, v in (("lo", lo), ("hi", hi)) if v is not None]
        inputs = ["x", "lo" if lo is not None else "", "hi" if hi is not None else ""]
        node = helper.make_node("Clip", inputs, ["y"])
    else:
        inits, node = [], helper.make_node("Clip", ["x"], ["y"], min=lo, max=hi)
    proto = make_model([node], [tensor("x", [14])], [tensor("y", [14])], inits, opset=opset)
    x = EDGE[~np.isnan(EDGE)]
    check(tmp_path, proto, {"x": np.resize(x, 14)}, rewrites.ClipToMaxMin())


def test_expand_to_mul_is_exact_and_uses_a_small_ones_tensor(tmp_path):
    proto = make_model([helper.make_node("Expand", ["x", "shape"], ["y"])], [tensor("x", [3, 1, 14])],
                       [tensor("y", [2, 3, 5, 14])], [const("shape", np.array([2, 1, 5, 1], np.int64))])
    x = np.stack([EDGE, -EDGE, np.copysign(np.zeros_like(EDGE), EDGE)])[:, None, :]
    check(tmp_path, proto, {"x": x}, rewrites.ExpandToMul())
    new_proto, _ = legalized(proto, rewrites.ExpandToMul(), tmp_path)
    (ones,) = [t for t in new_proto.graph.initializer if "ones" in t.name]
    assert list(ones.dims) == [2, 1, 5, 1]


def test_tile_to_concat(tmp_path):
    proto = make_model([helper.make_node("Tile", ["x", "r"], ["y"])], [tensor("x", [2, 3, 4])],
                       [tensor("y", [4, 3, 12])], [const("r", np.array([2, 1, 3], np.int64))])
    check(tmp_path, proto, {"x": rnd(2, 3, 4)}, rewrites.TileToConcat())


@pytest.mark.parametrize("opset", [11, 13])
def test_split_to_slices(tmp_path, opset):
    if opset < 13:
        node, inits = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, split=[2, 3, 1]), []
    else:
        node, inits = helper.make_node("Split", ["x", "s"], ["a", "b", "c"], axis=1), [const("s", np.array([2, 3, 1], np.int64))]
    proto = make_model([node], [tensor("x", [2, 6, 4])], [tensor(n, None) for n in "abc"], inits, opset=opset)
    check(tmp_path, proto, {"x": rnd(2, 6, 4)}, rewrites.SplitToSlices())


def test_split_without_sizes_divides_evenly(tmp_path):
    proto = make_model([helper.make_node("Split", ["x"], ["a", "b"], axis=-1)], [tensor("x", [3, 8])],
                       [tensor("a", None), tensor("b", None)])
    check(tmp_path, proto, {"x": rnd(3, 8)}, rewrites.SplitToSlices())


@pytest.mark.parametrize("op, extra", [("Unsqueeze", [0, 3]), ("Squeeze", [1])])
def test_unsqueeze_and_squeeze_to_reshape(tmp_path, op, extra):
    proto = make_model([helper.make_node(op, ["x", "axes"], ["y"])], [tensor("x", [2, 1, 5])], [tensor("y", None)],
                       [const("axes", np.array(extra, np.int64))])
    check(tmp_path, proto, {"x": rnd(2, 1, 5)}, rewrites.UnsqueezeToReshape())


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_flatten_to_reshape(tmp_path, axis):
    proto = make_model([helper.make_node("Flatten", ["x"], ["y"], axis=axis)], [tensor("x", [2, 3, 4])],
                       [tensor("y", None)])
    check(tmp_path, proto, {"x": rnd(2, 3, 4)}, rewrites.FlattenToReshape())


def test_neg_to_mul_keeps_signed_zeros(tmp_path):
    proto = make_model([helper.make_node("Neg", ["x"], ["y"])], [tensor("x", [14])], [tensor("y", [14])])
    check(tmp_path, proto, {"x": EDGE.copy()}, rewrites.NegToMul())


@pytest.mark.parametrize("rank", [2, 3, 4])
def test_batchnorm_to_mul_add(tmp_path, rank):
    c = 3
    shape = [2, c] + [4] * (rank - 2)
    inits = [const("s", rnd(c, seed=1)), const("b", rnd(c, seed=2)), const("m", rnd(c, seed=3)),
             const("v", np.abs(rnd(c, seed=4)) + 0.1)]
    proto = make_model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)],
                       [tensor("x", shape)], [tensor("y", shape)], inits)
    check(tmp_path, proto, {"x": rnd(*shape)}, rewrites.BatchNormToMulAdd(), exact=False)


@pytest.mark.parametrize("axis", [-1, 1])
def test_layernorm_to_primitives(tmp_path, axis):
    shape = [2, 3, 8]
    norm_shape = shape[axis:] if axis >= 0 else shape[axis:]
    inits = [const("g", rnd(*norm_shape, seed=5)), const("b", rnd(*norm_shape, seed=6))]
    proto = make_model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=axis, epsilon=1e-5)],
                       [tensor("x", shape)], [tensor("y", shape)], inits, opset=17)
    check(tmp_path, proto, {"x": rnd(*shape) * 10}, rewrites.LayerNormToPrimitives(), exact=False)


@pytest.mark.parametrize("size", [1, 3, 5])  # onnxruntime requires an odd size
def test_lrn_to_conv(tmp_path, size):
    shape = [1, 7, 3, 3]
    proto = make_model([helper.make_node("LRN", ["x"], ["y"], size=size, alpha=0.01, beta=0.75, bias=1.5)],
                       [tensor("x", shape)], [tensor("y", shape)])
    check(tmp_path, proto, {"x": rnd(*shape) * 4}, rewrites.LRNToConv(), exact=False)


def test_rewrite_is_not_applied_when_the_backend_would_not_take_its_nodes(tmp_path):
    class NoDiv(TakesAll):
        op_types = tuple(op for op in TakesAll.op_types if op != "Div")

    class Picky(Backend):
        name = "picky"

        def build_rules(self):
            return RuleRegistry([NoDiv()])

        def rewrites(self):
            return (rewrites.MeanToAddDiv(),)

    proto = make_model([helper.make_node("Mean", ["a", "b"], ["y"], name="mean")],
                       [tensor("a", [4]), tensor("b", [4])], [tensor("y", [4])])
    model = mir.from_proto(proto)
    legal = LegalizePass(Picky())
    legal(model)
    assert legal.applied == []
    assert legal.skipped[0].reason == "picky would not take the Div it makes: picky has no rule for Div"
    assert [n.op_type for n in model.graph] == ["Mean"]
    # no phantom uses left on the inputs by the abandoned nodes
    a = model.graph.inputs[0]
    assert [u.node.op_type for u in a.uses()] == ["Mean"]


def test_rewrite_keeps_graph_output_names(tmp_path):
    proto = make_model([helper.make_node("Sum", ["a", "b"], ["out"], name="sum")],
                       [tensor("a", [4]), tensor("b", [4])], [tensor("out", [4])])
    new_proto, _ = legalized(proto, rewrites.SumToAdd(), tmp_path)
    assert [o.name for o in new_proto.graph.output] == ["out"]


def test_match_reasons():
    proto = make_model([helper.make_node("Expand", ["x", "s"], ["y"])], [tensor("x", [3]), tensor("s", [1], TensorProto.INT64)],
                       [tensor("y", None)])
    model = mir.from_proto(proto)
    legal = LegalizePass(backend_for(rewrites.ExpandToMul()))
    legal(model)
    assert legal.skipped[0].reason == "the shape (input 1) is not constant"


def test_support_type_is_used():
    assert not Support.no("x")


@pytest.mark.parametrize("groups, channels", [(3, 12), (2, 8), (4, 4)])
def test_channel_shuffle_to_gather(tmp_path, groups, channels):
    shape = [2, channels, 3, 5]
    nodes = [
        helper.make_node("Reshape", ["x", "s5"], ["r"], name="split_groups"),
        helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3, 4], name="swap"),
        helper.make_node("Reshape", ["t", "s4"], ["y"], name="merge"),
    ]
    inits = [const("s5", np.array([2, groups, channels // groups, 3, 5], np.int64)),
             const("s4", np.array(shape, np.int64))]
    proto = make_model(nodes, [tensor("x", shape)], [tensor("y", shape)], inits)
    legal = check(tmp_path, proto, {"x": rnd(*shape)}, rewrites.ChannelShuffleToGather())
    assert legal.applied[0].into == ["Gather"]
    new_proto, _ = legalized(proto, rewrites.ChannelShuffleToGather(), tmp_path)
    assert [n.op_type for n in new_proto.graph.node] == ["Gather"]  # the rank-5 nodes are gone


def test_channel_shuffle_needs_the_exact_pattern(tmp_path):
    shape = [1, 6, 2, 2]
    nodes = [helper.make_node("Reshape", ["x", "s5"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 1, 2, 4, 3]),
             helper.make_node("Reshape", ["t", "s4"], ["y"])]
    inits = [const("s5", np.array([1, 2, 3, 2, 2], np.int64)), const("s4", np.array(shape, np.int64))]
    proto = make_model(nodes, [tensor("x", shape)], [tensor("y", shape)], inits)
    model = mir.from_proto(proto)
    legal = LegalizePass(backend_for(rewrites.ChannelShuffleToGather()))
    legal(model)
    assert legal.applied == []
    assert "does not swap the group axes" in legal.skipped[-1].reason


def test_matmul_nd_to_flat_matmul(tmp_path):
    class FlatOnly(OpRule):
        op_types = ("MatMul", "Reshape")

        def check(self, unit, ctx):
            node = unit.target
            return Support.check(node.op_type != "MatMul" or ctx.rank(node.inputs[0]) == 2, "only 2-D MatMul")

    class Backend_(Backend):
        name = "flat"

        def build_rules(self):
            return RuleRegistry([FlatOnly()])

        def rewrites(self):
            return (rewrites.MatMulToFlatMatMul(),)

    proto = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [tensor("x", [2, 5, 8])],
                       [tensor("y", [2, 5, 3])], [const("w", rnd(8, 3, seed=9))])
    feeds = {"x": rnd(2, 5, 8)}
    model = mir.from_proto(proto)
    legal = LegalizePass(Backend_())
    legal(model)
    assert legal.applied[0].into == ["Reshape", "MatMul", "Reshape"]
    import onnx

    assert_same(run(proto, feeds), run(onnx.load(mir.save(model, tmp_path / "mm.onnx")), feeds), exact=False)


def test_matmul_with_activation_b_is_left_alone(tmp_path):
    proto = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [tensor("x", [2, 5, 8]), tensor("w", [8, 3])],
                       [tensor("y", [2, 5, 3])])
    model = mir.from_proto(proto)
    legal = LegalizePass(backend_for(rewrites.MatMulToFlatMatMul()))
    legal(model)
    assert legal.applied == [] and legal.skipped[0].reason == "B (input 1) is not constant"


@pytest.mark.parametrize("shape", [[2, 3, 5], [1, 4, 3, 5]])
def test_instancenorm_to_primitives(tmp_path, shape):
    c = shape[1]
    inits = [const("s", rnd(c, seed=1)), const("b", rnd(c, seed=2))]
    proto = make_model([helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-4)],
                       [tensor("x", shape)], [tensor("y", shape)], inits)
    check(tmp_path, proto, {"x": rnd(*shape) * 5 + 2}, rewrites.InstanceNormToPrimitives(), exact=False)


def test_reciprocal_to_div(tmp_path):
    proto = make_model([helper.make_node("Reciprocal", ["x"], ["y"])], [tensor("x", [14])], [tensor("y", [14])])
    check(tmp_path, proto, {"x": EDGE.copy()}, rewrites.ReciprocalToDiv())


@pytest.mark.parametrize("opset, axes, keepdims", [(11, [1], 1), (11, None, 0), (13, [0, 2], 0), (18, [-1], 1)])
def test_reducesum_to_mean(tmp_path, opset, axes, keepdims):
    shape = [2, 3, 4]
    inputs, inits, attrs = ["x"], [], {"keepdims": keepdims}
    if opset >= 13 and axes is not None:
        inputs.append("axes")
        inits.append(const("axes", np.array(axes, np.int64)))
    elif axes is not None:
        attrs["axes"] = axes
    proto = make_model([helper.make_node("ReduceSum", inputs, ["y"], **attrs)], [tensor("x", shape)],
                       [tensor("y", None)], inits, opset=opset)
    check(tmp_path, proto, {"x": rnd(*shape)}, rewrites.ReduceSumToMean(), exact=False)


@pytest.mark.parametrize("opset, axes, keepdims", [(13, [-1], 1), (13, None, 0), (18, [1, 2], 1), (18, [0], 0)])
def test_reducel2_to_mean(tmp_path, opset, axes, keepdims):
    """F.normalize's norm (Swin V2's cosine attention): large, tiny and zero rows too."""
    shape = [2, 3, 4]
    inputs, inits, attrs = ["x"], [], {"keepdims": keepdims}
    if opset >= 18 and axes is not None:
        inputs.append("axes")
        inits.append(const("axes", np.array(axes, np.int64)))
    elif axes is not None:
        attrs["axes"] = axes
    proto = make_model([helper.make_node("ReduceL2", inputs, ["y"], **attrs)], [tensor("x", shape)],
                       [tensor("y", None)], inits, opset=opset)
    x = rnd(*shape)
    x[0, 0] = [1e18, -3e18, 2e-20, 0.0]
    x[1, 2] = 0.0
    check(tmp_path, proto, {"x": x}, rewrites.ReduceL2ToMean(), exact=False)


def test_abs_to_relu_is_exact(tmp_path):
    class Relus(OpRule):
        op_types = ("Relu", "Mul", "Add")

    class Backend_(Backend):
        name = "relus"

        def build_rules(self):
            return RuleRegistry([Relus()])

        def rewrites(self):
            return (rewrites.AbsToRelu(),)

    proto = make_model([helper.make_node("Abs", ["x"], ["y"])], [tensor("x", [14])], [tensor("y", [14])])
    before = run(proto, {"x": EDGE.copy()})
    model = mir.from_proto(proto)
    LegalizePass(Backend_())(model)
    import onnx

    after = run(onnx.load(mir.save(model, tmp_path / "abs.onnx")), {"x": EDGE.copy()})
    assert_same(before, after, exact=True)
    assert [n.op_type for n in model.graph] == ["Mul", "Relu", "Relu", "Add"]


@pytest.mark.parametrize("alpha, beta, trans_b", [(0.5, 1.0, 0), (1.0, 2.0, 1), (3.0, 0.25, 1)])
def test_gemm_fold_scales(tmp_path, alpha, beta, trans_b):
    w = rnd(4, 6, seed=3) if trans_b else rnd(6, 4, seed=3)
    inits = [const("w", w), const("c", rnd(4, seed=4))]
    proto = make_model([helper.make_node("Gemm", ["x", "w", "c"], ["y"], alpha=alpha, beta=beta, transB=trans_b)],
                       [tensor("x", [3, 6])], [tensor("y", [3, 4])], inits)

    class GemmPlain(OpRule):
        op_types = ("Gemm",)

        def check(self, unit, ctx):
            from mobile_ep import attr

            node = unit.target
            return Support.check(attr(node, "alpha", 1.0) == 1.0 and attr(node, "beta", 1.0) == 1.0,
                                 "alpha and beta must be 1")

    class Backend_(Backend):
        name = "gemm"

        def build_rules(self):
            return RuleRegistry([GemmPlain()])

        def rewrites(self):
            return (rewrites.GemmFoldScales(),)

    feeds = {"x": rnd(3, 6)}
    before = run(proto, feeds)
    model = mir.from_proto(proto)
    legal = LegalizePass(Backend_())
    legal(model)
    assert len(legal.applied) == 1
    import onnx

    assert_same(before, run(onnx.load(mir.save(model, tmp_path / "g.onnx")), feeds), exact=False)


@pytest.mark.parametrize("array", [np.arange(6, dtype=np.int64).reshape(2, 3), np.float32(0.5), np.zeros(0, np.float16),
                                   np.array([True, False]), np.arange(4, dtype=np.uint8)], ids=str)
def test_builder_constants_are_the_tensors_ir_tensor_makes(array):
    """Builder.const makes its tensor with ir.Tensor (ir.tensor's protocol checks cost ten times as much):
    the same class, dtype, shape, name, doc string and bytes as ir.tensor gives."""
    import onnx_ir as ir

    from mobile_ep.contract.rewrite import Builder

    node = ir.Node("", "Relu", [ir.Value(name="x")], name="relu")
    value = Builder(node, "test").const(array, "c")
    expected = ir.tensor(np.asarray(array), name=value.name)
    got = value.const_value
    assert type(got) is type(expected)
    assert (got.dtype, got.shape, got.name, got.doc_string) == (expected.dtype, expected.shape, expected.name,
                                                                 expected.doc_string)
    assert got.tobytes() == expected.tobytes() and dict(got.metadata_props) == dict(expected.metadata_props)


@pytest.mark.parametrize("value", [1, True, -7, 1.5, "s", "", [1, 2], (3, 4), [1.0, 2.0], ["a", "b"], [True, False],
                                   [1, 2.0], [1, True], [], np.int64(3), [np.int64(1)], np.float32(0.5)],
                         ids=repr)
def test_builder_attributes_are_what_onnx_ir_makes_of_the_value(value):
    """Builder.op makes plain attributes itself (onnx_ir's type tests are slow): the same Attr, or the
    same error, as ir.convenience.convert_attribute."""
    import onnx_ir as ir

    from mobile_ep.contract.rewrite import Builder

    def made_by_builder():
        builder = Builder(ir.Node("", "Relu", [], name="n"), "test")
        builder.op("Relu", [], shape=None, dtype=None, k=value)
        return builder.nodes[0].attributes["k"]

    try:
        expected = ir.convenience.convert_attribute("k", value)
    except TypeError as exc:
        with pytest.raises(TypeError, match="Unsupported attribute type"):
            made_by_builder()
        assert "Unsupported attribute type" in str(exc)
        return
    made = made_by_builder()
    assert (type(made), made.name, made.type) == (type(expected), expected.name, expected.type)
    assert made.value == expected.value and type(made.value) is type(expected.value)


def test_builder_reshape_to_a_constant_shape():
    import onnx_ir as ir

    from mobile_ep.contract.rewrite import Builder

    builder = Builder(ir.Node("", "MatMul", [], name="mm"), "flat")
    x = ir.Value(name="x", shape=ir.Shape([2, 6]), type=ir.TensorType(ir.DataType.FLOAT))
    y = builder.reshape(x, [3, 4], ir.DataType.FLOAT)
    (node,) = builder.nodes
    assert (node.op_type, node.name, y.name) == ("Reshape", "mm/flat/Reshape_2", "mm/flat/Reshape_2")
    assert node.inputs[0] is x and node.inputs[1].name == "mm/flat/shape_1"
    assert node.inputs[1].const_value.numpy().tolist() == [3, 4] and node.inputs[1].dtype == ir.DataType.INT64
    assert list(y.shape) == [3, 4] and y.dtype == ir.DataType.FLOAT


@pytest.mark.parametrize("opset", [9, 13])
def test_int_list_reads_an_input_or_the_older_attribute(opset):
    from mobile_ep.contract import RuleContext
    from mobile_ep.contract.rewrite import int_list
    from mobile_ep.testing import as_model

    if opset >= 13:
        nodes = [helper.make_node("Squeeze", ["x", "axes"], ["y"], name="sq")]
        initializers = [const("axes", np.array([0, 2], np.int64))]
    else:
        nodes, initializers = [helper.make_node("Squeeze", ["x"], ["y"], name="sq", axes=[0, 2])], []
    model = as_model(make_model(nodes, [tensor("x", [1, 3, 1])], [tensor("y", [3])], initializers, opset=opset))
    (node,) = model.graph
    from mepkit import ToyBackend

    ctx = RuleContext(model, ToyBackend())
    assert int_list(ctx, node, 1, "axes") == [0, 2]
    assert int_list(ctx, node, 2, "steps") is None
