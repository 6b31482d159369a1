"""RoBERTa's position ids on the backends (:mod:`mobile_ep.passes.rewrites.positions`).

The pattern is transformers' ``RobertaModel`` as ``torch.onnx.export`` (opset 17) writes it, after onnxruntime's
basic level: ``Equal(input_ids, pad)``, ``Not``, ``Cast`` to int32, ``CumSum`` along axis 1 (an int32 constant),
``Mul`` by the same Cast, ``Cast`` to int64, ``Add(pad)``, read by the position embeddings' ``Gather`` and by a
``GatherElements`` of the buffered token type ids (a constant of zeros), whose result the token type
embeddings' ``Gather`` reads.  Every claim is checked by running the compiled model (its partitions through the
backend's emulator) against onnxruntime's CPU result of the original, on ids with padding and on extreme ids.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import mobile_ep
from mepkit import has_backend
from mobile_ep import runtime

PAD = 1


def roberta_embeddings(seq: int = 16, hidden: int = 8, vocab: int = 50, seed: int = 0) -> onnx.ModelProto:
    """RoBERTa's embeddings: word, position (numbered from the ids) and token type (zeros gathered at the
    positions) embeddings, added, then LayerNormalization; input ``input_ids`` [1, seq] int64."""
    rng = np.random.default_rng(seed)
    max_pos = seq + PAD + 1

    def table(rows: int) -> np.ndarray:
        return (rng.standard_normal((rows, hidden)) * 0.5).astype(np.float32)

    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("pad", np.array(PAD, np.int64)), ("axis", np.array(1, np.int32)), ("words", table(vocab)),
        ("positions", table(max_pos)), ("types", table(1)), ("buffered", np.zeros((1, max_pos), np.int64)),
        ("gamma", np.ones(hidden, np.float32)), ("beta", np.zeros(hidden, np.float32))]]
    nodes = [
        helper.make_node("Equal", ["input_ids", "pad"], ["eq"], name="Equal"),
        helper.make_node("Not", ["eq"], ["ne"], name="Not"),
        helper.make_node("Cast", ["ne"], ["mask"], name="Cast", to=TensorProto.INT32),
        helper.make_node("CumSum", ["mask", "axis"], ["count"], name="CumSum"),
        helper.make_node("Mul", ["count", "mask"], ["numbered"], name="Mul"),
        helper.make_node("Cast", ["numbered"], ["numbered64"], name="Cast_1", to=TensorProto.INT64),
        helper.make_node("Add", ["numbered64", "pad"], ["position_ids"], name="Add"),
        helper.make_node("Gather", ["words", "input_ids"], ["w"], name="word_embeddings", axis=0),
        helper.make_node("Gather", ["positions", "position_ids"], ["p"], name="position_embeddings", axis=0),
        helper.make_node("GatherElements", ["buffered", "position_ids"], ["type_ids"], name="GatherElements", axis=1),
        helper.make_node("Gather", ["types", "type_ids"], ["t"], name="token_type_embeddings", axis=0),
        helper.make_node("Add", ["w", "t"], ["wt"], name="Add_1"),
        helper.make_node("Add", ["wt", "p"], ["e"], name="Add_2"),
        helper.make_node("LayerNormalization", ["e", "gamma", "beta"], ["embeddings"], name="LayerNorm", axis=-1,
                         epsilon=1e-5),
    ]
    graph = helper.make_graph(nodes, "roberta_embeddings",
                              [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, seq])],
                              [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, [1, seq, hidden])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def positions_only(seq: int = 16) -> onnx.ModelProto:
    """The position ids alone, gathered from a table (so that any int64 id is valid input)."""
    model = roberta_embeddings(seq)
    keep = {"Equal", "Not", "Cast", "CumSum", "Mul", "Cast_1", "Add", "position_embeddings"}
    nodes = [n for n in model.graph.node if n.name in keep]
    nodes[-1].output[0] = "embeddings"
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    used = {i for n in nodes for i in n.input}
    kept = [t for t in model.graph.initializer if t.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    return model


#: The rewrite each backend applies: NNAPI has no int64, so the Gather reads int32 positions computed in
#: float32; ML Program takes int64, so the count is computed in float32 and the integer Cast and Add stay.
REWRITES = {"nnapi": "position-ids-via-float", "coreml": "running-count-via-float"}


def _cpu(path, feeds):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _compiled(tmp_path, model, ep):
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    # (no cost model: these small graphs are compiled whole, the point being what the partition computes)
    result = mobile_ep.convert(path, ep, tmp_path / "out", compile=True, cost_model=False)
    assert all(v.ok for v in result.verification)
    return path, result, tmp_path / "out" / f"model.{ep}.compiled.onnx"


@pytest.mark.parametrize("ep", [e for e in REWRITES if has_backend(e)])
def test_position_ids_run_in_the_backends_one_partition(tmp_path, ep):
    path, result, compiled = _compiled(tmp_path, roberta_embeddings(), ep)
    report = result.check
    assert REWRITES[ep] in {r["rewrite"] for r in report.rewrites}
    assert "gather-elements-of-uniform-constant" in {r["rewrite"] for r in report.rewrites}
    assert len(report.partitions) == 1
    on_cpu = [(u.op, u.node) for u in report.unsupported]
    # only Casts of the ids input, before the partition, stay on the CPU
    assert all(op == "Cast" for op, _ in on_cpu), on_cpu
    assert len(result.compiled.compiled) == 1 and not result.compiled.failures
    # padding at the end, in the middle and first: the compiled partition (the emulator) as onnxruntime's CPU
    ids = np.array([[0, 5, 7, PAD, 9, 3, PAD, PAD, 2, 4, 6, 8, 10, PAD, PAD, PAD]], np.int64)
    for feeds in ({"input_ids": ids}, {"input_ids": np.full((1, 16), PAD, np.int64)},
                  {"input_ids": np.arange(16, dtype=np.int64).reshape(1, 16) + 20}):
        expected = _cpu(path, feeds)
        got = runtime.run(compiled, feeds)["embeddings"]
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ep", [e for e in REWRITES if has_backend(e)])
def test_position_ids_are_exact_for_any_int64_id(tmp_path, ep):
    """Ids far beyond float32's exact integers, negative ids and ids next to the pad: the indicator is exactly
    1 for each and 0 for the pad, so the gathered rows are onnxruntime's.  (Core ML holds int64 inputs as
    int32 and refuses values outside that range whatever the graph: there the extremes are int32's.)"""
    path, result, compiled = _compiled(tmp_path, positions_only(), ep)
    assert REWRITES[ep] in {r["rewrite"] for r in result.check.rewrites}
    assert len(result.compiled.compiled) == 1
    big, far = (2**62 + 1, 2**40) if ep == "nnapi" else (2**31 - 1, 2**30 + 1)
    ids = np.array([[big, PAD, -big, 0, 2, PAD, 2**24 + 1, -1, far, PAD, PAD, 3, -far, 2**24 + 3, PAD + 1,
                     PAD - 1]], np.int64)
    expected = _cpu(path, {"input_ids": ids})
    got = runtime.run(compiled, {"input_ids": ids})["embeddings"]
    np.testing.assert_array_equal(got, expected)
    # not the pattern, left as it is (on the CPU): a CumSum along the first axis, a pad float32 cannot hold
    for change, value in (("axis", np.array(0, np.int32)), ("pad", np.array(2**24 + 1, np.int64))):
        model = positions_only()
        for t in model.graph.initializer:
            if t.name == change:
                t.CopyFrom(numpy_helper.from_array(value, change))
        other = tmp_path / f"{change}.onnx"
        onnx.save(model, other)
        left = mobile_ep.convert(other, ep, tmp_path / change, verify=False)
        assert REWRITES[ep] not in {r["rewrite"] for r in left.check.rewrites}, change
        assert {u.op for u in left.check.unsupported} >= {"CumSum", "Equal"}, change
