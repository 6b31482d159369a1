"""The compiled partitioner loops (mobile_ep._speedups) give exactly what their pure-Python twins give.

Each C function is run next to its twin on the same inputs: random graphs (hypothesis) for the index and
wave functions, including cycles, repeated producers and a fast path; every node and value of real models
for signatures and the cost model's counts, with symbolic, missing and overflowing shapes.  End to end,
``propose`` and the cost model give the same partitions, answers, reasons and costs either way.

shapes_within, the quick read of a serialized model's declared shapes, is compared with the Python inspection
it stands in for: on every ONNX node test and light model, at each element type's limit, and on mutated bytes.
value_types, the quick read of the inferred types the plain deserializer puts on values, is compared with the
parsed model the same ways, and the models built either way are compared object by object.

Without the extension (no C compiler when installed) these tests skip, unless MOBILE_EP_REQUIRE_SPEEDUPS is
set (tox sets it), where a missing extension is a failure.
"""

from __future__ import annotations

import contextlib
import itertools
import operator
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from mepkit import LIGHT_DIR, LIGHT_MODELS, make_model, tensor
from mobile_ep import _accel, _fields, api, capability, cost, partition, testing
from mobile_ep import ir as mir
from mobile_ep.capability import SUPPORTED, RuleContext, Support, _ProposalContext
from mobile_ep.cost import select_partitions
from mobile_ep.partition import propose
from mobile_ep.plugins import make_plugins

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import graphs  # noqa: E402

C = _accel.speedups


def test_the_extension_is_built_where_required():
    if os.environ.get("MOBILE_EP_REQUIRE_SPEEDUPS") and not _accel.pure_python_requested():
        assert C is not None, "mobile_ep._speedups was not built (a C compiler and Python's headers are needed)"
    if C is None:
        pytest.skip("mobile_ep._speedups is not built here")
    assert partition._waves is C.waves and cost._speedups is C and capability._speedups is C


def test_pure_python_is_chosen_by_the_environment():
    code = "from mobile_ep import _accel, partition; print(_accel.speedups, partition._waves.__name__)"
    env = {**os.environ, "MOBILE_EP_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["None", "_py_waves"]


needs_c = pytest.mark.skipif(C is None, reason="mobile_ep._speedups is not built here")


@contextlib.contextmanager
def _pure(monkeypatch):
    """Every module's compiled loops swapped for their pure-Python twins."""
    with monkeypatch.context() as patch:
        for name in ("producers", "in_degrees", "drain", "ordered_consumers", "waves", "gather"):
            patch.setattr(partition, f"_{name}", getattr(partition, f"_py_{name}"))
        patch.setattr(partition, "_speedups", None)
        patch.setattr(capability, "_speedups", None)
        patch.setattr(cost, "_speedups", None)
        yield


# --------------------------------------------------------------------------------------------------
# slot reads (field_get, through gather)
# --------------------------------------------------------------------------------------------------
class _Slotted:
    __slots__ = ("_a", "_b")

    def __init__(self, a=None, b=None):
        if a is not None:
            self._a = a
        if b is not None:
            self._b = b


class _Overriding(_Slotted):
    """A subclass whose ``_a`` is a property: attrgetter("_a") finds the property, not the slot."""

    __slots__ = ()

    @property
    def _a(self):
        return "from the property"


class _Looking(_Slotted):
    """Attributes looked up its own way."""

    __slots__ = ()

    def __getattribute__(self, name):
        return f"looked up {name}"


def _same_outcome(getter, objects, stored=True):
    """gather(getter, objects) and [getter(o) for o in objects]: equal results (the very objects if *stored*:
    what the getter returns is kept in the objects, not made by the call), or the same exception."""
    try:
        expected = [getter(o) for o in objects]
    except Exception as exc:
        with pytest.raises(type(exc), match=re.escape(str(exc))):
            C.gather(getter, objects)
        return None
    found = C.gather(getter, objects)
    assert found == expected
    assert not stored or all(f is e for f, e in zip(found, expected, strict=True))
    return found


@needs_c
def test_gather_reads_what_the_getter_reads():
    first, second = [1], "two"
    objects = [_Slotted(first, second), _Overriding(), _Looking(first), _Slotted(first, second)]
    assert _same_outcome(operator.attrgetter("_a"), objects, stored=False) == [
        first, "from the property", "looked up _a", first]
    assert _same_outcome(operator.attrgetter("_b"), [_Slotted(first, second), _Looking()], stored=False) == [
        second, "looked up _b"]
    _same_outcome(operator.attrgetter("_b"), [_Slotted(first, second), _Slotted(first)])  # unset: AttributeError
    _same_outcome(operator.attrgetter("_a", "_b"), [_Slotted(first, second)], stored=False)  # (a tuple: called)
    _same_outcome(operator.attrgetter("_a.__len__"), [_Slotted(first)], stored=False)  # (a dotted path: called)
    _same_outcome(lambda o: o._a, [_Slotted(first)])
    _same_outcome(operator.attrgetter("missing"), [_Slotted(first)])
    nodes = list(graphs.make("transformer", 300).graph)
    for getter in (_fields.node_inputs, _fields.node_outputs, _fields.node_op_type, _fields.node_attribute_data):
        _same_outcome(getter, nodes)
    values = [v for n in nodes for v in n.outputs]
    for getter in (_fields.value_shape, _fields.value_type, _fields.value_const_value):
        _same_outcome(getter, values)


@needs_c
def test_gather_follows_a_class_that_changes():
    """What was worked out for a class holds only until the class changes (its version tag)."""

    class Changing:
        __slots__ = ("_a",)

        def __init__(self, a):
            self._a = a

    getter = operator.attrgetter("_a")
    objects = [Changing(k) for k in range(3)]
    assert C.gather(getter, objects) == [0, 1, 2]
    slot = Changing._a
    Changing._a = property(lambda self: "replaced")
    assert C.gather(getter, objects) == ["replaced"] * 3
    Changing._a = slot
    assert C.gather(getter, objects) == [0, 1, 2]


@needs_c
def test_gather_errors():
    with pytest.raises(TypeError, match="must be a sequence"):
        C.gather(operator.attrgetter("_a"), 5)
    with pytest.raises(ZeroDivisionError):
        C.gather(lambda o: 1 / 0, [1])

    def shrinking(o, items=[1, 2, 3]):  # noqa: B006  (the list it empties is the one gathered)
        items.clear()
        return o

    with pytest.raises(RuntimeError, match="changed while read"):
        C.gather(shrinking, shrinking.__defaults__[0])


# --------------------------------------------------------------------------------------------------
# index and waves, on random graphs
# --------------------------------------------------------------------------------------------------
@st.composite
def dags(draw, cyclic: bool = False):
    """Producers of n nodes: each node reads up to 4 earlier nodes (repeats allowed); some later ones if cyclic."""
    n = draw(st.integers(0, 30))
    producers = []
    for i in range(n):
        limit = n if cyclic else i
        sources = draw(st.lists(st.integers(0, limit - 1), max_size=4)) if limit else []
        producers.append(tuple(dict.fromkeys(sources)))
    return producers


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_producers(data):
    values = [object() for _ in range(data.draw(st.integers(0, 20)))]
    made_by = {v: data.draw(st.integers(0, 9)) for v in values if data.draw(st.booleans())}
    rows = data.draw(st.lists(st.lists(st.sampled_from([None, *values]) if values else st.none(), max_size=6),
                              max_size=10))
    rows = [tuple(r) if k % 2 else r for k, r in enumerate(rows)]  # (tuples and lists alike)
    assert C.producers(rows, made_by) == partition._py_producers(rows, made_by)


@needs_c
@settings(max_examples=300, deadline=None)
@given(dags(cyclic=True))
def test_index_functions(producers):
    degrees, users = C.in_degrees(producers)
    assert (degrees, users) == partition._py_in_degrees(producers)
    assert C.drain(degrees, users) == partition._py_drain(degrees, users)
    order, pending = C.drain(degrees, users)
    if len(order) == len(producers):
        assert C.ordered_consumers(order, users) == partition._py_ordered_consumers(order, users)


def _recording(answers: list[bool]):
    calls: list[int] = []

    def is_supported(u: int) -> bool:
        calls.append(u)
        return answers[u]

    return is_supported, calls


@needs_c
@settings(max_examples=400, deadline=None)
@given(dags(), st.data())
def test_waves(producers, data):
    n = len(producers)
    degrees, users = partition._py_in_degrees(producers)
    order, _ = partition._py_drain(degrees, users)
    _, consumers = partition._py_ordered_consumers(order, users)
    answers = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    results = []
    for waves in (C.waves, partition._py_waves):
        is_supported, calls = _recording(answers)
        results.append((waves(order, consumers, degrees, is_supported), calls))
    assert results[0] == results[1]  # the same groups, and the rules asked in the same order

    # the fast path: signatures answered "supported" skip the call, unless the memo already has the unit
    signatures = data.draw(st.lists(st.sampled_from([None, "a", "b", "c"]), min_size=n, max_size=n))
    known = {"a": SUPPORTED, "b": Support.no("no")}
    memo_start = {k: SUPPORTED for k in data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=3))}
    results = []
    for waves in (C.waves, partition._py_waves):
        is_supported, calls = _recording(answers)
        memo = dict(memo_start)
        groups = waves(order, consumers, degrees, is_supported, (signatures, known, list(range(n)), memo, SUPPORTED))
        results.append((groups, calls, memo))
    assert results[0] == results[1]


@needs_c
def test_waves_errors():
    def boom(u):
        raise KeyError(u)

    with pytest.raises(KeyError):
        C.waves([0, 1], [[1], []], [0, 1], boom)
    with pytest.raises(IndexError):
        C.waves([0], [[5]], [0], bool)
    with pytest.raises(ValueError):
        C.waves([0, 1], [[1]], [0, 1], bool)
    with pytest.raises(ValueError):
        C.ordered_consumers([0, 0], [[], []])
    with pytest.raises(TypeError):
        C.in_degrees([1, 2])


# --------------------------------------------------------------------------------------------------
# signatures and the cost model's counts, on real models
# --------------------------------------------------------------------------------------------------
def _odd_model() -> ir.Model:
    """Values of every kind a fact tells apart: no shape, symbolic, constant, overridable, from a Constant node,
    a 4-bit and a string type, huge dims; attributes that are lists, tensors and absent."""
    f = ir.DataType.FLOAT
    x = ir.Value(name="x", shape=ir.Shape(["N", 3]), type=ir.TensorType(f))
    w = ir.Value(name="w", const_value=ir.tensor(np.ones((3, 3), np.float32)))
    w.shape, w.type = ir.Shape([3, 3]), ir.TensorType(f)
    b = ir.Value(name="b", const_value=ir.tensor(np.ones((3,), np.float32)))  # no shape, no type
    graph_input_init = ir.Value(name="g", shape=ir.Shape([3]), type=ir.TensorType(f),
                                const_value=ir.tensor(np.ones((3,), np.float32)))
    huge = ir.Value(name="huge", shape=ir.Shape([2**40, 2**40, 2**40]), type=ir.TensorType(f))
    four = ir.Value(name="four", shape=ir.Shape([4]), type=ir.TensorType(ir.DataType.INT4))
    text = ir.Value(name="text", shape=ir.Shape([2]), type=ir.TensorType(ir.DataType.STRING))
    constant = ir.node("Constant", [], attributes={"value": ir.tensor(np.ones((3,), np.float32))})
    constant.outputs[0].shape, constant.outputs[0].type = ir.Shape([3]), ir.TensorType(f)
    mm = ir.node("MatMul", [x, w])
    mm.outputs[0].shape, mm.outputs[0].type = ir.Shape(["N", 3]), ir.TensorType(f)
    add = ir.node("Add", [mm.outputs[0], b])  # no shape on its output
    mul = ir.node("Mul", [add.outputs[0], constant.outputs[0]])
    mul.outputs[0].shape, mul.outputs[0].type = ir.Shape([2, 3]), ir.TensorType(f)
    sub = ir.node("Sub", [mul.outputs[0], graph_input_init])
    sub.outputs[0].shape, sub.outputs[0].type = ir.Shape([2, ir.SymbolicDim(None)]), ir.TensorType(f)
    relu = ir.node("Relu", [huge])
    relu.outputs[0].shape, relu.outputs[0].type = ir.Shape([2**40, 2**40, 2**40]), ir.TensorType(f)
    pool = ir.node("MaxPool", [sub.outputs[0]], attributes={"kernel_shape": [2, 2], "auto_pad": "VALID"})
    cast = ir.node("Cast", [four], attributes={"to": 1})
    cast.outputs[0].shape, cast.outputs[0].type = ir.Shape([4]), ir.TensorType(f)
    ident = ir.node("Identity", [text])
    ident.outputs[0].shape, ident.outputs[0].type = ir.Shape([2]), ir.TensorType(ir.DataType.STRING)
    nodes = [constant, mm, add, mul, sub, relu, pool, cast, ident]
    graph = ir.Graph([x, graph_input_init, huge, four, text], [pool.outputs[0], relu.outputs[0], cast.outputs[0],
                     ident.outputs[0]], nodes=nodes, initializers=[w, b, graph_input_init], opset_imports={"": 17})
    return ir.Model(graph, ir_version=8)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    found = [(p.stem, api.load_for_analysis(p, tmp_path_factory.mktemp(p.stem)))
             for p in sorted(LIGHT_DIR.glob("light_*.onnx"))]
    found += [(f"{kind} 300", graphs.make(kind, 300)) for kind in ("chain", "branches", "transformer")]
    found.append(("odd", _odd_model()))
    old = _odd_model()
    old.ir_version = 3  # (an initializer that is also an input is constant before IR version 4)
    found.append(("odd, IR 3", old))
    return found


def _backends():
    installed = make_plugins().backends()
    found = [api.resolve_backends([name], {})[0] for name in ("nnapi", "coreml") if name in installed]
    if not found:
        pytest.skip("neither built-in backend is installed")
    return found


@needs_c
def test_signatures_and_facts(models):
    for name, model in models:
        for backend in _backends():
            nodes = list(model.graph)
            compiled, python = _ProposalContext(model, backend), _ProposalContext(model, backend)
            mask = [k % 3 != 1 for k in range(len(nodes))]
            assert compiled.signatures(nodes, mask) == [python.signature(n) if m else None
                                                        for n, m in zip(nodes, mask, strict=True)], name
            assert compiled.signatures(nodes) == list(map(python.signature, nodes)), name
            assert compiled._facts == python._facts, name
            pending = _ProposalContext(model, backend)
            pending.pending_constants.add(nodes[0].outputs[0])  # (then the Python method answers)
            reference = _ProposalContext(model, backend)
            reference.pending_constants.add(nodes[0].outputs[0])
            assert pending.signatures(nodes) == list(map(reference.signature, nodes)), name


@needs_c
def test_cost_counts(models, monkeypatch):
    for name, model in models:
        backend = _backends()[0]
        ctx = RuleContext(model, backend)
        nodes = list(model.graph)
        values = [v for n in nodes for v in itertools.chain(n.inputs, n.outputs) if v is not None]
        values = [v for v in values if not (v.type is not None and v.type.dtype == ir.DataType.STRING)]
        flops, total = cost._nodes_flops(nodes, ctx), cost._total_bytes(values, ctx)
        with _pure(monkeypatch):
            assert flops == cost._nodes_flops(nodes, ctx), name
            assert total == cost._total_bytes(values, ctx), name
            assert type(total) is int
    # Conv's and MatMul's estimates read ctx.shape: a context whose shape answers otherwise is asked, in C too
    class Squashed(RuleContext):
        def shape(self, value):
            shape = RuleContext.shape(self, value)
            return None if shape is None else tuple(min(d, 2) if isinstance(d, int) else d for d in shape)

    changed = set()
    for name, model in models:
        nodes = [n for n in model.graph if n.op_type in ("Conv", "MatMul")]
        ctx = Squashed(model, _backends()[0])
        flops = cost._nodes_flops(nodes, ctx)
        assert flops == [cost.node_flops(n, ctx) for n in nodes], name
        if flops != [cost.node_flops(n, RuleContext(model, _backends()[0])) for n in nodes]:
            changed.add(name)
    assert {"light_resnet50", "transformer 300"} <= changed  # (so the override was in play)
    text = [v for _, m in models for n in m.graph for v in n.outputs if v.type and v.type.dtype == ir.DataType.STRING]
    assert text
    with pytest.raises(TypeError):  # (no fixed item size: as the pure-Python count raises)
        cost._total_bytes(text, RuleContext(models[-1][1], _backends()[0]))


# --------------------------------------------------------------------------------------------------
# end to end
# --------------------------------------------------------------------------------------------------
def _outcome(model, backends):
    proposal = propose(model, backends)
    answers = {b.name: sorted((k, bool(a), a.reason) for k, a in proposal.answers[b.name].items())
               for b in backends}
    per_backend = []
    for bp in proposal.per_backend.values():
        backend = next(b for b in backends if b.name == bp.backend)
        costs = select_partitions(bp.partitions, RuleContext(model, backend), backend.cost_params())
        per_backend.append(([[n.name for n in p.nodes] for p in bp.partitions],
                             [([v.name for v in p.inputs], [v.name for v in p.outputs]) for p in bp.partitions],
                             sorted((n.name, r) for n, r in bp.rejected.items()), [c.as_dict() for c in costs]))
    placements = [(n.name, p.backend, p.reason) for n, p in proposal.placements.items()]
    return answers, per_backend, placements


@needs_c
def test_propose_is_the_same_either_way(models, monkeypatch):
    backends = _backends()
    cases = [(case.name, testing._load_case(case, True)) for b in backends for case in testing.candidate_cases(b)][:300]
    for name, model in [*models, *cases]:
        for chosen in [[b] for b in backends] + [backends, backends[::-1]]:
            compiled = _outcome(model, chosen)
            with _pure(monkeypatch):
                python = _outcome(model, chosen)
            assert compiled == python, (name, [b.name for b in chosen])


# --------------------------------------------------------------------------------------------------
# shapes_within: the inferred shapes check of mobile_ep.ir.check_inferred_shapes, read off the bytes
# --------------------------------------------------------------------------------------------------
def _refused(data: bytes) -> bool:
    """Whether ir._Inspector refuses a value info or output of any graph of the serialized model *data*."""
    try:
        mir._inspect_values(onnx.ModelProto.FromString(data))
    except mir._Refused:
        return True
    return False


def _inspection_accepts(data: bytes) -> bool:
    """What shapes_within answers True for: every value info and output of every graph of *data* is a tensor
    (or has no type) and the inspection refuses none (up to the dims shapes_within counts as 1: a 0 dim, and a
    dim both numbered and named)."""
    model = onnx.ModelProto.FromString(data)
    tensors = all(value.type.WhichOneof("value") in ("tensor_type", None)
                  for graph in mir._all_graphs(model.graph) for value in [*graph.value_info, *graph.output])
    return tensors and not _refused(data)


def _within(data: bytes) -> bool:
    return C.shapes_within(data, mir._ELEMENT_LIMITS)


@needs_c
def test_shapes_within_answers_as_the_inspection_on_every_onnx_node_test_and_light_model():
    from mobile_ep.testing import onnx_node_cases

    models = [onnx.ModelProto.FromString(case.model_bytes) for case in onnx_node_cases()]
    models += [mir.read_proto(path) for path in LIGHT_MODELS]
    within = 0
    for proto in models:
        data = mir._inferred_bytes(proto)
        assert _within(data) == _inspection_accepts(data), proto.graph.name
        within += _within(data)
    assert within > 1500  # (the others hold sequences, optionals or maps)


def _value_model(*values: onnx.ValueInfoProto, elem=TensorProto.FLOAT) -> onnx.ModelProto:
    model = make_model([helper.make_node("Identity", ["x"], ["y"])], [tensor("x", [2], elem)], [tensor("y", [2], elem)])
    model.graph.value_info.extend(values)
    return model


@needs_c
@pytest.mark.parametrize(("elem", "limit"), [(TensorProto.FLOAT, 2**29), (TensorProto.DOUBLE, 2**28),
                                             (TensorProto.UINT8, 2**31), (TensorProto.INT4, 2**31),
                                             (TensorProto.COMPLEX128, 2**27), (TensorProto.STRING, 2**31)])
def test_shapes_within_stops_where_the_inspection_refuses(elem, limit):
    """At the element type's limit a value passes, one element more it does not: both ways alike."""
    for dims, expected in (([limit], True), ([limit + 1], False), ([2, limit // 2], True), ([2, limit // 2 + 1], False),
                           (["N", limit], True), ([limit, -1], False)):
        data = _value_model(helper.make_tensor_value_info("v", elem, dims)).SerializeToString()
        assert _within(data) is expected and _inspection_accepts(data) is expected, (elem, dims)


@needs_c
def test_shapes_within_leaves_to_the_inspection_what_it_does_not_read():
    sequence = helper.make_value_info("s", helper.make_sequence_type_proto(helper.make_tensor_type_proto(1, [2])))
    unknown = helper.make_tensor_value_info("u", TensorProto.FLOAT, [2])
    unknown.type.tensor_type.elem_type = 999
    cases = {
        "a sequence": (_value_model(sequence), True),
        "an unknown element type": (_value_model(unknown), False),
        "a 0 dim beside an absurd one": (_value_model(helper.make_tensor_value_info("z", 1, [0, 2**40])), True),
    }
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["b"])], "branch", [],
                               [tensor("b", [2])], value_info=[helper.make_tensor_value_info("deep", 1, [2**20, 2**20])])
    cases["an absurd value in a subgraph"] = (make_model(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)],
        [tensor("x", [2]), tensor("c", [], TensorProto.BOOL)], [tensor("y", [2])]), False)
    for label, (proto, accepted) in cases.items():
        data = proto.SerializeToString()
        assert not _within(data), label
        assert _refused(data) is not accepted, label
    data = cases["an absurd value in a subgraph"][0].SerializeToString()
    with pytest.raises(mir.ModelError, match="value 'deep' would have"):
        mir.check_inferred_shapes(onnx.ModelProto.FromString(data))
    plain_branch = helper.make_graph([helper.make_node("Identity", ["x"], ["b"])], "branch", [], [tensor("b", [2])])
    data = make_model([helper.make_node("If", ["c"], ["y"], then_branch=plain_branch, else_branch=plain_branch)],
                      [tensor("x", [2]), tensor("c", [], TensorProto.BOOL)], [tensor("y", [2])]).SerializeToString()
    assert _within(data) and _inspection_accepts(data)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return bytes([number << 3 | 2]) + mir._varint(len(payload)) + payload


@needs_c
def test_shapes_within_counts_the_dims_of_a_type_written_twice():
    """A message field written twice is merged when parsed (the dims of both shapes): each shape alone is within,
    the two together are not, and shapes_within says so."""
    half = helper.make_tensor_value_info("v", TensorProto.FLOAT, [2**16])
    again = half.type.SerializeToString()
    value = half.SerializeToString() + _field(2, again)  # ValueInfoProto.type (2), twice
    assert list(onnx.ValueInfoProto.FromString(value).type.tensor_type.shape.dim) == \
        list(half.type.tensor_type.shape.dim) * 2
    model = _value_model()
    data = model.SerializeToString() + _field(7, _field(13, value))  # ModelProto.graph (7) .value_info (13)
    assert not _within(data) and not _inspection_accepts(data)
    assert _within(model.SerializeToString() + _field(7, _field(13, half.SerializeToString())))


def _mutated(data, model: onnx.ModelProto) -> bytes | None:
    """*model* serialized, then cut short, flipped or dropped at 1 to 4 places drawn from *data*; None when
    nothing is left or the result no longer parses."""
    raw = bytearray(model.SerializeToString())
    for _ in range(data.draw(st.integers(1, 4))):
        where = data.draw(st.integers(0, len(raw) - 1))
        action = data.draw(st.sampled_from(["flip", "cut", "drop"]))
        if action == "flip":
            raw[where] ^= 1 << data.draw(st.integers(0, 7))
        elif action == "cut":
            del raw[where:]
        else:
            del raw[where]
        if not raw:
            return None
    try:
        onnx.ModelProto.FromString(bytes(raw))
    except Exception:
        return None
    return bytes(raw)


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_shapes_within_never_passes_what_the_inspection_refuses(data):
    """Bytes cut short, flipped or dropped anywhere in a model with subgraphs and absurd-looking values: where the
    result still parses, shapes_within says True only of what the inspection accepts."""
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["b"])], "branch", [], [tensor("b", [2, 3])],
                               value_info=[helper.make_tensor_value_info("d", 1, [2**14, 2**14])])
    model = make_model([helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)],
                       [tensor("x", [2, 3]), tensor("c", [], TensorProto.BOOL)], [tensor("y", [2, 3])])
    model.graph.value_info.append(helper.make_tensor_value_info("v", TensorProto.INT4, [2**15, 2**15, 2]))
    raw = _mutated(data, model)
    if raw is not None and _within(raw):
        assert _inspection_accepts(raw)


# --------------------------------------------------------------------------------------------------
# value_types: the inferred types mobile_ep.ir._deserialize_plain reads, off the bytes
# --------------------------------------------------------------------------------------------------
def _read_type(info: onnx.ValueInfoProto) -> tuple | None:
    """What value_types gives for *info*, worked out from the parsed message; None where it leaves the value to
    Python (another type than a tensor type, a denotation, a doc string, metadata)."""
    if info.doc_string or len(info.metadata_props):
        return None
    kind = info.type.WhichOneof("value")
    if kind is None and not info.type.denotation:
        return (None, None)
    if kind != "tensor_type" or info.type.denotation:
        return None
    tensor_type = info.type.tensor_type
    dims = None
    if tensor_type.HasField("shape"):
        dims = []
        for dim in tensor_type.shape.dim:
            if dim.denotation:
                return None
            which = dim.WhichOneof("value")
            dims.append(dim.dim_value if which == "dim_value" else dim.dim_param if which == "dim_param" else None)
        dims = tuple(dims)
    return (tensor_type.elem_type if tensor_type.HasField("elem_type") else None, dims)


def _types_read(data: bytes) -> tuple | None:
    """value_types' answer for *data*, worked out from the parsed model (None: some value is left to Python)."""
    graph = onnx.ModelProto.FromString(data).graph
    infos = {info.name: _read_type(info) for info in graph.value_info}
    outputs = [(info.name, _read_type(info)) for info in graph.output]
    if any(v is None for v in infos.values()) or any(v is None for _, v in outputs):
        return None
    return infos, outputs


@pytest.fixture(scope="module")
def optimized_light(tmp_path_factory) -> list[onnx.ModelProto]:
    """The light models as ort_optimized writes them for check (weights to the null device), parsed."""
    return [onnx.load(str(mir.ort_optimized(path, tmp_path_factory.mktemp(path.stem), weights=False)),
                      load_external_data=False) for path in LIGHT_MODELS]


@needs_c
def test_value_types_reads_the_inferred_types_of_every_onnx_node_test_and_light_model(optimized_light):
    from mobile_ep.testing import onnx_node_cases

    models = [onnx.ModelProto.FromString(case.model_bytes) for case in onnx_node_cases()]
    models += [mir.read_proto(path) for path in LIGHT_MODELS]
    models += optimized_light
    read = 0
    for proto in models:
        data = mir._infer_bytes(proto)
        if data is None:  # (shape inference refuses a few node tests)
            continue
        expected = _types_read(data)
        assert C.value_types(data) == expected, proto.graph.name
        read += expected is not None
    assert read > 1500  # (the others hold sequences, optionals or maps)


@needs_c
def test_value_types_reads_each_kind_of_dim_and_type():
    def info(name, dims, elem=TensorProto.FLOAT):
        return helper.make_tensor_value_info(name, elem, dims)

    neither = info("neither", ["N", 3])
    neither.type.tensor_type.shape.dim[0].Clear()
    empty_param = info("empty_param", [2])
    empty_param.type.tensor_type.shape.dim[0].dim_param = ""
    no_elem = info("no_elem", [4])
    no_elem.type.tensor_type.ClearField("elem_type")
    values = [info("negative", [2, -3]), neither, empty_param, info("symbolic", ["N", 5], TensorProto.INT64),
              info("scalar", []), info("unshaped", None), onnx.ValueInfoProto(name="untyped"), no_elem,
              info("twice", [1]), info("twice", [8], TensorProto.UINT8)]
    data = _value_model(*values).SerializeToString()
    assert C.value_types(data) == _types_read(data) == ({
        "negative": (1, (2, -3)), "neither": (1, (None, 3)), "empty_param": (1, ("",)), "symbolic": (7, ("N", 5)),
        "scalar": (1, ()), "unshaped": (1, None), "untyped": (None, None), "no_elem": (None, (4,)),
        "twice": (2, (8,)),  # (the later of two value infos of one name, as a dict of them keeps it)
    }, [("y", (1, (2,)))])


@needs_c
def test_value_types_leaves_to_python_what_it_does_not_read():
    def value(**changes) -> onnx.ValueInfoProto:  # (each change applied in turn)
        v = helper.make_tensor_value_info("v", TensorProto.FLOAT, [2, "N"])
        for change in changes.values():
            change(v)
        return v

    half = value()
    cases = {
        "a sequence type": helper.make_value_info("v", helper.make_sequence_type_proto(
            helper.make_tensor_type_proto(1, [2]))),
        "a type denotation": value(d=lambda v: setattr(v.type, "denotation", "IMAGE")),
        "a dim denotation": value(d=lambda v: setattr(v.type.tensor_type.shape.dim[0], "denotation", "BATCH")),
        "a denotation on a named dim": value(d=lambda v: setattr(v.type.tensor_type.shape.dim[1], "denotation", "X")),
        "a denotation on an unknown dim": value(c=lambda v: v.type.tensor_type.shape.dim[1].Clear(),
                                                d=lambda v: setattr(v.type.tensor_type.shape.dim[1], "denotation", "X")),
        "a doc string": value(d=lambda v: setattr(v, "doc_string", "why")),
        "metadata": value(d=lambda v: v.metadata_props.add(key="k", value="x")),
    }
    for label, v in cases.items():
        data = _value_model(v).SerializeToString()
        assert C.value_types(data) is None and _types_read(data) is None, label

    def with_value(raw: bytes) -> bytes:  # the model with one more value info, written as *raw*
        model = _value_model()
        graph = model.graph.SerializeToString() + _field(13, raw)
        model.ClearField("graph")
        return model.SerializeToString() + _field(7, graph)

    plain = with_value(half.SerializeToString())
    assert C.value_types(plain) == _types_read(plain) is not None
    wire = {  # fields a parse merges, or of which it keeps the last; bytes that are not UTF-8
        "a type twice": with_value(half.SerializeToString() + _field(2, half.type.SerializeToString())),
        "a name twice": with_value(half.SerializeToString() + _field(1, b"w")),
        "a dim both numbered and named": with_value(_field(1, b"v") + _field(2, _field(1, _field(
            2, _field(1, b"\x08\x02" + _field(2, b"N")))))),
        "a name not UTF-8": with_value(_field(1, b"\xff")),
        "the graph twice": plain + _field(7, b""),
    }
    for label, data in wire.items():
        assert C.value_types(data) is None, label
    for cut in range(1, len(plain)):  # cut short: not read, unless cut between two fields of the model
        read = C.value_types(plain[:cut])
        assert read is None or read == _types_read(plain[:cut]), cut


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_value_types_reads_mutated_bytes_as_a_parse_does(data):
    """Bytes cut short, flipped or dropped anywhere: where they still parse and value_types reads them, it gives the
    types of the parsed model."""
    model = _value_model(helper.make_tensor_value_info("v", TensorProto.INT4, [2, "N", 3]),
                         helper.make_tensor_value_info("w", TensorProto.INT64, []))
    raw = _mutated(data, model)
    if raw is not None:
        read = C.value_types(raw)
        assert read is None or read == _types_read(raw)


def test_the_plain_deserializer_reads_the_inferred_bytes_as_the_parsed_model(optimized_light):
    """_deserialize_plain given the inferred model serialized (types off the bytes, shapes shared) builds what it
    builds from the parsed model; with or without the extension."""
    from test_plain_deserialize import assert_same

    assert len(optimized_light) == len(LIGHT_MODELS) > 0
    for proto in optimized_light:
        data = mir._infer_bytes(proto)
        expected = mir._deserialize_plain(proto, onnx.ModelProto.FromString(data))
        model = mir._deserialize_plain(proto, data)
        assert_same(model, expected)
        shapes = [v.shape for n in model.graph for v in n.outputs if v.shape is not None]
        assert all(shape.frozen for shape in shapes)
        if C is not None:  # values of the same dims share one shape
            assert len({id(s) for s in shapes}) == len({tuple(s) for s in shapes}) < len(shapes)


def _wire_model() -> onnx.ModelProto:
    """A model with what the optimized-model readers look at: inputs (one with a doc string), nodes with every
    plain attribute type, a tensor attribute and metadata, initializers raw, typed and at optimized.onnx.data."""
    x = tensor("x", [1, 3, "N"])
    documented = tensor("d", [2])
    documented.doc_string = "doc"
    conv = helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1], pads=[0, 0], strides=[1])
    mixed = helper.make_node("Custom", ["c", ""], ["m"], name="m", domain="d", alpha=0.5, mode="same",
                             names=["a", "b"], scales=[1.5, 2.0])
    with_tensor = helper.make_node("Constant", [], ["k"], name="k", value=helper.make_tensor("v", 1, [1], [1.0]))
    with_metadata = helper.make_node("Relu", ["m"], ["y"], name="r")
    with_metadata.metadata_props.add(key="k", value="v")
    external = helper.make_tensor("e", TensorProto.FLOAT, [4], np.ones(4, np.float32).tobytes(), raw=True)
    external.ClearField("raw_data")
    external.data_location = TensorProto.EXTERNAL
    for key, value in (("location", mir.OPTIMIZED_DATA), ("offset", "0"), ("length", "16")):
        external.external_data.add(key=key, value=value)
    inits = [helper.make_tensor("w", TensorProto.FLOAT, [3, 3, 1], np.ones(9, np.float32).tobytes(), raw=True),
             helper.make_tensor("t", TensorProto.INT64, [2], [1, 2]), external]
    return make_model([conv, mixed, with_tensor, with_metadata], [x, documented], [tensor("y", [1, 3, "N"])], inits)


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_optimized_model_readers_read_mutated_bytes_as_a_parse_does(data):
    """Bytes cut short, flipped or dropped anywhere: where they still parse, input_types, node_fields,
    inference_input, needs_skeleton and plain_initializers answer None or what the Python reading of the parsed
    model gives (the IR built with and without them is the same, the inference input is the same message, no
    copy is skipped that the skeleton would make, and initializers taken as plain pass the inspection)."""
    from test_plain_deserialize import assert_same

    raw = _mutated(data, _wire_model())
    if raw is None:
        return
    proto = onnx.ModelProto.FromString(raw)
    for read in (C.input_types(raw), C.node_fields(raw)):
        assert read is None or isinstance(read, list)
    try:
        expected = mir._deserialize_plain(proto)
    except Exception as exc:  # (onnx_ir refuses some mutated graphs: so must the quick reading)
        with pytest.raises(type(exc)):
            mir._deserialize_plain(proto, serialized=raw)
    else:
        model = mir._deserialize_plain(proto, serialized=raw)
        assert (model is None) == (expected is None)
        try:  # (what onnx_ir cannot write back, a name that is not UTF-8 say, is compared by nothing here)
            comparable = expected is not None and ir.serde.serialize_model(expected) is not None
        except Exception:
            comparable = False
        if comparable:
            assert_same(model, expected)
    written = C.inference_input(raw, mir._ELEMENT_BITS, mir._INFERENCE_DATA_MAX_BYTES)
    try:
        copied = mir._inference_input(proto)
    except Exception:  # (a name that is not UTF-8: the Python copy refuses it, and so must the C writer)
        assert written is None
        written = None
    if written is not None:  # (a field of the wrong wire type is an unknown field: the copy in Python keeps it)
        made = onnx.ModelProto.FromString(written)
        made.DiscardUnknownFields()
        copied.DiscardUnknownFields()
        assert made == copied
    if C.needs_skeleton(raw, mir._ELEMENT_BITS, mir._SKELETON_DATA_MAX_BYTES) is False:  # (True: Python decides)
        assert mir._skeleton(proto) is proto
    if C.plain_initializers(raw, mir._ELEMENT_BITS, mir.OPTIMIZED_DATA):
        inspector = mir._Inspector(proto, None, mir.OPTIMIZED_DATA)
        for initializer in proto.graph.initializer:
            inspector.tensor(initializer, initializer.name)
