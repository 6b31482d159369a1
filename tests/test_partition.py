"""The wave partitioner: ORT's algorithm, no cycles, QDQ units whole, backend priority, determinism."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from mepkit import OtherBackend, ToyBackend, const, make_model, tensor
from mobile_ep import Support
from mobile_ep.partitioning.propose import graph_index, propose, verdict
from mobile_ep.passes.load import load_for_analysis
from mobile_ep.testing import as_model


def chain_with_gap():
    # x -> Relu(a) -> Erf(b, unsupported) -> Relu(c) ; a also feeds Add(d) with c.
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="a"),
        helper.make_node("Erf", ["a"], ["b"], name="b"),
        helper.make_node("Relu", ["b"], ["c"], name="c"),
        helper.make_node("Add", ["a", "c"], ["d"], name="d"),
    ]
    return make_model(nodes, [tensor("x", [1, 4])], [tensor("d", [1, 4])])


def fused_graph_is_acyclic(model, partitions):
    """Contract each partition to one vertex and check the resulting graph has no cycle."""
    group = {}
    for i, p in enumerate(partitions):
        for n in p.nodes:
            group[n] = ("p", i)
    nodes = list(model.graph)
    vertex = {n: group.get(n, ("n", id(n))) for n in nodes}
    edges = {}
    for n in nodes:
        for v in n.inputs:
            if v is None or v.producer() is None:
                continue
            a, b = vertex[v.producer()], vertex[n]
            if a != b:
                edges.setdefault(a, set()).add(b)
    state = {}

    def visit(u):
        state[u] = 1
        for w in edges.get(u, ()):
            if state.get(w) == 1 or (w not in state and not visit(w)):
                return False
        state[u] = 2
        return True

    return all(state.get(u) == 2 or visit(u) for u in set(vertex.values()))


def test_unsupported_node_between_supported_ones_splits_without_cycle():
    model = as_model(chain_with_gap())
    proposal = propose(model, [ToyBackend()])
    parts = proposal.per_backend["toy"].partitions
    # {a} then {c, d}: a and d cannot share a partition because d depends on a through unsupported b.
    assert [p.node_names for p in parts] == [["a"], ["c", "d"]]
    assert fused_graph_is_acyclic(model, parts)
    assert proposal.placements[next(n for n in model.graph if n.name == "b")].backend is None
    assert "toy has no rule for Erf" in proposal.per_backend["toy"].rejected[next(n for n in model.graph if n.name == "b")]


def test_independent_branch_joins_the_first_group():
    # y -> Relu(e) is independent of the Erf: it joins the first wave's group.
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="a"),
        helper.make_node("Erf", ["a"], ["b"], name="b"),
        helper.make_node("Relu", ["y"], ["e"], name="e"),
        helper.make_node("Add", ["b", "e"], ["f"], name="f"),
    ]
    model = as_model(make_model(nodes, [tensor("x", [2]), tensor("y", [2])], [tensor("f", [2])]))
    parts = propose(model, [ToyBackend()]).per_backend["toy"].partitions
    assert [sorted(p.node_names) for p in parts] == [["a", "e"], ["f"]]
    assert fused_graph_is_acyclic(model, parts)


def test_random_graphs_never_form_cycles():
    rng = np.random.default_rng(7)
    for trial in range(60):
        nodes, values = [], ["x"]
        for i in range(25):
            op = rng.choice(["Relu", "Erf", "Add", "Sigmoid", "Neg"])
            if op == "Add":
                a, b = rng.choice(values, 2)
                nodes.append(helper.make_node("Add", [a, b], [f"v{i}"], name=f"n{i}"))
            else:
                nodes.append(helper.make_node(str(op), [rng.choice(values)], [f"v{i}"], name=f"n{i}"))
            values.append(f"v{i}")
        model = as_model(make_model(nodes, [tensor("x", [3])], [tensor(values[-1], [3])]))
        parts = propose(model, [ToyBackend()]).per_backend["toy"].partitions
        assert fused_graph_is_acyclic(model, parts), f"cycle in trial {trial}"
        claimed = [n for p in parts for n in p.nodes]
        assert len(claimed) == len(set(claimed))
        assert all(n.op_type in ("Relu", "Add", "Sigmoid") for n in claimed)


def qdq_conv_model(weight_dq=True):
    w = np.ones((4, 3, 3, 3), dtype=np.uint8)
    nodes = [
        helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["x"], name="dq_x"),
        helper.make_node("DequantizeLinear", ["wq", "s", "z"], ["w"], name="dq_w"),
        helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("QuantizeLinear", ["y", "s", "z"], ["yq"], name="q_y"),
    ]
    inits = [const("wq", w), const("s", np.array(0.1, np.float32)), const("z", np.array(0, np.uint8))]
    return make_model(nodes, [tensor("xq", [1, 3, 8, 8], TensorProto.UINT8)],
                      [tensor("yq", [1, 4, 8, 8], TensorProto.UINT8)], inits)


def test_qdq_unit_is_claimed_whole():
    model = as_model(qdq_conv_model())
    parts = propose(model, [ToyBackend()]).per_backend["toy"].partitions
    assert len(parts) == 1
    assert parts[0].node_names == ["dq_x", "dq_w", "conv", "q_y"]


def test_qdq_unit_is_left_whole_when_target_unsupported():
    class NoConv(ToyBackend):
        name = "noconv"

        def supports(self, unit, ctx):
            if unit.op_type == "Conv":
                return Support.no("no conv today")
            return super().supports(unit, ctx)

    model = as_model(qdq_conv_model())
    bp = propose(model, [NoConv()]).per_backend["noconv"]
    assert bp.partitions == []
    assert {n.name: r for n, r in bp.rejected.items()} == {
        "dq_x": "no conv today", "dq_w": "no conv today", "conv": "no conv today", "q_y": "no conv today"}


def test_higher_priority_backend_wins_and_lower_sees_nodes_as_taken():
    model = as_model(chain_with_gap())
    proposal = propose(model, [OtherBackend(), ToyBackend()])
    owners = {n.name: p.backend for n, p in proposal.placements.items()}
    assert owners == {"a": "other", "b": None, "c": "other", "d": "other"}
    toy = proposal.per_backend["toy"]
    assert toy.partitions == []
    assert all(r == "taken by other, which has priority" for n, r in toy.rejected.items() if n.name != "b")
    # Reversed priority: toy takes everything it can.
    owners = {n.name: p.backend for n, p in propose(model, [ToyBackend(), OtherBackend()]).placements.items()}
    assert owners == {"a": "toy", "b": None, "c": "toy", "d": "toy"}


def test_partition_io_and_filters():
    class DropSingles(ToyBackend):
        name = "picky"

        def accept_partition(self, partition, ctx):
            return Support.check(len(partition.units) > 1, "a single node is not worth a partition")

    model = as_model(chain_with_gap())
    bp = propose(model, [DropSingles()]).per_backend["picky"]
    assert [p.node_names for p in bp.partitions] == [["c", "d"]]
    assert bp.rejected[next(n for n in model.graph if n.name == "a")] == (
        "partition dropped by picky: a single node is not worth a partition")
    (part,) = bp.partitions
    assert [v.name for v in part.inputs] == ["b", "a"]
    assert [v.name for v in part.outputs] == ["d"]


def test_proposal_is_deterministic():
    first = [[p.node_names for p in propose(as_model(chain_with_gap()), [ToyBackend()]).partitions]
             for _ in range(3)]
    assert first[0] == first[1] == first[2]


def test_verdict_thresholds_match_ort():
    assert verdict(1, 76, 100) == "YES"
    assert verdict(1, 75, 100) == "MAYBE"
    assert verdict(1, 51, 100) == "MAYBE"
    assert verdict(1, 50, 100) == "NO"
    assert verdict(2, 76, 100) == "MAYBE"
    assert verdict(2, 75, 100) == "NO"
    assert verdict(3, 100, 100) == "NO"
    assert verdict(0, 0, 10) == "NO"


def test_control_flow_outer_scope_use_is_an_edge():
    # If's branch reads `a` from the outer scope: the If depends on the Relu producing it.
    then_g = helper.make_graph([helper.make_node("Identity", ["a"], ["t"])], "then", [], [tensor("t", [2])])
    else_g = helper.make_graph([helper.make_node("Identity", ["a"], ["e"])], "else", [], [tensor("e", [2])])
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="a"),
        helper.make_node("If", ["cond"], ["i"], name="if", then_branch=then_g, else_branch=else_g),
        helper.make_node("Relu", ["i"], ["r"], name="r"),
        helper.make_node("Add", ["a", "r"], ["out"], name="out"),
    ]
    model = as_model(make_model(nodes, [tensor("x", [2]), tensor("cond", [], TensorProto.BOOL)],
                                [tensor("out", [2])]))
    parts = propose(model, [ToyBackend()]).per_backend["toy"].partitions
    assert [p.node_names for p in parts] == [["a"], ["r", "out"]]


def test_excluded_nodes_sees_the_graph_nodes_through_the_context():
    """ctx.graph_nodes() in a proposal is the graph's node list, in order, for excluded_nodes to use."""
    seen = []

    class Excluding(ToyBackend):
        def excluded_nodes(self, graph, ctx):
            nodes = ctx.graph_nodes()
            seen.append(list(nodes))
            return {node: "excluded by name" for node in nodes if node.name == "c"}

    model = as_model(chain_with_gap())
    result = propose(model, [Excluding()])
    assert seen == [list(model.graph)]
    assert result.per_backend["toy"].rejected[next(n for n in model.graph if n.name == "c")] == "excluded by name"


def _same_proposal(a, b) -> None:
    assert list(a.per_backend) == list(b.per_backend)
    for name in a.per_backend:
        x, y = a.per_backend[name], b.per_backend[name]
        assert [(p.nodes, p.inputs, p.outputs) for p in x.partitions] == [(p.nodes, p.inputs, p.outputs) for p in y.partitions]
        assert x.rejected == y.rejected and x.total_nodes == y.total_nodes
    assert {n: (p.backend, p.reason) for n, p in a.placements.items()} == \
        {n: (p.backend, p.reason) for n, p in b.placements.items()}
    assert a.answers == b.answers


def test_the_first_backends_own_proposal_is_its_part_of_the_joint_one(tmp_path):
    """propose(first=...) takes the first backend's part from its proposal alone, and propose(index=...) an index
    of the graph made once: either way the proposal is the same as when it is worked out again
    (partitions, rejections, placements and their reasons, answers), on a graph where both backends want the
    same nodes and on light models."""
    from mepkit import LIGHT_MODELS

    toy, other = ToyBackend(), OtherBackend()
    models = [as_model(chain_with_gap())]
    for path in LIGHT_MODELS[:3]:
        (tmp_path / path.stem).mkdir()
        models.append(load_for_analysis(path, tmp_path / path.stem))
    for model in models:
        for order in ((toy, other), (other, toy)):
            alone = propose(model, [order[0]])
            answers = {name: a for p in (alone, propose(model, [order[1]])) for name, a in p.answers.items()}
            joint = propose(model, list(order), answers=answers, first=alone)
            _same_proposal(joint, propose(model, list(order), answers=answers))
            first_name = order[0].name  # (the first backend's part is taken from its own proposal, not redone)
            assert all(a is b for a, b in zip(joint.per_backend[first_name].partitions,
                                              alone.per_backend[first_name].partitions, strict=True))
            # one index of the unchanged model's graph for several proposals
            index = graph_index(model)
            shared = [propose(model, [backend], index=index) for backend in order]
            for backend, proposal in zip(order, shared, strict=True):
                _same_proposal(proposal, propose(model, [backend]))
            _same_proposal(propose(model, list(order), answers=answers, first=alone, index=index),
                           propose(model, list(order), answers=answers))
    other_model = as_model(chain_with_gap())  # (an index of another graph is not taken)
    assert _same_proposal(propose(other_model, [toy], index=graph_index(models[0])), propose(other_model, [toy])) is None


def test_the_partition_pass_is_an_analysis_a_pass_manager_passes_the_model_through():
    import onnx_ir as ir

    from mobile_ep.passes.partition import PartitionPass

    model = as_model(chain_with_gap())
    before = [(n.name, n.op_type) for n in model.graph]
    partition = PartitionPass(ToyBackend())
    assert (partition.in_place, partition.changes_input, partition.destructive) == (True, False, False)
    result = ir.passes.PassManager([partition])(model)
    assert result.model is model and not result.modified
    assert [(n.name, n.op_type) for n in model.graph] == before
    assert partition.proposal is not None and partition.proposal.partitions


class _ExplicitInputsBackend(ToyBackend):
    name = "toy-explicit"
    groups_by_explicit_inputs = True


def _relu_erf_if_relu():
    """x -> Relu a -> Erf u; If on the graph input c, whose branches read u; Relu b of the If's output."""
    branch = lambda op, name: helper.make_graph(  # noqa: E731
        [helper.make_node(op, ["u"], [f"{name}_o"], name=name)], name, [], [tensor(f"{name}_o", [2, 3])])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="a"),
             helper.make_node("Erf", ["a"], ["u"], name="u"),
             helper.make_node("If", ["c"], ["i"], name="if", then_branch=branch("Identity", "t"),
                              else_branch=branch("Neg", "e")),
             helper.make_node("Relu", ["i"], ["y"], name="b")]
    return make_model(nodes, [tensor("x", [2, 3]), tensor("c", [], TensorProto.BOOL)], [tensor("y", [2, 3])])


def test_a_round_with_a_group_across_a_subgraph_read_is_dropped_for_an_ep_grouping_by_explicit_inputs():
    """An EP that counts only a node's explicit inputs (onnxruntime-qnn 2.7) finds the If ready at once and puts
    a and b in one group; onnxruntime, counting the branches' read of u, finds a path a -> u -> If -> b through
    the CPU and drops every group of the round.  ORT's own grouping makes two partitions."""
    model = as_model(_relu_erf_if_relu())
    plain = propose(model, [ToyBackend()]).per_backend["toy"]
    assert [p.node_names for p in plain.partitions] == [["a"], ["b"]]
    explicit = propose(model, [_ExplicitInputsBackend()]).per_backend["toy-explicit"]
    assert explicit.partitions == []
    reasons = {n.name: r for n, r in explicit.rejected.items()}
    assert "onnxruntime drops every group toy-explicit proposes" in reasons["a"]
    assert "'a'" in reasons["b"]
