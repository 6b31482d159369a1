"""ORT's NNAPI partition filter and stop ops, through mobile_ep.testing.proposal."""

from __future__ import annotations

import numpy as np
from nnapi_models import at_api, backend, model, node
from onnx import helper

from mobile_ep.testing import as_model, proposal


def _nodes(partition):
    return [n.name for n in partition.nodes]


def test_single_reshape_partition_is_dropped():
    m = model(node("Reshape", ["x", "s"], name="reshape"), {"x": [2, 3]}, inits={"s": np.array([6])})
    result = proposal(m, backend())
    assert result.partitions == []
    reason = result.per_backend["nnapi"].rejected[result.nodes[0]]
    assert reason == "partition dropped by nnapi: a partition of a single Reshape only copies data, so ORT leaves it on " \
                     "the CPU"


def test_single_flatten_and_identity_partitions_are_dropped_but_pairs_are_kept():
    for op in ("Flatten", "Identity"):
        assert proposal(model(node(op, ["x"]), {"x": [2, 3]}), backend()).partitions == []
    pair = model([node("Relu", ["x"], ["r"], name="relu"), node("Reshape", ["r", "s"], name="reshape")],
                 {"x": [2, 3]}, inits={"s": np.array([6])})
    (partition,) = proposal(pair, backend()).partitions
    assert _nodes(partition) == ["relu", "reshape"]


def test_reshape_cut_off_by_an_unsupported_node_is_dropped():
    m = model([node("Relu", ["x"], ["r"], name="relu"), node("Sum", ["r", "r"], ["s"], name="sum"),
               node("Reshape", ["s", "shape"], name="reshape")], {"x": [2, 3]}, inits={"shape": np.array([6])})
    result = proposal(m, backend())
    assert [_nodes(p) for p in result.partitions] == [["relu"]]
    rejected = {n.name: r for n, r in result.per_backend["nnapi"].rejected.items()}
    assert rejected["sum"] == "nnapi has no rule for Sum"
    assert "single Reshape only copies data" in rejected["reshape"]


def test_partition_reading_only_constants_is_dropped():
    m = model([node("Relu", ["c"], ["r"], name="const_relu"), node("Add", ["x", "r"], ["y"], name="add"),
               node("Sum", ["y", "y"], ["z"], name="sum")], {"x": [4]}, outputs=("z",),
              inits={"c": np.ones(4, np.float32)})
    result = proposal(m, backend())
    # const_relu and add form one partition fed by x; nothing to drop
    assert [_nodes(p) for p in result.partitions] == [["const_relu", "add"]]
    only_const = model([node("Relu", ["c"], ["r"], name="const_relu"), node("Sum", ["r", "x"], ["y"], name="sum")],
                       {"x": [4]}, inits={"c": np.ones(4, np.float32)})
    result = proposal(only_const, backend())
    assert result.partitions == []
    reason = result.per_backend["nnapi"].rejected[result.nodes[0]]
    assert "reads only constant initializers; ORT drops such partitions" in reason


def _nms_model():
    boxes = node("Relu", ["boxes_in"], ["boxes"], name="pre")
    nms = node("NonMaxSuppression", ["boxes", "scores"], ["sel"], name="nms")
    cast = node("Cast", ["sel"], ["self"], name="cast", to=1)
    post = node("Relu", ["self"], ["y"], name="post")
    side = node("Relu", ["scores"], ["z"], name="side")
    return model([boxes, nms, cast, post, side], {"boxes_in": [1, 4, 4], "scores": [1, 1, 4]},
                 outputs={"y": 1, "z": 1})


def test_stop_op_and_everything_downstream_are_excluded():
    result = proposal(_nms_model(), backend())
    placed = {n.name: p.backend for n, p in result.placements.items()}
    assert placed == {"pre": "nnapi", "nms": None, "cast": None, "post": None, "side": "nnapi"}
    rejected = {n.name: r for n, r in result.per_backend["nnapi"].rejected.items()}
    assert rejected["nms"] == ("NonMaxSuppression is a partitioning stop op (option stop_ops); it and every node "
                               "after it stay on the CPU")
    assert rejected["post"] == ("downstream of stop op NonMaxSuppression 'nms' (option stop_ops): ORT keeps "
                                "everything after a stop op on the CPU")
    assert rejected["cast"].startswith("downstream of stop op")


def test_stop_ops_are_configurable():
    result = proposal(_nms_model(), at_api(31, stop_ops="Cast"))
    placed = {n.name: p.backend for n, p in result.placements.items()}
    assert placed["post"] is None and placed["pre"] == "nnapi"
    rejected = {n.name: r for n, r in result.per_backend["nnapi"].rejected.items()}
    assert rejected["nms"] == "nnapi has no rule for NonMaxSuppression"
    assert rejected["cast"].startswith("Cast is a partitioning stop op")


def test_no_stop_ops():
    be = backend(stop_ops=())
    assert be.excluded_nodes(None, None) == {}
    result = proposal(_nms_model(), be)
    rejected = {n.name: r for n, r in result.per_backend["nnapi"].rejected.items()}
    # without stop ops, each node gets its own rule's answer
    assert rejected["nms"] == "nnapi has no rule for NonMaxSuppression"
    assert rejected["cast"].startswith("input 0 has a dynamic shape")
    assert "stop op" not in " ".join(rejected.values())


def test_stop_op_downstream_through_a_subgraph():
    then_graph = helper.make_graph([node("Relu", ["sel_f"], ["t"], name="inner")], "then", [],
                                   [helper.make_tensor_value_info("t", 1, [3])])
    else_graph = helper.make_graph([node("Identity", ["c"], ["e"], name="inner_else")], "else", [],
                                   [helper.make_tensor_value_info("e", 1, [3])])
    nodes = [node("NonMaxSuppression", ["b", "s"], ["sel"], name="nms"),
             node("Cast", ["sel"], ["sel_f"], name="cast", to=1),
             node("If", ["cond"], ["y"], name="if", then_branch=then_graph, else_branch=else_graph),
             node("Relu", ["x"], ["z"], name="free")]
    m = model(nodes, {"b": [1, 4, 4], "s": [1, 1, 4], "cond": ([], 9), "x": [3]}, outputs={"y": 1, "z": 1},
              inits={"c": np.ones(3, np.float32)})
    excluded = backend().excluded_nodes(as_model(m).graph, None)
    assert {n.name for n in excluded} == {"nms", "cast", "if"}


def test_one_partition_for_a_supported_chain():
    m = model([node("Conv", ["x", "w"], ["c"], name="conv"), node("Relu", ["c"], ["r"], name="relu"),
               node("GlobalAveragePool", ["r"], ["p"], name="gap"), node("Flatten", ["p"], ["f"], name="flat"),
               node("Gemm", ["f", "fc_w", "fc_b"], ["y"], name="fc", transB=1)],
              {"x": [1, 3, 8, 8]},
              inits={"w": np.ones((4, 3, 3, 3), np.float32), "fc_w": np.ones((10, 4), np.float32),
                     "fc_b": np.zeros(10, np.float32)})
    result = proposal(m, backend())
    (partition,) = result.partitions
    assert _nodes(partition) == ["conv", "relu", "gap", "flat", "fc"]
    assert result.per_backend["nnapi"].verdict == "YES"
    # on API 27 Conv and pooling need feature level 2: only the tail from Flatten on could run, and Flatten's
    # input is then a partition input
    low = proposal(m, at_api(27))
    assert [_nodes(p) for p in low.partitions] == [["relu"], ["flat", "fc"]]
