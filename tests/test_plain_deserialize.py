"""The quick paths of ``mobile_ep.ir.load``: the plain-graph deserializer (``_deserialize_plain``), which
must build exactly what ``onnx_ir.serde.deserialize_model`` builds; skipping onnx_ir's NameFixPass when it
would change nothing; and the lighter inspection of the optimized model onnxruntime just wrote."""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_ir.passes.common import NameFixPass

from mepkit import const, make_model, tensor
from mobile_ep import ir as mir
from mobile_ep.errors import ModelError
from mobile_ep.testing import onnx_node_cases

LIGHT = sorted((pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data" / "light").glob("*.onnx"))


def _values(model: ir.Model) -> list[ir.Value]:
    graph = model.graph
    return [*graph.inputs, *graph.initializers.values(), *(v for n in graph for v in n.outputs), *graph.outputs]


def assert_same(plain: ir.Model, reference: ir.Model) -> None:
    """The two models serialize to the same bytes, and what serializing does not show matches too."""
    assert (ir.serde.serialize_model(plain).SerializeToString(deterministic=True)
            == ir.serde.serialize_model(reference).SerializeToString(deterministic=True))
    for a, b in zip(_values(plain), _values(reference), strict=True):
        assert (a.name, a.type, type(a.const_value)) == (b.name, b.type, type(b.const_value))
        assert (a.shape is None) == (b.shape is None)
        if a.shape is not None:
            assert (list(a.shape), a.shape.frozen) == (list(b.shape), b.shape.frozen)
            assert [a.shape.get_denotation(i) for i in range(len(a.shape))] == \
                [b.shape.get_denotation(i) for i in range(len(b.shape))]
        assert (a.doc_string, dict(a.metadata_props)) == (b.doc_string, dict(b.metadata_props))
    for m, n in zip(plain.graph, reference.graph, strict=True):
        assert [(k, type(v.value), v.type, v.doc_string) for k, v in m.attributes.items()] == \
            [(k, type(v.value), v.type, v.doc_string) for k, v in n.attributes.items()]


def test_the_same_model_as_onnx_ir_on_every_onnx_node_test():
    plain = 0
    for case in onnx_node_cases():
        proto = onnx.ModelProto.FromString(case.model_bytes)
        reference = ir.serde.deserialize_model(proto)
        model = mir._deserialize_plain(proto)
        if model is not None:
            plain += 1
            assert_same(model, reference)
            assert_same(mir._deserialize_plain(proto, serialized=case.model_bytes), reference)  # inputs off the bytes
    assert plain > 1500  # (the others have subgraphs, functions, or sequence and optional types)


@pytest.mark.parametrize("path", LIGHT, ids=[p.stem for p in LIGHT])
def test_the_same_model_as_onnx_ir_on_the_light_models_as_shipped_and_optimized(path, tmp_path):
    optimized = onnx.load(str(mir.ort_optimized(path, tmp_path, weights=False)), load_external_data=False)
    for proto in (onnx.load(str(path)), optimized):
        inferred = onnx.load_from_string(mir._infer_bytes(proto))
        model = mir._deserialize_plain(proto, inferred)  # with the inferred shapes, as from_proto reads it
        assert model is not None and any(v.shape for n in model.graph for v in n.outputs)
        with mir._annotated(proto, inferred):  # onnx_ir, with the inferred shapes copied in
            assert_same(model, ir.serde.deserialize_model(proto))
            assert_same(mir._deserialize_plain(proto), ir.serde.deserialize_model(proto))
            for types in (inferred, inferred.SerializeToString()):  # inputs read off the bytes, as load reads them
                assert_same(mir._deserialize_plain(proto, types, serialized=proto.SerializeToString()),
                            ir.serde.deserialize_model(proto))


def _plain_model_with(nodes, inputs=None, outputs=None, initializers=(), **kwargs) -> onnx.ModelProto:
    return make_model(nodes, inputs or [tensor("x", [2])], outputs or [tensor("y", [2])], list(initializers), **kwargs)


def _if_model() -> onnx.ModelProto:
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["b"])], "branch", [], [tensor("b", [2])])
    return _plain_model_with([helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)],
                             inputs=[tensor("x", [2]), tensor("c", [], TensorProto.BOOL)])


def _function_model() -> onnx.ModelProto:
    proto = _plain_model_with([helper.make_node("Twice", ["x"], ["y"], domain="local")],
                              opset=17, extra_opsets=[("local", 1)])
    proto.functions.append(helper.make_function("local", "Twice", ["a"], ["b"],
                                                [helper.make_node("Add", ["a", "a"], ["b"])],
                                                [helper.make_opsetid("", 17)]))
    return proto


def _non_utf8_attribute() -> onnx.ModelProto:
    proto = _plain_model_with([helper.make_node("Relu", ["x"], ["y"], name="r")])
    attribute = proto.graph.node[0].attribute.add()
    attribute.name, attribute.type, attribute.s = "note", onnx.AttributeProto.STRING, b"\xff\xfe"
    return proto


def _sparse_initializer() -> onnx.ModelProto:
    proto = _plain_model_with([helper.make_node("Add", ["x", "s"], ["y"])])
    values = numpy_helper.from_array(np.array([1.0], np.float32), "s")
    indices = numpy_helper.from_array(np.array([0], np.int64), "s_i")
    proto.graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, [2]))
    return proto


def _with_sequence_output() -> onnx.ModelProto:
    proto = _plain_model_with([helper.make_node("SequenceConstruct", ["x"], ["y"])])
    proto.graph.output[0].CopyFrom(helper.make_tensor_sequence_value_info("y", TensorProto.FLOAT, [2]))
    return proto


LEFT_TO_ONNX_IR = {
    "a subgraph": _if_model,
    "a function": _function_model,
    "an undefined input": lambda: _plain_model_with([helper.make_node("Add", ["x", "nowhere"], ["y"])]),
    "an output nothing produces": lambda: _plain_model_with([helper.make_node("Relu", ["x"], ["z"])]),
    "a name defined twice": lambda: _plain_model_with([helper.make_node("Relu", ["x"], ["y"]),
                                                       helper.make_node("Relu", ["x"], ["y"])]),
    "a string attribute that is not UTF-8": _non_utf8_attribute,
    "a sparse initializer": _sparse_initializer,
    "a sequence-typed value": _with_sequence_output,
}


@pytest.mark.parametrize("make", LEFT_TO_ONNX_IR.values(), ids=LEFT_TO_ONNX_IR.keys())
def test_anything_but_a_plain_graph_is_left_to_onnx_ir(make):
    proto = make()
    assert mir._deserialize_plain(proto) is None
    try:
        reference = ir.serde.deserialize_model(proto)
    except Exception as exc:  # onnx_ir refuses it: from_proto says so in onnx_ir's words
        with pytest.raises(ModelError, match=type(exc).__name__):
            mir.from_proto(proto, shapes=False)
    else:
        NameFixPass()(reference)
        assert (ir.serde.serialize_model(mir.from_proto(proto, shapes=False)).SerializeToString(deterministic=True)
                == ir.serde.serialize_model(reference).SerializeToString(deterministic=True))


@pytest.mark.parametrize("nodes", [
    [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],  # unnamed
    [helper.make_node("Relu", ["x"], ["h"], name="n"), helper.make_node("Relu", ["h"], ["y"], name="n")],  # twice
    [helper.make_node("Dropout", ["x"], ["y", ""], name="d")],  # an optional output left unnamed ...
], ids=["unnamed nodes", "one name twice", "an unnamed output"])
def test_names_are_fixed_exactly_when_namefixpass_would_change_something(nodes):
    proto = _plain_model_with(nodes)
    assert not mir._named(proto.graph)
    reference = ir.serde.deserialize_model(proto)
    NameFixPass()(reference)
    model = mir.from_proto(proto, shapes=False)
    assert [n.name for n in model.graph] == [n.name for n in reference.graph]
    assert all(n.name for n in model.graph)


def test_a_model_named_throughout_is_left_as_it_is(monkeypatch):
    proto = _plain_model_with([helper.make_node("Relu", ["x"], ["h"], name="a"),
                               helper.make_node("Relu", ["h"], ["y"], name="b")])
    assert mir._named(proto.graph)
    calls = []
    monkeypatch.setattr(mir.NameFixPass, "call", lambda self, model: calls.append(model))
    model = mir.from_proto(proto, shapes=False)
    assert calls == [] and [n.name for n in model.graph] == ["a", "b"]


# -- the optimized model onnxruntime wrote ------------------------------------------------------------
def _counting_inspections(monkeypatch) -> list[str]:
    seen: list[str] = []
    original = mir._Inspector.graph

    def graph(self, graph, *args, **kwargs):
        seen.append(graph.name)
        return original(self, graph, *args, **kwargs)

    monkeypatch.setattr(mir._Inspector, "graph", graph)
    return seen


def test_the_optimized_model_is_read_without_inspecting_its_graph_again(tmp_path, monkeypatch):
    optimized = mir.ort_optimized(LIGHT[0], tmp_path, weights=False)
    inspected = _counting_inspections(monkeypatch)
    quick = mir.load(optimized, check=False)
    assert inspected == []
    assert quick.graph.initializers  # (lazy weights, as before)
    proto = mir.read_proto(optimized, unwritten=mir.OPTIMIZED_DATA)  # what the full inspection accepts ...
    assert inspected  # ... (it did run here) is what was read
    assert mir._session_output(optimized)[0] == proto


def test_an_optimized_model_with_subgraphs_gets_the_full_inspection(tmp_path, monkeypatch):
    path = tmp_path / "if.onnx"
    path.write_bytes(_if_model().SerializeToString())
    optimized = mir.ort_optimized(path, tmp_path, weights=False)
    assert mir._session_output(optimized) is None
    inspected = _counting_inspections(monkeypatch)
    mir.load(optimized, check=False)
    assert inspected


def _written(tmp_path: pathlib.Path, proto: onnx.ModelProto) -> pathlib.Path:
    path = tmp_path / "optimized.onnx"
    path.write_bytes(proto.SerializeToString())
    return path


def test_external_data_anywhere_else_gets_the_full_inspection(tmp_path):
    proto = _plain_model_with([helper.make_node("Add", ["x", "w"], ["y"], name="a")],
                              initializers=[const("w", np.ones(2, np.float32))])
    onnx.external_data_helper.set_external_data(proto.graph.initializer[0], "../elsewhere.bin")
    proto.graph.initializer[0].ClearField("raw_data")
    path = _written(tmp_path, proto)
    assert mir._session_output(path) is None
    with pytest.raises(ModelError, match="contains '..'"):
        mir.read_proto(path, unwritten=mir.OPTIMIZED_DATA)


def test_its_initializers_are_still_inspected(tmp_path):
    proto = _plain_model_with([helper.make_node("Add", ["x", "w"], ["y"], name="a")],
                              initializers=[const("w", np.ones(2, np.float32))])
    proto.graph.initializer[0].raw_data = b"\0" * 5  # 5 bytes for two float32
    with pytest.raises(ModelError, match="holds 5 bytes but its shape"):
        mir._session_output(_written(tmp_path, proto))
    wrong_length = _plain_model_with([helper.make_node("Relu", ["x"], ["y"], name="r")])
    wrong_length.graph.initializer.append(TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2],
                                                      data_location=TensorProto.EXTERNAL))
    for key, value in (("location", mir.OPTIMIZED_DATA), ("length", "7")):
        entry = wrong_length.graph.initializer[0].external_data.add()
        entry.key, entry.value = key, value
    with pytest.raises(ModelError, match="length 7 does not match"):
        mir._session_output(_written(tmp_path, wrong_length))


def test_denotations_doc_strings_and_metadata_come_through():
    """What the ONNX node tests do not carry: every optional field a plain graph can hold, set."""
    x = tensor("x", ["N", 2])
    x.type.denotation = "TENSOR"
    x.type.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
    x.doc_string = "the input"
    x.metadata_props.add(key="origin", value="test")
    untyped = onnx.ValueInfoProto(name="h")  # a value info without a type
    node = helper.make_node("LeakyRelu", ["x"], ["h"], name="l", doc_string="a node", alpha=0.5)
    node.attribute[0].doc_string = "slope"
    node.metadata_props.add(key="k", value="v")
    proto = _plain_model_with([node, helper.make_node("Relu", ["h"], ["y"], name="r")], inputs=[x],
                              outputs=[tensor("y", ["N", 2])])
    proto.graph.value_info.append(untyped)
    proto.graph.doc_string, proto.doc_string = "the graph", "the model"
    proto.producer_name, proto.producer_version, proto.domain, proto.model_version = "t", "1", "d", 3
    proto.metadata_props.add(key="m", value="n")
    model = mir._deserialize_plain(proto)
    assert model is not None
    assert_same(model, ir.serde.deserialize_model(proto))
    assert model.graph.inputs[0].shape.get_denotation(0) == "DATA_BATCH"
    # the graph's inputs read off the bytes: one with a denotation is left to Python, a plain one is not
    proto.graph.input.append(tensor("z", ["M", 3]))
    proto.graph.input.append(tensor("z2", [4, None], TensorProto.INT64))
    types = mir._accel.speedups.input_types(proto.SerializeToString())
    assert types == [None, ("z", (TensorProto.FLOAT, ("M", 3))), ("z2", (TensorProto.INT64, (4, None)))]
    assert_same(mir._deserialize_plain(proto, serialized=proto.SerializeToString()), ir.serde.deserialize_model(proto))


def test_input_types_reads_what_it_can_and_refuses_malformed_bytes():
    speedups = mir._accel.speedups
    if speedups is None:
        pytest.skip("the C extension is not built")
    proto = _plain_model_with([helper.make_node("Relu", ["x"], ["y"], name="r")],
                              inputs=[tensor("x", [2, "N"]), onnx.ValueInfoProto(name="u"),
                                      helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)])
    data = proto.SerializeToString()
    assert speedups.input_types(data) == [("x", (TensorProto.FLOAT, (2, "N"))), ("u", (None, None)), None]
    assert speedups.input_types(data[:-3]) is None  # truncated
    assert speedups.input_types(b"") == []


@pytest.mark.parametrize("path", [LIGHT[0], LIGHT[-1]], ids=[LIGHT[0].stem, LIGHT[-1].stem])
def test_the_unwritten_weights_are_made_lazy_as_the_graph_is_built(path, tmp_path, monkeypatch):
    """Built the quick way, an optimized model gets the very lazy tensors UnwrittenWeights.attach would put in
    afterwards (same name, type, shape, doc string, metadata, and the same read behind them); attach then finds
    nothing left to do.  A tensor whose data is anywhere but the null-device file is not made lazy."""
    out = mir.ort_optimized(path, tmp_path, weights=False)
    unwritten = mir._UNWRITTEN.get(out)
    proto = mir._session_output(out)[0]
    assert unwritten is not None and proto is not None
    inferred = onnx.load_from_string(mir._infer_bytes(proto))
    quick = mir._deserialize_plain(proto, inferred, unwritten)
    after = mir._deserialize_plain(proto, inferred)
    unwritten.attach(after, graphs=[after.graph])
    lazy = [name for name, value in quick.graph.initializers.items() if isinstance(value.const_value, ir.LazyTensor)]
    assert lazy and lazy == [name for name, value in after.graph.initializers.items()
                             if isinstance(value.const_value, ir.LazyTensor)]
    for name in lazy:
        a, b = quick.graph.initializers[name].const_value, after.graph.initializers[name].const_value
        assert (a.name, a.dtype, a.shape, a.doc_string, dict(a.metadata_props), a.cache) == \
            (b.name, b.dtype, b.shape, b.doc_string, dict(b.metadata_props), b.cache)
        assert (a._func.func, a._func.args) == (b._func.func, b._func.args)  # (onnx_ir keeps no public name for it)
    called = []
    monkeypatch.setattr(ir, "LazyTensor", lambda *args, **kwargs: called.append(args))
    unwritten.attach(quick, graphs=[quick.graph])
    assert called == []  # nothing external is left in place of a weight
    monkeypatch.undo()
    first = proto.graph.initializer[[t.name for t in proto.graph.initializer].index(lazy[0])]
    elsewhere = onnx.TensorProto()
    elsewhere.CopyFrom(first)
    for entry in elsewhere.external_data:
        if entry.key == "location":
            entry.value = "other.bin"
    assert unwritten.lazy_tensor(first) is not None and unwritten.lazy_tensor(elsewhere) is None


def _inference_input_cases() -> dict[str, onnx.ModelProto]:
    """Models whose initializers cover what _inference_input decides on: size, type, location, listing."""
    relu = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    strings = helper.make_tensor("s", TensorProto.STRING, [2], [b"ab", b"c" * 2000])
    short = helper.make_tensor("t", TensorProto.STRING, [1], [b"abc"])
    int4 = helper.make_tensor("q", TensorProto.INT4, [3], [1, 2, 3])
    external = const("e", np.ones(4, np.float32))
    onnx.external_data_helper.set_external_data(external, "w.bin")
    external.ClearField("raw_data")
    odd = TensorProto(name="o", data_type=9999, dims=[2])  # an element type number onnx does not know
    unpacked = const("u", np.ones((2, 3), np.float32))
    listed = const("x2", np.ones(2, np.float32))
    cases = {
        "sizes": _plain_model_with(relu, initializers=[const("small", np.ones(250, np.float32)),
                                                        const("big", np.ones(251, np.float32)),
                                                        const("scalar", np.float32(1))]),
        "strings, sub-byte, external, unknown": _plain_model_with(relu, initializers=[strings, short, int4, external,
                                                                                        odd]),
        "listed as input, twice": _plain_model_with(relu, inputs=[tensor("x", [2]), tensor("x2", [2])],
                                                    initializers=[listed, const("d", [1.0]), const("d", [2.0])]),
        "IR 3 with functions and value infos": _plain_model_with(relu, initializers=[unpacked], ir_version=3),
    }
    cases["IR 3 with functions and value infos"].graph.value_info.append(tensor("y", [2]))
    cases["IR 3 with functions and value infos"].functions.append(helper.make_function(
        "local", "f", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])], [helper.make_opsetid("", 13)]))
    cases["IR 3 with functions and value infos"].graph.doc_string = "dropped"
    return cases


@pytest.mark.parametrize("name", list(_inference_input_cases()))
def test_the_inference_input_written_in_c_is_the_one_built_in_python(name):
    speedups = mir._accel.speedups
    if speedups is None:
        pytest.skip("the C extension is not built")
    proto = _inference_input_cases()[name]
    data = proto.SerializeToString()
    written = speedups.inference_input(data, mir._ELEMENT_BITS, mir._INFERENCE_DATA_MAX_BYTES)
    assert written is not None
    assert onnx.ModelProto.FromString(written) == mir._inference_input(proto)
    assert mir._infer_bytes(proto, data) == mir._infer_bytes(proto)  # (the same shapes inferred, either way)


def test_the_inference_input_leaves_to_python_what_it_does_not_write():
    speedups = mir._accel.speedups
    if speedups is None:
        pytest.skip("the C extension is not built")
    relu = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    negative = TensorProto(name="n", data_type=TensorProto.FLOAT, dims=[-1])
    unnamed = const("", np.ones(2, np.float32))
    sparse = _plain_model_with(relu)
    sparse.graph.sparse_initializer.add().values.CopyFrom(const("v", np.ones(1, np.float32)))
    training = _plain_model_with(relu)
    training.training_info.add()
    for proto in (_plain_model_with(relu, initializers=[negative]), _plain_model_with(relu, initializers=[unnamed]),
                  sparse, training):
        assert speedups.inference_input(proto.SerializeToString(), mir._ELEMENT_BITS, 1000) is None
    data = _plain_model_with(relu, initializers=[const("w", np.ones(2, np.float32))]).SerializeToString()
    assert speedups.inference_input(data[:-2], mir._ELEMENT_BITS, 1000) is None  # truncated
    assert speedups.inference_input(data + data, mir._ELEMENT_BITS, 1000) is None  # the graph twice (merged)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append(value & 0x7F | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def test_the_inference_input_reads_packed_dims():
    """onnx.proto is proto2: writers put each dim in a field of its own, but a parser takes them packed too."""
    speedups = mir._accel.speedups
    if speedups is None:
        pytest.skip("the C extension is not built")
    model = _plain_model_with([helper.make_node("Add", ["x", "w"], ["y"], name="a")],
                              inputs=[tensor("x", [2, 3])], outputs=[tensor("y", [2, 3])])
    dims = _varint(2) + _varint(3)
    weight = (b"\x0a" + _varint(len(dims)) + dims + b"\x10\x01" + b"\x42\x01w"
              + b"\x4a" + _varint(24) + np.ones(6, np.float32).tobytes())
    graph = model.graph.SerializeToString() + b"\x2a" + _varint(len(weight)) + weight
    model.ClearField("graph")
    data = model.SerializeToString() + b"\x3a" + _varint(len(graph)) + graph
    proto = onnx.ModelProto.FromString(data)
    assert list(proto.graph.initializer[0].dims) == [2, 3]
    written = speedups.inference_input(data, mir._ELEMENT_BITS, mir._INFERENCE_DATA_MAX_BYTES)
    assert onnx.ModelProto.FromString(written) == mir._inference_input(proto)


def test_node_fields_reads_plain_nodes_and_leaves_the_others_to_python():
    speedups = mir._accel.speedups
    if speedups is None:
        pytest.skip("the C extension is not built")
    documented = helper.make_node("LeakyRelu", ["x"], ["h"], name="l", doc_string="a node", alpha=0.5)
    documented.attribute[0].doc_string = "slope"
    lists = helper.make_node("Custom", ["h", ""], ["y", ""], name="c", domain="d", ints=[-1, 2**40], floats=[0.1],
                             strings=["a", "é"], s="text")
    lists.overload = "v2"
    with_metadata = helper.make_node("Relu", ["y"], ["z"], name="m")
    with_metadata.metadata_props.add(key="k", value="v")
    with_tensor = helper.make_node("Constant", [], ["t"], name="k", value=const("v", np.ones(1, np.float32)))
    reference = helper.make_node("Relu", ["z"], ["r"], name="ref")
    reference.attribute.add(name="alpha", type=onnx.AttributeProto.FLOAT, ref_attr_name="outer")
    not_utf8 = helper.make_node("Custom", ["z"], ["u"], name="u", domain="d", s=b"\xff")
    proto = _plain_model_with([documented, lists, with_metadata, with_tensor, reference, not_utf8],
                              outputs=[tensor("z", [2])])
    read = speedups.node_fields(proto.SerializeToString())
    assert read[0] == (["x"], ["h"], "l", "LeakyRelu", "", "", "a node", [("alpha", 1, 0.5, "slope")])
    assert read[1] == (["h", ""], ["y", ""], "c", "Custom", "d", "v2", None,
                       [("floats", 6, (np.float32(0.1).item(),), None), ("ints", 7, (-1, 2**40), None),
                        ("s", 3, "text", None), ("strings", 8, ("a", "é"), None)])
    assert read[2:] == [None, None, None, None]
    plain = _plain_model_with([documented, lists], outputs=[tensor("y", [2])])
    assert_same(mir._deserialize_plain(plain, serialized=plain.SerializeToString()), ir.serde.deserialize_model(plain))
    assert speedups.node_fields(plain.SerializeToString()[:-4]) is None  # truncated


def _external(tensor: TensorProto, **entries: str) -> TensorProto:
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in entries.items():
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def _initializer_cases() -> dict[str, tuple[TensorProto, bool]]:
    """Initializers, and whether plain_initializers should take them as plain (the others go to Python)."""
    w = lambda: const("w", np.ones((2, 3), np.float32))  # noqa: E731
    at = mir.OPTIMIZED_DATA
    duplicated = _external(w(), location=at)
    duplicated.external_data.add(key="location", value=at)
    no_flag = w()
    no_flag.ClearField("raw_data")
    no_flag.external_data.add(key="location", value=at)
    typed = helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
    both = const("w", np.ones(2, np.float32))
    both.float_data.extend([1.0, 2.0])
    return {
        "raw": (w(), True),
        "raw of the wrong size": (TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2], raw_data=b"\0" * 5),
                                  False),
        "external": (_external(w(), location=at, offset="0", length="24"), True),
        "external, no length": (_external(w(), location=at), True),
        "external of the wrong length": (_external(w(), location=at, length="7"), False),
        "external elsewhere": (_external(w(), location="other.bin"), False),
        "external, a key twice": (duplicated, False),
        "external, no location": (_external(w(), offset="0"), False),
        "external, offset not a number": (_external(w(), location=at, offset="-1"), False),
        "external entries, not marked external": (no_flag, False),
        "typed data": (typed, False),
        "typed and raw data": (both, False),
        "strings": (helper.make_tensor("w", TensorProto.STRING, [1], [b"a"]), False),
        "a negative dim": (TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[-1]), False),
        "an unknown type": (TensorProto(name="w", data_type=9999, dims=[1], raw_data=b"\0"), False),
        "no elements, no data": (TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[0, 3]), True),
        "elements, no data": (TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2]), False),
    }


@pytest.mark.parametrize("name", list(_initializer_cases()))
def test_plain_initializers_takes_only_what_the_inspection_accepts(name):
    speedups = mir._accel.speedups
    if speedups is None:
        pytest.skip("the C extension is not built")
    initializer, plain = _initializer_cases()[name]
    proto = _plain_model_with([helper.make_node("Relu", ["x"], ["y"], name="r")], initializers=[initializer])
    assert speedups.plain_initializers(proto.SerializeToString(), mir._ELEMENT_BITS, mir.OPTIMIZED_DATA) is plain
    if plain:  # what it takes, the inspection accepts
        mir._Inspector(proto, None, mir.OPTIMIZED_DATA).tensor(initializer, "initializer 'w'")


@pytest.mark.parametrize("path", LIGHT, ids=[p.stem for p in LIGHT])
def test_onnxruntimes_output_is_checked_off_the_bytes(path, tmp_path, monkeypatch):
    """Every initializer onnxruntime writes for the light models is in a plain form: none is inspected one by one
    (and the inspection would accept each); the nodes read in C spare the attribute scan."""
    out = mir.ort_optimized(path, tmp_path, weights=False)
    data = out.read_bytes()
    assert mir._accel.speedups.plain_initializers(data, mir._ELEMENT_BITS, mir.OPTIMIZED_DATA) is True
    proto = onnx.ModelProto.FromString(data)
    inspector = mir._Inspector(proto, None, mir.OPTIMIZED_DATA)
    for initializer in proto.graph.initializer:
        inspector.tensor(initializer, initializer.name)
    inspected = []
    monkeypatch.setattr(mir._Inspector, "tensor", lambda self, tensor, where: inspected.append(where))
    proto_read, data_read, node_fields = mir._session_output(out)
    assert inspected == [] and data_read == data and node_fields == mir._accel.speedups.node_fields(data)


def test_plain_attributes_are_built_with_their_slots_set_only_where_that_is_what_the_constructor_builds(monkeypatch):
    assert mir._make_plain_attr.__name__ == "make"  # the installed onnx_ir's Attr is set directly, not constructed
    made = mir._make_plain_attr("k", ir.AttributeType.INTS, (1, 2), "doc")
    built = ir.Attr("k", ir.AttributeType.INTS, (1, 2), doc_string="doc")
    assert (made.name, made.type, made.value, made.doc_string, made.ref_attr_name, made.meta) == \
        (built.name, built.type, built.value, built.doc_string, built.ref_attr_name, built.meta)

    class Changed(ir.Attr):  # an onnx_ir whose Attr keeps another field: the constructor is used
        __slots__ = ("_extra",)

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._extra = 1

    monkeypatch.setattr(ir, "Attr", Changed)
    assert mir._plain_attr_maker()("k", ir.AttributeType.INT, 1, None)._extra == 1

    class Converting(ir.Attr):  # one whose constructor stores another value than it is given
        __slots__ = ()

        def __init__(self, name, type, value, ref_attr_name=None, *, doc_string=None):
            super().__init__(name, type, value, ref_attr_name, doc_string=doc_string)
            self._value = ("converted", value)

    monkeypatch.setattr(ir, "Attr", Converting)
    assert mir._plain_attr_maker()("k", ir.AttributeType.INT, 1, None).value == ("converted", 1)
