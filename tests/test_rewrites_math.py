"""The Erf approximation (within its stated bound, on a dense grid and edge values) and the rank-5 head
split (exact), each before and after in onnxruntime."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import helper
from test_rewrites import EDGE, assert_same, rnd, run
from test_rewrites_spatial import Mobile, MobileRule, legalized

from mepkit import const, make_model, tensor
from mobile_ep import RuleRegistry, Support
from mobile_ep.passes import rewrites


def test_erf_approximation_is_within_its_bound(tmp_path):
    rewrite = rewrites.ErfApproximation()
    grid = np.concatenate([np.linspace(-6, 6, 240001), np.logspace(-38, 0.7, 4000), -np.logspace(-38, 0.7, 4000),
                           [4.0, -4.0, 3.9, 1e30, -1e30, np.inf, -np.inf, 0.0, -0.0]]).astype(np.float32)
    proto = make_model([helper.make_node("Erf", ["x"], ["y"], name="erf")], [tensor("x", [grid.size])],
                       [tensor("y", [grid.size])])
    new, legal = legalized(proto, rewrite, tmp_path, Mobile(rewrite))
    assert legal.applied and "Erf" not in {n.op_type for n in new.graph.node}
    (approx,) = run(new, {"x": grid})
    exact = np.array([math.erf(float(v)) for v in grid])
    error = np.abs(approx.astype(np.float64) - exact)
    assert error.max() <= rewrite.max_abs_error, (error.max(), grid[error.argmax()])
    assert error.max() > rewrite.max_abs_error / 4  # (the bound is not loose by orders of magnitude)
    (ort_erf,) = run(proto, {"x": grid})
    assert np.abs(approx - ort_erf).max() <= rewrite.max_abs_error + np.abs(ort_erf - exact).max()
    # odd, saturating, NaN kept
    nan = np.array([np.nan, np.inf, -np.inf, 0.0], np.float32)
    proto4 = make_model([helper.make_node("Erf", ["x"], ["y"], name="erf")], [tensor("x", [4])], [tensor("y", [4])])
    (edge,) = run(legalized(proto4, rewrite, tmp_path, Mobile(rewrite))[0], {"x": nan})
    assert np.isnan(edge[0]) and edge[1:].tolist() == [1.0, -1.0, 0.0]


def test_erf_approximation_is_named_approximate_in_the_rewrite_report(tmp_path):
    rewrite = rewrites.ErfApproximation()
    assert "approx" in rewrite.name and "APPROXIMATE" in rewrite.describe() and "4e-7" in rewrite.describe()
    proto = make_model([helper.make_node("Erf", ["x"], ["y"], name="erf")], [tensor("x", [3], 11)],
                       [tensor("y", [3], 11)])
    _, legal = legalized(proto, rewrite, tmp_path, Mobile(rewrite))
    assert legal.applied == [] and legal.skipped[0].reason == "input 0 is not float32"


@pytest.mark.parametrize("perm, sliced_axis, after", [([2, 0, 3, 1, 4], 0, None), ([0, 2, 3, 1, 4], 1, None),
                                                     ([2, 0, 1, 3, 4], 0, None), (None, 2, [2, 0, 3, 1, 4]),
                                                     ([0, 1, 2, 3, 4], 2, [0, 2, 1, 3, 4])])
def test_rank5_head_split_is_exact(tmp_path, perm, sliced_axis, after):
    """The exporters' order (Transpose, Slice, Squeeze) and onnxruntime's (Slice, Transpose, Squeeze)."""
    t, heads, d = 6, 2, 4
    mid = [1, t, 3, heads, d]
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"], name="r")]
    source, shape5 = "r", mid
    if perm is not None:
        nodes.append(helper.make_node("Transpose", ["r"], ["t"], name="t", perm=perm))
        source, shape5 = "t", [mid[p] for p in perm]
    inits = [const("s", np.array(mid, np.int64)), const("ax", np.array([sliced_axis], np.int64))]
    squeeze_axis = sliced_axis if after is None else after.index(sliced_axis)
    inits.append(const("sq", np.array([squeeze_axis], np.int64)))
    out_shape = [dim for j, dim in enumerate([shape5[p] for p in after] if after else shape5) if j != squeeze_axis]
    outputs = []
    for i in range(3):
        inits += [const(f"b{i}", np.array([i], np.int64)), const(f"e{i}", np.array([i + 1], np.int64))]
        nodes.append(helper.make_node("Slice", [source, f"b{i}", f"e{i}", "ax"], [f"sl{i}"], name=f"sl{i}"))
        last = f"sl{i}"
        if after is not None:
            nodes.append(helper.make_node("Transpose", [last], [f"tr{i}"], name=f"tr{i}", perm=after))
            last = f"tr{i}"
        nodes.append(helper.make_node("Squeeze", [last, "sq"], [f"y{i}"], name=f"sq{i}"))
        outputs.append(tensor(f"y{i}", out_shape))
    proto = make_model(nodes, [tensor("x", [1, t, 3 * heads * d])], outputs, inits)
    rewrite = rewrites.Rank5HeadSplit()
    feeds = {"x": np.resize(np.concatenate([EDGE, rnd(30)]), (1, t, 3 * heads * d)).astype(np.float32)}
    new, legal = legalized(proto, rewrite, tmp_path, Mobile(rewrite))
    assert len(legal.applied) == 3, legal.skipped
    assert {n.op_type for n in new.graph.node} <= {"Reshape", "Slice", "Transpose"}
    ranks = [len(v.type.tensor_type.shape.dim) for v in [*new.graph.value_info, *new.graph.output]]
    assert max(ranks) <= 4
    assert_same(run(proto, feeds), run(new, feeds), exact=True)


@pytest.mark.parametrize("mid, perm, out", [
    ([1, 3, 4, 5, 6], [0, 3, 4, 1, 2], [1, 90, 4]),  # SSD head: [N, A, K, H, W] -> [N, H, W, A, K] -> [N, HWA, K]
    ([1, 2, 4, 5, 6], [0, 2, 1, 3, 4], [1, 8, 5, 6]),  # channel shuffle
    ([2, 3, 4, 5, 1], [1, 0, 2, 3, 4], [3, 2, 20]),
])
def test_rank5_transpose_merge_is_exact(tmp_path, mid, perm, out):
    source = [mid[0], mid[1] * mid[2], mid[3], mid[4]]
    nodes = [helper.make_node("Reshape", ["x", "s5"], ["r"], name="r"),
             helper.make_node("Transpose", ["r"], ["t"], name="t", perm=perm),
             helper.make_node("Reshape", ["t", "so"], ["y"], name="y")]
    inits = [const("s5", np.array(mid, np.int64)), const("so", np.array(out, np.int64))]
    proto = make_model(nodes, [tensor("x", source)], [tensor("y", out)], inits)
    rewrite = rewrites.Rank5TransposeMerge()
    new, legal = legalized(proto, rewrite, tmp_path, Mobile(rewrite))
    assert len(legal.applied) == 1, legal.skipped
    ranks = [len(v.type.tensor_type.shape.dim) for v in [*new.graph.value_info, *new.graph.output]]
    assert max(ranks) <= 4
    feeds = {"x": np.resize(np.concatenate([EDGE, rnd(40)]), source).astype(np.float32)}
    assert_same(run(proto, feeds), run(new, feeds), exact=True)


def test_rank5_transpose_that_separates_every_axis_is_left_alone(tmp_path):
    nodes = [helper.make_node("Reshape", ["x", "s5"], ["r"], name="r"),
             helper.make_node("Transpose", ["r"], ["t"], name="t", perm=[4, 3, 2, 1, 0]),
             helper.make_node("Reshape", ["t", "so"], ["y"], name="y")]
    inits = [const("s5", np.array([2, 2, 2, 2, 2], np.int64)), const("so", np.array([4, 8], np.int64))]
    proto = make_model(nodes, [tensor("x", [4, 8])], [tensor("y", [4, 8])], inits)
    rewrite = rewrites.Rank5TransposeMerge()
    _, legal = legalized(proto, rewrite, tmp_path, Mobile(rewrite))
    assert legal.applied == []
    assert [s.reason for s in legal.skipped if s.node == "y"] == ["no axes stay together through the Transpose"]


@pytest.mark.parametrize("mid, perm, out", [
    ([1, 4, 3, 4, 3, 5], [0, 1, 3, 2, 4, 5], [16, 9, 5]),  # Swin window partition [B, H/w, w, W/w, w, C]
    ([1, 4, 4, 3, 3, 5], [0, 1, 3, 2, 4, 5], [1, 12, 12, 5]),  # its inverse
    ([2, 2, 3, 2, 3, 5], [0, 1, 3, 2, 4, 5], [8, 9, 5]),  # batch 2
])
def test_rank6_window_partition_is_exact(tmp_path, mid, perm, out):
    source = [mid[0], mid[1] * mid[2], mid[3] * mid[4], mid[5]]
    nodes = [helper.make_node("Reshape", ["x", "s6"], ["r"], name="r"),
             helper.make_node("Transpose", ["r"], ["t"], name="t", perm=perm),
             helper.make_node("Reshape", ["t", "so"], ["y"], name="y")]
    inits = [const("s6", np.array(mid, np.int64)), const("so", np.array(out, np.int64))]
    proto = make_model(nodes, [tensor("x", source)], [tensor("y", out)], inits)
    rewrite = rewrites.Rank5TransposeMerge()
    new, legal = legalized(proto, rewrite, tmp_path, Mobile(rewrite))
    assert len(legal.applied) == 1, legal.skipped
    ranks = [len(v.type.tensor_type.shape.dim) for v in [*new.graph.value_info, *new.graph.output]]
    assert max(ranks) <= 4
    feeds = {"x": np.resize(np.concatenate([EDGE, rnd(60)]), source).astype(np.float32)}
    assert_same(run(proto, feeds), run(new, feeds), exact=True)


def test_rank6_transpose_of_five_runs_is_left_alone(tmp_path):
    nodes = [helper.make_node("Reshape", ["x", "s6"], ["r"], name="r"),
             helper.make_node("Transpose", ["r"], ["t"], name="t", perm=[0, 1, 3, 2, 5, 4]),
             helper.make_node("Reshape", ["t", "so"], ["y"], name="y")]
    inits = [const("s6", np.array([2, 2, 2, 2, 2, 2], np.int64)), const("so", np.array([8, 8], np.int64))]
    proto = make_model(nodes, [tensor("x", [8, 8])], [tensor("y", [8, 8])], inits)
    _, legal = legalized(proto, rewrites.Rank5TransposeMerge(), tmp_path, Mobile(rewrites.Rank5TransposeMerge()))
    assert legal.applied == []
    assert [s.reason for s in legal.skipped if s.node == "y"] == [
        "more than 4 runs of axes stay together through the Transpose (5)"]


@pytest.mark.parametrize("perm, axis", [([2, 0, 3, 1, 4], 0),  # the exporters' qkv.permute(2, 0, 3, 1, 4)[i]
                                        (None, 2),  # onnxruntime's transpose optimizer: Gather, then Transpose
                                        ([0, 2, 1, 3, 4], 1)])
def test_rank5_gather_split_is_exact(tmp_path, perm, axis):
    mid = [4, 6, 3, 2, 5]  # [windows, tokens, 3, heads, head dim]
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"], name="r")]
    data, shape5 = "r", mid
    if perm is not None:
        nodes.append(helper.make_node("Transpose", ["r"], ["t"], name="t", perm=perm))
        data, shape5 = "t", [mid[p] for p in perm]
    inits = [const("s", np.array(mid, np.int64))]
    out_shape = [d for j, d in enumerate(shape5) if j != axis]
    outputs = []
    for i in range(3):
        index = i - 3 if i == 2 else i  # (a negative index too)
        inits.append(const(f"i{i}", np.array(index, np.int64)))
        nodes.append(helper.make_node("Gather", [data, f"i{i}"], [f"y{i}"], name=f"g{i}", axis=axis))
        outputs.append(tensor(f"y{i}", out_shape))
    proto = make_model(nodes, [tensor("x", [24, 30])], outputs, inits)
    rewrite = rewrites.Rank5GatherSplit()
    new, legal = legalized(proto, rewrite, tmp_path, Mobile(rewrite))
    assert len(legal.applied) == 3, legal.skipped
    ranks = [len(v.type.tensor_type.shape.dim) for v in [*new.graph.value_info, *new.graph.output]]
    assert max(ranks) <= 4 and "Gather" not in {n.op_type for n in new.graph.node}
    feeds = {"x": np.resize(np.concatenate([EDGE, rnd(50)]), (24, 30)).astype(np.float32)}
    assert_same(run(proto, feeds), run(new, feeds), exact=True)


def test_rank5_gather_of_computed_indices_is_left_alone(tmp_path):
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"], name="r"),
             helper.make_node("Gather", ["r", "i"], ["y"], name="g", axis=2)]
    proto = make_model(nodes, [tensor("x", [6, 30]), tensor("i", [], 7)], [tensor("y", [2, 3, 2, 5])],
                       [const("s", np.array([2, 3, 3, 2, 5], np.int64))])
    _, legal = legalized(proto, rewrites.Rank5GatherSplit(), tmp_path, Mobile(rewrites.Rank5GatherSplit()))
    assert legal.applied == [] and legal.skipped[0].reason == "the indices are not one constant scalar"


@pytest.mark.parametrize("op, swap", [("Add", False), ("Sub", True), ("Mul", False), ("Div", False)])
def test_rank5_binary_merge_is_exact(tmp_path, op, swap):
    """Swin's shifted-window mask: attn.view(B, nW, heads, N, N) + mask[None, :, None], back to [B*nW, heads, N, N]."""
    windows, heads, n = 4, 3, 5
    mask = np.where(np.random.default_rng(3).random((1, windows, 1, n, n)) < 0.5, -100.0, 0.5).astype(np.float32)
    if op == "Div":
        mask = mask + 2.0
    operands = ["c", "r"] if swap else ["r", "c"]
    nodes = [helper.make_node("Reshape", ["x", "s5"], ["r"], name="r"),
             helper.make_node(op, operands, ["a"], name="a"),
             helper.make_node("Reshape", ["a", "s4"], ["y"], name="y")]
    inits = [const("s5", np.array([1, windows, heads, n, n], np.int64)), const("c", mask),
             const("s4", np.array([-1, heads, n, n], np.int64))]
    proto = make_model(nodes, [tensor("x", [windows, heads, n, n])], [tensor("y", [windows, heads, n, n])], inits)
    rewrite = rewrites.Rank5BinaryMerge()
    new, legal = legalized(proto, rewrite, tmp_path, Mobile(rewrite))
    assert len(legal.applied) == 1, legal.skipped
    assert [n.op_type for n in new.graph.node] == [op]
    (operand,) = [t for t in new.graph.initializer if t.name != "s4" and t.name != "s5" and t.name != "c"]
    assert list(operand.dims) == [windows, 1, n, n]  # (constant along the heads)
    feeds = {"x": np.resize(np.concatenate([EDGE, rnd(50)]), (windows, heads, n, n)).astype(np.float32)}
    assert_same(run(proto, feeds), run(new, feeds), exact=True)


def test_pad_with_an_empty_constant_value_name_drops_it(tmp_path):
    """torch's F.pad through the TorchScript exporter: Pad(x, pads, "") is Pad(x, pads)."""
    proto = make_model([helper.make_node("Pad", ["x", "p", ""], ["y"], name="pad", mode="constant")],
                       [tensor("x", [1, 5, 6, 3])], [tensor("y", [1, 6, 8, 3])],
                       [const("p", np.array([0, 0, 1, 0, 0, 1, 1, 0], np.int64))])

    class CountsEmptyInputs(MobileRule):
        """As ORT's NNAPI Pad builder: an input listed with an empty name is an input that is not constant."""

        def check(self, unit, ctx):
            if len(unit.target.inputs) > 2:
                return Support.no("constant_value is not a constant")
            return super().check(unit, ctx)

    class Backend(Mobile):
        def build_rules(self):
            return RuleRegistry([CountsEmptyInputs()])

    rewrite = rewrites.EmptyInputDrop()
    new, legal = legalized(proto, rewrite, tmp_path, Backend(rewrite))
    assert len(legal.applied) == 1, legal.skipped
    assert [list(n.input) for n in new.graph.node] == [["x", "p"]]
    feeds = {"x": np.resize(np.concatenate([EDGE, rnd(50)]), (1, 5, 6, 3)).astype(np.float32)}
    assert_same(run(proto, feeds), run(new, feeds), exact=True)


class _AttentionRule(MobileRule):
    op_types = (*MobileRule.op_types, "Softmax", "ReduceMean", "Log")


class _Attention(Mobile):
    """The test backend, with the ops an attention block adds: Softmax, ReduceMean, Log."""

    def build_rules(self):
        return RuleRegistry([_AttentionRule()])


def _guarded_softmax(fill: float, mask_shape) -> object:
    """Where(IsNaN(s), 0, s), s = Softmax(scores + Where(keep, 0, fill)): scaled-dot-product attention's export."""
    nodes = [helper.make_node("Where", ["keep", "zero", "fill"], ["mask"], name="mask"),
             helper.make_node("Add", ["scores", "mask"], ["z"], name="add"),
             helper.make_node("Softmax", ["z"], ["s"], name="softmax", axis=-1),
             helper.make_node("IsNaN", ["s"], ["nan"], name="isnan"),
             helper.make_node("Where", ["nan", "zero", "s"], ["y"], name="guard")]
    inits = [const("zero", np.array(0.0, np.float32)), const("fill", np.array(fill, np.float32))]
    return make_model(nodes, [tensor("scores", [2, 3, 4, 5]), tensor("keep", mask_shape, 9)],
                      [tensor("y", [2, 3, 4, 5])], inits)


@pytest.mark.parametrize("fill", [float("-inf"), float(np.finfo(np.float32).min)])
@pytest.mark.parametrize("mask_shape", [[2, 1, 4, 5], [2, 1, 1, 5]])
def test_softmax_nan_guard_is_exact_for_finite_scores(tmp_path, fill, mask_shape):
    """Fully masked rows (0 after the guard), partly masked and unmasked ones; large and tiny scores."""
    proto = _guarded_softmax(fill, mask_shape)
    rewrite = rewrites.SoftmaxNanGuard()
    new, legal = legalized(proto, rewrite, tmp_path, _Attention(rewrite))
    assert len(legal.applied) == 1, legal.skipped
    assert not {"IsNaN", "Where"} & {n.op_type for n in new.graph.node if n.name != "mask"}
    rng = np.random.default_rng(7)
    scores = rng.standard_normal((2, 3, 4, 5)).astype(np.float32) * 10
    scores[0, 0, 0] = [80.0, -80.0, 1e-30, 0.0, -0.0]
    keep = rng.random(mask_shape) < 0.5
    keep[0, ..., 0, :] = False  # every key of a row masked
    keep[1, ..., -1, :] = True
    feeds = {"scores": scores, "keep": keep}
    before, after = run(proto, feeds), run(new, feeds)
    assert_same(before, after, exact=True)
    if fill == float("-inf"):
        assert (before[0][0, :, 0] == 0).all()  # (the guard's case is there)


def test_softmax_nan_guard_needs_the_mask_it_reasons_about(tmp_path):
    nodes = [helper.make_node("Softmax", ["scores"], ["s"], name="softmax", axis=-1),
             helper.make_node("IsNaN", ["s"], ["nan"], name="isnan"),
             helper.make_node("Where", ["nan", "zero", "s"], ["y"], name="guard")]
    proto = make_model(nodes, [tensor("scores", [2, 5])], [tensor("y", [2, 5])],
                       [const("zero", np.array(0.0, np.float32))])
    rewrite = rewrites.SoftmaxNanGuard()
    _, legal = legalized(proto, rewrite, tmp_path, Mobile(rewrite))
    assert legal.applied == []
    assert legal.skipped[0].reason == "the Softmax is not of an Add of float32 scores and a mask"


def _mask_model(fill: tuple[float, float], dynamo: bool) -> object:
    """transformers' attention mask from an int64 [1, 6] input: TorchScript's Flatten/Gather/Reshape/And or the
    dynamo exporter's GatherND/And, then Where(mask, a, b)."""
    seq = 6
    nodes = [helper.make_node("Cast", ["attention_mask"], ["keep"], name="cast", to=9)]
    if dynamo:
        picks = np.stack([np.zeros(seq, np.int64), np.arange(seq)], axis=-1).reshape(1, 1, 1, seq, 2)
        inits = [const("picks", picks)]
        nodes.append(helper.make_node("GatherND", ["keep", "picks"], ["row"], name="gnd"))
    else:
        inits = [const("positions", np.arange(seq, dtype=np.int64).reshape(1, 1, 1, seq)),
                 const("shape", np.array([1, 1, 1, seq], np.int64))]
        nodes += [helper.make_node("Flatten", ["keep"], ["flat"], name="flatten", axis=2),
                  helper.make_node("Gather", ["flat", "positions"], ["picked"], name="gather", axis=0),
                  helper.make_node("Reshape", ["picked", "shape"], ["row"], name="reshape")]
    causal = np.tril(np.ones((seq, seq), bool)).reshape(1, 1, seq, seq)
    inits += [const("causal", causal), const("a", np.array(fill[0], np.float32)),
              const("b", np.array(fill[1], np.float32))]
    nodes += [helper.make_node("And", ["causal", "row"], ["both"], name="and"),
              helper.make_node("Not", ["both"], ["off"], name="not"),
              helper.make_node("Or", ["off", "both"], ["any"], name="or"),
              helper.make_node("And", ["any", "both"], ["cond"], name="and2"),
              helper.make_node("Where", ["cond", "a", "b"], ["mask"], name="mask")]
    return make_model(nodes, [tensor("attention_mask", [1, seq], 7)], [tensor("mask", [1, 1, seq, seq])], inits)


class _MaskRule(MobileRule):
    """Float32 moves and arithmetic (NNAPI's), nothing on bool or int64 data, int64 indices only constant."""

    op_types = (*MobileRule.op_types, "Log", "Cast", "Softmax", "ReduceMean")

    def check(self, unit, ctx):
        if ctx.dtype(unit.target.inputs[0]) in (9, 7):  # (bool, int64 data; int64 shapes and indices are taken)
            return Support.no("bool or int64 input")
        node = unit.target
        if node.op_type == "Gather" and ctx.dtype(node.inputs[1]) == 7 and ctx.constant(node.inputs[1]) is None:
            return Support.no("int64 indices computed at run time")
        return super().check(unit, ctx)


class _Masks(Mobile):
    def build_rules(self):
        return RuleRegistry([_MaskRule()])


@pytest.mark.parametrize("fill", [(0.0, float("-inf")), (float("-inf"), 0.0), (0.0, -3.4028234663852886e38),
                                  (0.0, -10000.0), (2.5, -7.0)])
@pytest.mark.parametrize("dynamo", [False, True])
def test_bool_mask_to_float_is_exact(tmp_path, fill, dynamo):
    proto = _mask_model(fill, dynamo)
    rewrite = rewrites.BoolMaskToFloat()
    new, legal = legalized(proto, rewrite, tmp_path, _Masks(rewrite))
    assert len(legal.applied) == 1, legal.skipped
    ops = [n.op_type for n in new.graph.node]
    assert not {"Where", "And", "Or", "Not", "GatherND", "Flatten"} & set(ops)
    casts = [n for n in new.graph.node if n.op_type == "Cast"]
    assert [list(n.input) for n in casts] == [["attention_mask"]]  # (the one node left on the CPU, at the input)
    for values in ([[1, 1, 1, 0, 0, 0]], [[0, 0, 0, 0, 0, 0]], [[1, 0, 2, -1, 5, 0]],
                   [[2**62, -(2**62), 1, 1, 0, 3]]):
        feeds = {"attention_mask": np.array(values, np.int64)}
        assert_same(run(proto, feeds), run(new, feeds), exact=True)


def test_bool_mask_from_a_float_input_is_left_alone(tmp_path):
    """Cast(float to bool) of 0.5 is true; min(|0.5|, 1) is not 1."""
    nodes = [helper.make_node("Cast", ["x"], ["keep"], name="cast", to=9),
             helper.make_node("Where", ["keep", "a", "b"], ["y"], name="mask")]
    proto = make_model(nodes, [tensor("x", [1, 4])], [tensor("y", [1, 4])],
                       [const("a", np.array(0.0, np.float32)), const("b", np.array(float("-inf"), np.float32))])
    _, legal = legalized(proto, rewrites.BoolMaskToFloat(), tmp_path, _Masks(rewrites.BoolMaskToFloat()))
    assert legal.applied == [] and legal.skipped[0].reason.startswith("the condition is not a bool mask made from")


def test_softmax_nan_guard_reads_the_masks_bool_mask_to_float_makes(tmp_path):
    """Fully masked rows (an all-zero attention_mask) stay 0 when both rewrites apply, in graph order."""
    proto = _guarded_softmax(float("-inf"), [2, 1, 4, 5])
    import onnx

    model = onnx.load_from_string(proto.SerializeToString())
    graph = model.graph
    graph.input[1].CopyFrom(tensor("ids", [2, 1, 4, 5], 7))
    graph.node.insert(0, helper.make_node("Cast", ["ids"], ["keep"], name="cast", to=9))

    both = (rewrites.BoolMaskToFloat(), rewrites.SoftmaxNanGuard())
    new, legal = legalized(model, both[0], tmp_path, _Masks(*both))
    assert sorted(a.rewrite for a in legal.applied) == ["bool-mask-to-float", "softmax-nan-guard"], legal.skipped
    assert not {"Where", "IsNaN"} & {n.op_type for n in new.graph.node}
    rng = np.random.default_rng(5)
    ids = (rng.random((2, 1, 4, 5)) < 0.5).astype(np.int64)
    ids[0, 0, 1] = 0
    feeds = {"scores": rng.standard_normal((2, 3, 4, 5)).astype(np.float32), "ids": ids}
    before, after = run(model, feeds), run(new, feeds)
    assert_same(before, after, exact=True)
    assert (before[0][0, :, 1] == 0).all()


def test_gather_of_int64_token_ids_takes_them_as_int32(tmp_path):
    """The embedding lookup of input_ids: the Cast of the input stays at the input, the Gather is taken."""
    table = rnd(7 * 5).reshape(7, 5)
    proto = make_model([helper.make_node("Gather", ["table", "ids"], ["y"], name="embedding", axis=0)],
                       [tensor("ids", [2, 4], 7)], [tensor("y", [2, 4, 5])], [const("table", table)])
    rewrite = rewrites.GatherInt32Indices()
    new, legal = legalized(proto, rewrite, tmp_path, _Masks(rewrite))
    assert len(legal.applied) == 1, legal.skipped
    assert [(n.op_type, list(n.input)[-1:]) for n in new.graph.node][0] == ("Cast", ["ids"])
    feeds = {"ids": np.array([[0, 6, -1, -7], [3, 3, 5, 1]], np.int64)}
    assert_same(run(proto, feeds), run(new, feeds), exact=True)


def test_gather_of_computed_int64_indices_is_left_alone(tmp_path):
    nodes = [helper.make_node("Add", ["ids", "one"], ["shifted"], name="add"),
             helper.make_node("Gather", ["table", "shifted"], ["y"], name="embedding", axis=0)]
    proto = make_model(nodes, [tensor("ids", [4], 7)], [tensor("y", [4, 5])],
                       [const("table", rnd(35).reshape(7, 5)), const("one", np.array(1, np.int64))])
    _, legal = legalized(proto, rewrites.GatherInt32Indices(), tmp_path, _Masks(rewrites.GatherInt32Indices()))
    assert legal.applied == [] and legal.skipped[-1].reason == "the indices are not an int64 graph input"


class _WhereRule(MobileRule):
    """A backend that takes Where, Cast and the mask's arithmetic but not IsNaN (Core ML)."""

    op_types = (*MobileRule.op_types, "Where", "Cast", "Softmax", "ReduceMean")


class _Wheres(Mobile):
    def build_rules(self):
        return RuleRegistry([_WhereRule()])


@pytest.mark.parametrize("fill", [float("-inf"), float(np.finfo(np.float32).min)])
@pytest.mark.parametrize("mask_shape", [[2, 1, 4, 5], [2, 1, 1, 5]])
def test_softmax_isnan_from_the_mask_is_exact_for_finite_scores(tmp_path, fill, mask_shape):
    proto = _guarded_softmax(fill, mask_shape)
    rewrite = rewrites.SoftmaxIsNaN()
    new, legal = legalized(proto, rewrite, tmp_path, _Wheres(rewrite))
    assert len(legal.applied) == 1, legal.skipped
    assert "IsNaN" not in {n.op_type for n in new.graph.node}
    rng = np.random.default_rng(11)
    scores = rng.standard_normal((2, 3, 4, 5)).astype(np.float32) * 10
    keep = rng.random(mask_shape) < 0.5
    keep[0, ..., 0, :] = False  # every key of a row masked
    keep[1, ..., -1, :] = True
    feeds = {"scores": scores, "keep": keep}
    before, after = run(proto, feeds), run(new, feeds)
    assert_same(before, after, exact=True)
    if fill == float("-inf"):
        assert (before[0][0, :, 0] == 0).all()


class _NoBoolRule(_WhereRule):
    """Core ML's: Casts to and from bool, no other op on bool data."""

    def check(self, unit, ctx):
        if unit.target.op_type != "Cast" and ctx.dtype(unit.target.inputs[0]) == 9:
            return Support.no("bool data")
        return super().check(unit, ctx)


class _NoBools(Mobile):
    def build_rules(self):
        return RuleRegistry([_NoBoolRule()])


def test_bool_moves_run_on_float_exactly(tmp_path):
    """TorchScript's mask[:, None, None, :] through Flatten, Gather of an arange and Reshape, on bools (the Gather
    one rank lower than the exporter's, for the test backend's rank limit)."""
    seq = 6
    nodes = [helper.make_node("Flatten", ["keep"], ["flat"], name="flatten", axis=2),
             helper.make_node("Gather", ["flat", "positions"], ["picked"], name="gather", axis=0),
             helper.make_node("Reshape", ["picked", "shape"], ["row"], name="reshape"),
             helper.make_node("Where", ["row", "a", "b"], ["y"], name="mask")]
    inits = [const("positions", np.arange(seq, dtype=np.int64)[::-1].reshape(1, 1, seq).copy()),
             const("shape", np.array([1, 1, 1, seq], np.int64)), const("a", np.zeros((1, 1, 1, seq), np.float32)),
             const("b", np.full((1, 1, 1, seq), -np.inf, np.float32))]
    proto = make_model(nodes, [tensor("keep", [1, seq], 9)], [tensor("y", [1, 1, 1, seq])], inits)
    rewrite = rewrites.BoolMoveViaFloat()
    new, legal = legalized(proto, rewrite, tmp_path, _NoBools(rewrite))
    assert len(legal.applied) == 3, legal.skipped
    feeds = {"keep": np.array([[True, False, True, True, False, False]])}
    assert_same(run(proto, feeds), run(new, feeds), exact=True)
