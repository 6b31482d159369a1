"""The partitioner asks a rule once per node signature, and that changes no answer.

NNAPI's and Core ML's rules set ``OpRule.signature_memo``: their "supported" answer for a single node is
a function of the node's signature (op, attributes, types, shapes and constness of its inputs and
outputs) and of what they read through the context, which says when they read more.  With the memo
turned off (``partition.SIGNATURE_MEMO``), every node is asked: the answers (claim and reason) and the
partitions must be the same on every ONNX node case whose ops the backend has rules for, with and
without constant inputs or a dynamic batch, on the light_* models as ``check`` reads them and on
generated graphs, under several backend options.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx_ir as ir
import pytest

from mepkit import LIGHT_DIR
from mobile_ep import SUPPORTED, Backend, OpRule, RuleRegistry, Support, testing
from mobile_ep import pipeline as api
from mobile_ep.partitioning import propose as partition
from mobile_ep.partitioning.propose import propose

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import graphs  # noqa: E402

from mobile_ep.options import Options
from mobile_ep.passes.load import load_for_analysis

OPTION_SETS = {
    "nnapi": [{}, {"api_level": "27"}, {"use_nchw": "true", "api_level": "29"}, {"compile_ops": "extended"}],
    "coreml": [{}, {"model_format": "NeuralNetwork"}, {"require_static_input_shapes": "true"}],
}


def _dynamic(model: ir.Model) -> ir.Model:
    """The model with its first input's first dimension made symbolic (as an exporter's batch)."""
    for value in model.graph.inputs[:1]:
        if value.shape is not None and len(value.shape):
            value.shape = ir.Shape(["N", *value.shape[1:]])
    return model


def _outcome(models, backends, signatures=None) -> list:
    out = []
    for name, model in models:
        proposal = propose(model, backends, signatures=signatures)
        answers = [(b.name, bool(a), a.reason) for b in backends
                   for a in map(proposal.answers[b.name].get, map(id, model.graph)) if a is not None]
        partitions = [(p.backend, [n.name for n in p.nodes]) for p in proposal.partitions]
        out.append((name, answers, partitions, [p.reason for p in proposal.placements.values()]))
    return out


def _compare(models, backends, monkeypatch) -> list:
    memo = _outcome(models, backends, {})  # one memo for all the models: each signature is asked once in all
    with monkeypatch.context() as patch:
        patch.setattr(partition, "SIGNATURE_MEMO", False)
        asked = _outcome(models, backends)
    mismatches = [(a[0], a, b) for a, b in zip(memo, asked, strict=True) if a != b]
    assert not mismatches, f"{[b.name for b in backends]}: {mismatches[:2]}"
    return memo


@pytest.fixture(scope="module")
def light_models(tmp_path_factory):
    return [(p.stem, load_for_analysis(p, tmp_path_factory.mktemp(p.stem)))  # weights mapped from there
            for p in sorted(LIGHT_DIR.glob("light_*.onnx"))]


@pytest.mark.parametrize("name", sorted(OPTION_SETS))
def test_signature_memo_changes_no_answer(name, light_models, monkeypatch):
    pytest.importorskip(f"mobile_ep_{name}")
    for options in OPTION_SETS[name]:
        (backend,) = api.resolve_backends(Options.build([name], options={name: options}))
        assert all(rule.signature_memo for _, _, rule in backend.rules)
        cases = testing.candidate_cases(backend)
        models = [(case.name + suffix, testing.load_case(case, constant)) for case in cases
                  for constant, suffix in ((False, ""), (True, " (constant inputs)"))]
        models += [(case.name + " (dynamic)", _dynamic(testing.load_case(case, False))) for case in cases]
        models += light_models
        models += [(f"{kind} 1000", graphs.make(kind, 1000)) for kind in graphs.KINDS]
        outcome = _compare(models, [backend], monkeypatch)
        assert len(outcome) > 100
        assert sum(ok for _, answers, _, _ in outcome for _, ok, _ in answers) > 1000  # claims, not only refusals


def test_signature_memo_changes_no_answer_with_both_backends(light_models, monkeypatch):
    backends = api.resolve_backends(Options())
    if len(backends) < 2:
        pytest.skip("needs two backends")
    _compare(light_models + [("qdq_chain 700", graphs.qdq_chain(700))], backends, monkeypatch)


# --------------------------------------------------------------------------------------------------
# What the memo relies on, shown with a toy backend
# --------------------------------------------------------------------------------------------------
def _relu_chain(n: int, *, used_mask_at: int | None = None) -> ir.Model:
    """x -> Dropout (mask output) -> Relu ... : n identical Dropout+Relu pairs; the mask of pair
    *used_mask_at* feeds an Identity, so its Dropout differs from the others only in its consumers."""
    x = ir.Value(name="x", shape=ir.Shape([1, 4]), type=ir.TensorType(ir.DataType.FLOAT))
    nodes, current = [], x
    outputs = []
    for i in range(n):
        drop = ir.Node("", "Dropout", [current], num_outputs=2, name=f"drop{i}")
        drop.outputs[0].name, drop.outputs[1].name = f"d{i}", f"mask{i}"
        for value in drop.outputs:
            value.shape, value.type = ir.Shape([1, 4]), ir.TensorType(ir.DataType.FLOAT)
        drop.outputs[1].type = ir.TensorType(ir.DataType.BOOL)
        relu = ir.Node("", "Relu", [drop.outputs[0]], name=f"relu{i}")
        relu.outputs[0].name, relu.outputs[0].shape = f"r{i}", ir.Shape([1, 4])
        relu.outputs[0].type = ir.TensorType(ir.DataType.FLOAT)
        nodes += [drop, relu]
        if i == used_mask_at:
            keep = ir.Node("", "Identity", [drop.outputs[1]], name="keep")
            keep.outputs[0].name, keep.outputs[0].type = "kept", ir.TensorType(ir.DataType.BOOL)
            nodes.append(keep)
            outputs.append(keep.outputs[0])
        current = relu.outputs[0]
    graph = ir.Graph([x], [current, *outputs], nodes=nodes, opset_imports={"": 17}, name="g")
    return ir.Model(graph, ir_version=10)


class _Toy(Backend):
    name = "toy-memo"
    version = "1"
    calls: list[str] = []
    announce = True

    def build_rules(self) -> RuleRegistry:
        owner = self

        class Dropout(OpRule):
            op_types = ("Dropout",)
            signature_memo = True

            def check(self, unit, ctx):
                owner.calls.append(unit.target.name)
                mask = unit.target.outputs[1]
                if owner.announce:
                    used = bool(ctx.consumers(mask))
                else:  # reads the graph behind the context's back: the memo cannot know
                    used = bool(mask.uses())
                return SUPPORTED if not used else Support.no("the mask is used")

        class Relu(OpRule):
            op_types = ("Relu",)

            def check(self, unit, ctx):
                owner.calls.append(unit.target.name)
                return SUPPORTED

        return RuleRegistry([Dropout(), Relu()])


def test_memo_asks_once_per_signature_and_only_rules_that_opt_in(monkeypatch):
    model = _relu_chain(50)
    monkeypatch.setattr(_Toy, "calls", [])
    propose(model, [_Toy()])
    # each of the 50 Dropouts reads its mask's consumers: asked for every node; Relu did not opt in: every node
    assert len(_Toy.calls) == 100

    class Plain(_Toy):
        """Both rules opt in, and Dropout's no longer reads its consumers."""

        def build_rules(self):
            registry = super().build_rules()  # (fresh rule classes, made by this call)
            for _, _, rule in registry:
                type(rule).signature_memo = True
                if rule.op_types == ("Dropout",):
                    type(rule).check = lambda self, unit, ctx: (_Toy.calls.append(unit.target.name), SUPPORTED)[1]
            return registry

    monkeypatch.setattr(_Toy, "calls", [])
    proposal = propose(model, [Plain()])
    assert sorted(_Toy.calls) == ["drop0", "relu0"]  # one of each signature
    assert len(proposal.partitions) == 1 and len(proposal.partitions[0].nodes) == 100


def test_reads_beyond_the_signature_must_go_through_the_context(monkeypatch):
    # The Dropout whose mask is used differs from the others only in its consumers.
    model = _relu_chain(5, used_mask_at=3)
    answers = propose(model, [_Toy()]).answers["toy-memo"]
    by_name = {node.name: answers[id(node)] for node in model.graph if id(node) in answers}
    assert not by_name["drop3"] and all(by_name[f"drop{i}"] for i in (0, 1, 2, 4))
    # The same rule reading value.uses() directly is memoized on drop0's answer: the wrong answer for drop3.
    # (This is why signature_memo is off by default, and what the built-in backends' audit is about.)
    monkeypatch.setattr(_Toy, "announce", False)
    answers = propose(model, [_Toy()]).answers["toy-memo"]
    assert answers[id(next(n for n in model.graph if n.name == "drop3"))]
    monkeypatch.setattr(partition, "SIGNATURE_MEMO", False)
    answers = propose(model, [_Toy()]).answers["toy-memo"]
    assert not answers[id(next(n for n in model.graph if n.name == "drop3"))]


def test_signatures_tell_apart_what_rules_read():
    from mobile_ep.partitioning.context import ProposalContext

    (backend,) = api.resolve_backends(Options.build(["nnapi"])) if _has("nnapi") else [_Toy()]
    w = ir.Value(name="w", shape=ir.Shape([2, 2]), type=ir.TensorType(ir.DataType.FLOAT),
                 const_value=ir.tensor(np.ones((2, 2), np.float32)))
    a = ir.Value(name="a", shape=ir.Shape(["N", 2]), type=ir.TensorType(ir.DataType.FLOAT))
    b = ir.Value(name="b", shape=ir.Shape(["M", 2]), type=ir.TensorType(ir.DataType.FLOAT))
    c = ir.Value(name="c", shape=ir.Shape([1, 2]), type=ir.TensorType(ir.DataType.FLOAT16))
    v = ir.Value(name="v", shape=ir.Shape([2, 2]), type=ir.TensorType(ir.DataType.FLOAT))  # w, computed
    nodes = [ir.Node("", "MatMul", [a, w], name="m1"), ir.Node("", "MatMul", [b, w], name="m2"),
             ir.Node("", "MatMul", [a, v], name="m3"), ir.Node("", "MatMul", [c, w], name="m4"),
             ir.Node("", "Softmax", [a], attributes=[ir.AttrInt64("axis", 1)], name="s1"),
             ir.Node("", "Softmax", [a], attributes=[ir.AttrInt64("axis", 0)], name="s2"),
             ir.Node("", "Softmax", [a], attributes=[ir.AttrInt64("axis", 1)], name="s3")]
    graph = ir.Graph([a, b, c, v], [n.outputs[0] for n in nodes], nodes=nodes, initializers=[w],
                     opset_imports={"": 17})
    ctx = ProposalContext(ir.Model(graph, ir_version=10), backend)
    keys = {n.name: ctx.signature(n) for n in nodes}
    assert keys["s1"] == keys["s3"]  # same op, attributes, input and output facts: one question
    assert keys["s1"] != keys["s2"]  # another attribute value
    assert keys["m1"] != keys["m2"]  # symbolic dims by name
    assert keys["m1"] != keys["m3"]  # a constant input is not a computed one
    assert keys["m1"] != keys["m4"]  # element types
    tensor_attr = ir.Node("", "ConstantOfShape", [a], attributes=[ir.AttrTensor("value", ir.tensor(np.ones(1)))])
    assert ctx.signature(tensor_attr) is None  # tensors are not part of a signature: always asked


def _has(name: str) -> bool:
    try:
        __import__(f"mobile_ep_{name}")
    except ImportError:
        return False
    return True


def test_a_rule_that_announces_its_reads_is_asked_for_every_node(monkeypatch):
    class Announcing(_Toy):
        """Dropout's rule reads something of its own and says so with ctx.reads_graph()."""

        def build_rules(self):
            registry = super().build_rules()  # (fresh rule classes, made by this call)
            for _, _, rule in registry:
                if rule.op_types == ("Dropout",):
                    def check(self, unit, ctx):
                        _Toy.calls.append(unit.target.name)
                        ctx.reads_graph()
                        return SUPPORTED

                    type(rule).check = check
            return registry

    monkeypatch.setattr(_Toy, "calls", [])
    propose(_relu_chain(20), [Announcing()])
    assert sorted(c for c in _Toy.calls if c.startswith("drop")) == sorted(f"drop{i}" for i in range(20))


def test_no_answers_are_reused_unless_their_reason_names_the_node(monkeypatch):
    class Declining(_Toy):
        """Relu opts in and declines every node; *quote* makes its reason name the node's input."""

        quote = False

        def build_rules(self):
            registry = super().build_rules()  # (fresh rule classes, made by this call)
            for _, _, rule in registry:
                if rule.op_types == ("Relu",):
                    def check(self, unit, ctx, backend=self):
                        _Toy.calls.append(unit.target.name)
                        x = unit.target.inputs[0]
                        return Support.no(f"input {x.name} is not wanted" if backend.quote else "Relu is not wanted")

                    type(rule).check = check
                    type(rule).signature_memo = True
            return registry

    model = _relu_chain(30)
    relus = [n for n in model.graph if n.op_type == "Relu"]
    monkeypatch.setattr(_Toy, "calls", [])
    rejected = propose(model, [Declining()]).per_backend["toy-memo"].rejected
    assert [c for c in _Toy.calls if c.startswith("relu")] == ["relu0"]  # one signature: asked once
    assert [rejected[n] for n in relus] == ["Relu is not wanted"] * 30

    quoting = Declining()
    quoting.quote = True
    monkeypatch.setattr(_Toy, "calls", [])
    rejected = propose(model, [quoting]).per_backend["toy-memo"].rejected
    assert sorted(c for c in _Toy.calls if c.startswith("relu")) == sorted(n.name for n in relus)  # each its own
    assert [rejected[n] for n in relus] == [f"input d{i} is not wanted" for i in range(30)]


def _legalized(model: ir.Model, backend) -> tuple[list, list, list, int]:
    """Legalize a copy of *model* for *backend*: what was applied and skipped, the nodes, the rule calls."""
    from mobile_ep.passes.legalize import LegalizePass

    calls = []
    supports = backend.supports
    backend.supports = lambda unit, ctx: (calls.append(unit.target.op_type), supports(unit, ctx))[1]
    try:
        copy = model.clone()
        legal = LegalizePass(backend)
        legal(copy)
    finally:
        del backend.supports
    return ([a.as_dict() for a in legal.applied], legal.skipped,
            [(n.op_type, n.name, [None if v is None else v.name for v in n.inputs]) for n in copy.graph], len(calls))


def test_legalization_asks_once_per_signature_and_changes_nothing(light_models, monkeypatch, tmp_path):
    """The legalize pass checks the nodes its rewrites make through the same memo: with it off, every
    rewrite, every skipped attempt with its reason and the rewritten graph are the same."""
    from mobile_ep import model_io as mir

    models = dict(light_models)
    saved = mir.save(graphs.make("transformer", 1000), tmp_path / "transformer.onnx")
    transformer = load_for_analysis(saved, tmp_path)  # with the shapes check infers (LayerNorm needs them)
    cases = [("transformer 1000", transformer), ("light_resnet50", models["light_resnet50"]),
             ("light_shufflenet", models["light_shufflenet"])]
    rewrote = 0
    for backend in api.resolve_backends(Options()):
        for name, model in cases:
            memo = _legalized(model, backend)
            with monkeypatch.context() as patch:
                patch.setattr(partition, "SIGNATURE_MEMO", False)
                asked = _legalized(model, backend)
            assert memo[:3] == asked[:3], f"{backend.name} on {name}"
            assert memo[3] <= asked[3]
            if name.startswith("transformer") and memo[0]:  # 40 LayerNorms, nine nodes each: far fewer questions
                rewrote += 1
                assert memo[3] * 2 < asked[3], f"{backend.name} on {name}: {memo[3]} vs {asked[3]} rule calls"
    assert rewrote >= 1
