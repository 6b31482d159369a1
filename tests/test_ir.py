"""Loading and saving: external data, subgraphs, IR versions, atomic writes, shape information."""

from __future__ import annotations

import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from mepkit import const, make_model, tensor
from mobile_ep import model_io as mir
from mobile_ep.errors import ModelError
from mobile_ep.model_io import guard, saving
from mobile_ep.passes.load import load_for_analysis


def model_with_external_weights(tmp_path):
    w = np.arange(4096, dtype=np.float32).reshape(64, 64) / 4096
    proto = make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                       [tensor("x", [1, 64])], [tensor("y", [1, 64])], [const("w", w)])
    onnx.save(proto, tmp_path / "m.onnx", save_as_external_data=True, location="m.weights", size_threshold=0)
    return tmp_path / "m.onnx", w


def test_external_weights_stay_external_until_saved(tmp_path):
    path, w = model_with_external_weights(tmp_path)
    model = mir.load(path)
    value = list(model.graph)[0].inputs[1]
    assert value.const_value.__class__.__name__ == "ExternalTensor"  # memory-mapped, not copied
    np.testing.assert_array_equal(value.const_value.numpy(), w)
    out = mir.save(model, tmp_path / "out" / "copy.onnx")
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    x = np.ones((1, 64), np.float32)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], x @ w, rtol=1e-5)


def test_saved_models_get_an_ir_version_onnxruntime_accepts(tmp_path):
    proto = make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [1])], [tensor("y", [1])],
                       ir_version=14)
    model = mir.from_proto(proto)
    path = mir.save(model, tmp_path / "m.onnx")
    assert onnx.load(path).ir_version <= mir.MAX_IR_VERSION
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_ir3_initializer_inputs_are_dropped_when_upgrading(tmp_path):
    proto = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [tensor("x", [2]), tensor("w", [2])],
                       [tensor("y", [2])], [const("w", np.ones(2, np.float32))], opset=9, ir_version=3)
    path = mir.save(mir.from_proto(proto), tmp_path / "m.onnx")
    saved = onnx.load(path)
    assert saved.ir_version >= 4
    assert [i.name for i in saved.graph.input] == ["x"]  # w stays a constant, not an overridable input


def test_subgraphs_are_visible_with_shapes():
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="inner_relu")], "then", [],
                               [tensor("t", [2, 3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="inner_neg")], "else", [],
                               [tensor("e", [2, 3])])
    proto = make_model([helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g)],
                       [tensor("c", [], TensorProto.BOOL), tensor("x", [2, 3])], [tensor("y", None)])
    model = mir.from_proto(proto)
    names = sorted(n.name for n in model.graph.all_nodes())
    assert names == ["if", "inner_neg", "inner_relu"]
    (if_node,) = list(model.graph)
    assert list(if_node.outputs[0].shape) == [2, 3]


def test_save_is_atomic_and_leaves_no_temporary_files(tmp_path, monkeypatch):
    model = mir.from_proto(make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [1])],
                                      [tensor("y", [1])]))
    target = tmp_path / "m.onnx"
    target.write_bytes(b"previous content")

    def explode(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(saving.ir, "save", explode)
    with pytest.raises(OSError):
        mir.save(model, target)
    assert target.read_bytes() == b"previous content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_invalid_models_give_one_line_errors(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07\x12\x04abcd\xff\xff\xff")
    with pytest.raises(ModelError) as info:
        mir.load(bad)
    assert "\n" not in str(info.value) and str(bad) in str(info.value)


def test_model_from_load_for_analysis_outlives_its_work_folder(tmp_path):
    """load_for_analysis reads weights under 1 MB into memory: a caller may delete the folder and still
    read them (onnxruntime writes the optimized model's weights to a side file there)."""
    import tempfile

    import numpy as np
    from onnx import TensorProto, helper, numpy_helper


    weight = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)  # 4 KB: written to the side file
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
        [numpy_helper.from_array(weight, "w")])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    with tempfile.TemporaryDirectory() as work:
        model = load_for_analysis(path, work)
    np.testing.assert_array_equal(model.graph.initializers["w"].const_value.numpy(), weight)


@pytest.mark.parametrize(("entries", "message"), [
    ({"location": "../m.weights"}, "contains '..'"),
    ({"location": "m.weights", "offset": "16384"}, "past the end"),
    ({"location": "m.weights", "length": "12"}, "does not match its shape"),
])
def test_every_external_tensor_is_inspected_though_locations_are_judged_once(tmp_path, entries, message):
    """The inspection judges each external-data location once per model (tensors share a few files), but
    every tensor's own entries still are: a second tensor on an accepted file, or on another, is refused."""
    path, _ = model_with_external_weights(tmp_path)
    proto = onnx.load(str(path), load_external_data=False)
    second = proto.graph.initializer.add()
    second.CopyFrom(proto.graph.initializer[0])
    second.name = "w2"
    del second.external_data[:]
    for key, value in {"location": "m.weights", "offset": "0", "length": "16384", **entries}.items():
        second.external_data.add(key=key, value=value)
    proto.graph.node[0].input[1] = "w2"
    proto.graph.node.add().CopyFrom(helper.make_node("MatMul", ["x", "w"], ["y2"], name="mm2"))
    proto.graph.output.append(tensor("y2", [1, 64]))
    bad = tmp_path / "two.onnx"
    bad.write_bytes(proto.SerializeToString())
    mir.read_proto(path)  # the first tensor alone is fine
    with pytest.raises(ModelError, match=f"initializer 'w2' refused: .*{message}"):
        mir.read_proto(bad)


def test_absurd_inferred_shapes_are_refused_and_plain_models_pass():
    """A file of a few bytes whose ConstantOfShape would make onnxruntime allocate 2^40 floats is refused
    (shape inference with data propagation finds it); a plain model, or one with dynamic dims, passes."""
    plain = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [tensor("x", ["N", 3])],
                       [tensor("y", ["N", 3])])
    mir.check_inferred_shapes(plain)
    absurd = make_model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")], [],
                        [tensor("y", None)], [const("s", np.array([2**20, 2**20], np.int64))])
    with pytest.raises(ModelError, match="absurd shape: graph output 'y' would have 1,099,511,627,776 elements"):
        mir.check_inferred_shapes(absurd)


def test_shape_inference_leaves_inputs_and_initializers_as_they_were(tmp_path):
    """Inference sends large initializers to onnx as inputs without their data, then puts everything back:
    the same inputs, the same initializers in the same order, the same (external, unread) tensors."""
    path, _ = model_with_external_weights(tmp_path)
    proto = onnx.load(str(path), load_external_data=False)
    proto.graph.initializer.append(onnx.numpy_helper.from_array(np.float32(2), "two"))
    proto.graph.node.append(helper.make_node("Mul", ["y", "two"], ["z"], name="mul"))
    proto.graph.output.append(tensor("z", None))
    model = mir.from_proto(proto, base_dir=tmp_path, shapes=False)
    before = ([v.name for v in model.graph.inputs], list(model.graph.initializers),
              [v.const_value for v in model.graph.initializers.values()])
    mir.infer_shapes(model)
    assert ([v.name for v in model.graph.inputs], list(model.graph.initializers),
            [v.const_value for v in model.graph.initializers.values()]) == before
    assert list(model.graph.outputs[1].shape) == [1, 64]
    assert model.graph.initializers["w"].const_value.__class__.__name__ == "ExternalTensor"


def test_canonical_ort_files_load_and_do_not_depend_on_the_process(tmp_path):
    """onnxruntime writes the kernel-type-string tables of an ORT format file in a per-process order; the
    file is rewritten sorted, and onnxruntime loads it and computes the same outputs."""
    import hashlib
    import subprocess

    from mobile_ep.export.ort_format import write_ort
    from mobile_ep.samples import write_sample

    source = write_sample(tmp_path)
    script = "import sys; from mobile_ep.export.ort_format import write_ort; write_ort(sys.argv[1], sys.argv[2])"
    digests = set()
    for i in range(2):
        subprocess.run([sys.executable, "-c", script, str(source), str(tmp_path / f"m{i}.ort")], check=True)
        digests.add(hashlib.sha256((tmp_path / f"m{i}.ort").read_bytes()).hexdigest())
    assert len(digests) == 1
    write_ort(source, tmp_path / "here.ort")
    x = {i.name: np.ones([d if isinstance(d, int) else 1 for d in i.shape], np.float32)
         for i in ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).get_inputs()}
    expected = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(None, x)
    got = ort.InferenceSession(str(tmp_path / "here.ort"), providers=["CPUExecutionProvider"]).run(None, x)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-5, atol=1e-6)


class _WeightSign:
    """A backend whose rule takes a Conv whose weights are all positive: it reads a large initializer."""

    @staticmethod
    def make():
        import mobile_ep

        class Rule(mobile_ep.OpRule):
            op_types = ("Conv",)

            def check(self, unit, ctx):
                """weights all positive"""
                weights = np.asarray(ctx.constant(unit.inputs[1].value))
                if not (weights > 0).all():
                    return mobile_ep.Support.no(f"weights not all positive (sum {float(weights.sum()):.6g})")
                return mobile_ep.SUPPORTED

        class Backend(mobile_ep.Backend):
            name = "sign"

            def build_rules(self):
                return mobile_ep.RuleRegistry([Rule()])

        return Backend()


@pytest.mark.parametrize("low", [-1.0, 0.5])
def test_check_reads_the_large_weights_a_rule_asks_for(tmp_path, low):
    """Weights of 1 KiB and more go to the optimized model's side file; a rule that reads them gets
    onnxruntime's values, memory-mapped from there."""
    from mepkit import ToyPlugin
    from mobile_ep import pipeline as api
    from mobile_ep.contract.plugins import make_plugins

    weights = [np.linspace(low, 2, 16 * 16 * 3 * 3, dtype=np.float32).reshape(16, 16, 3, 3) * (i + 1)
               for i in range(2)]  # 9 KiB each
    model = make_model([helper.make_node("Conv", ["x", "w0"], ["h"], pads=[1, 1, 1, 1]),
                        helper.make_node("Conv", ["h", "w1"], ["y"], pads=[1, 1, 1, 1])],
                       [tensor("x", [1, 16, 8, 8])], [tensor("y", [1, 16, 8, 8])],
                       [const(f"w{i}", w) for i, w in enumerate(weights)])
    path = tmp_path / "conv.onnx"
    path.write_bytes(model.SerializeToString())
    plugins = make_plugins(entry_points=False)
    plugins.register(ToyPlugin(_WeightSign.make()), name="sign-plugin")
    result = api.check(path, plugins=plugins)
    assert result.backends["sign"].supported_nodes == (0 if low < 0 else 2)
    reasons = [r.reason for r in result.backends["sign"].unsupported]
    expected = [f"Conv: weights not all positive (sum {float(w.sum()):.6g})" for w in weights]
    assert reasons == (expected if low < 0 else [])


def test_a_large_weight_is_not_an_absurd_value(tmp_path, monkeypatch):
    """The limits are for values a model computes (or declares as inputs): a stored weight larger than
    MAX_VALUE_BYTES is onnxruntime's to load, not refused (here the limit is lowered under the weight)."""
    path, _ = model_with_external_weights(tmp_path)  # 16 KiB of weights
    monkeypatch.setattr(guard, "MAX_VALUE_BYTES", 8192)
    mir.validate(path)
    monkeypatch.setattr(guard, "MAX_VALUE_BYTES", 128)  # the input's and the output's 256 bytes are values
    with pytest.raises(ModelError, match="absurd shape: graph input 'x' would have 64 elements"):
        mir.validate(path)


def test_shapes_flow_through_ir3_initializers_missing_from_the_inputs():
    """onnxruntime writes IR 3 models whose folded initializers are not listed as inputs (which onnx's
    inference then ignores): values computed from them still get their shapes."""
    proto = make_model([helper.make_node("Add", ["x", "w"], ["s"], name="add"),
                        helper.make_node("Relu", ["s"], ["y"], name="relu")],
                       [tensor("x", [2, 3])], [tensor("y", None)], [const("w", np.ones((2, 3), np.float32))],
                       opset=9, ir_version=3)
    assert [i.name for i in proto.graph.input] == ["x"]
    model = mir.from_proto(proto)
    assert [list(n.outputs[0].shape) for n in model.graph] == [[2, 3], [2, 3]]


def test_unnamed_nodes_never_take_a_named_nodes_name():
    """A node made without a name (onnxruntime writes an inlined function body so) is named around the named nodes,
    which keep their names: onnxruntime reports the nodes its EPs take by those."""
    proto = make_model([helper.make_node("Relu", ["x"], ["a"]),
                        helper.make_node("Relu", ["a"], ["b"], name="node"),
                        helper.make_node("Relu", ["b"], ["y"], name="node_1")],
                       [tensor("x", [2, 3])], [tensor("y", [2, 3])])
    model = mir.from_proto(proto)
    assert [n.name for n in model.graph] == ["node_2", "node", "node_1"]


def _computed_shape(nodes, inputs, initializers=(), opset=13):
    """The shape the IR gives the output ``y`` of *nodes* (a Relu of the value ``r`` they compute)."""
    proto = make_model([*nodes, helper.make_node("Relu", ["r"], ["y"], name="relu")], inputs, [tensor("y", None)],
                       list(initializers), opset=opset)
    model = mir.from_proto(proto)
    shape = model.graph.outputs[0].shape
    return None if shape is None or not shape.is_static() else tuple(shape)


@pytest.mark.parametrize("opset", [13, 21])
def test_a_reshape_to_the_shape_of_a_static_tensor_has_that_shape(opset):
    """``Reshape(d, Shape(x))``, as in SoftmaxCrossEntropyLoss's body: onnxruntime propagates the value of the Shape
    and the Reshape's output is static there (its EPs take the nodes after it); so it is in the IR, and the shapes
    after it follow.  ONNX's inference alone leaves it unknown."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Reshape", ["d", "s"], ["r"], name="reshape")]
    assert _computed_shape(nodes, [tensor("x", [2, 3, 4]), tensor("d", [24])], opset=opset) == (2, 3, 4)


def test_shape_values_go_through_gather_unsqueeze_concat_and_arithmetic():
    """Attention's body: dims gathered with a constant index, unsqueezed, multiplied and concatenated."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["b"]), helper.make_node("Gather", ["s", "one"], ["h"]),
             helper.make_node("Shape", ["x"], ["t"], start=2, end=3),
             helper.make_node("Mul", ["h", "h"], ["hh"]),
             helper.make_node("Unsqueeze", ["b", "axes"], ["b1"]), helper.make_node("Unsqueeze", ["hh", "axes"], ["h1"]),
             helper.make_node("Concat", ["b1", "h1", "t"], ["shape"], axis=0),
             helper.make_node("Reshape", ["d", "shape"], ["r"])]
    initializers = [const("zero", np.array(0, np.int64)), const("one", np.array(1, np.int64)),
                    const("axes", np.array([0], np.int64))]
    assert _computed_shape(nodes, [tensor("x", [2, 3, 4]), tensor("d", [72])], initializers) == (2, 9, 4)


def test_a_range_to_a_computed_limit_has_its_length():
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=2), helper.make_node("Squeeze", ["s", "axes"], ["n"]),
             helper.make_node("Range", ["zero", "n", "one"], ["i"]), helper.make_node("Cast", ["i"], ["r"], to=1)]
    initializers = [const("zero", np.array(0, np.int64)), const("one", np.array(1, np.int64)),
                    const("axes", np.array([0], np.int64))]
    assert _computed_shape(nodes, [tensor("x", [2, 5])], initializers) == (5,)


@pytest.mark.parametrize(("parts", "expected"), [(["s1"], (2, 3)), (["minus_one"], None)])
def test_a_constant_among_the_concat_inputs_leaves_the_shape_unknown(parts, expected):
    """onnxruntime propagates a Concat of propagated values only: LinearAttention's ``Concat(batch, -1)`` leaves its
    Reshape's output unknown there (the QNN EP refuses the Reshape for it), so it stays unknown here."""
    nodes = [helper.make_node("Shape", ["x"], ["s0"], start=0, end=1),
             helper.make_node("Shape", ["x"], ["s1"], start=1, end=2),
             helper.make_node("Concat", ["s0", *parts], ["shape"], axis=0),
             helper.make_node("Reshape", ["d", "shape"], ["r"])]
    inputs = [tensor("x", [2, 3]), tensor("d", [6])]
    assert _computed_shape(nodes, inputs, [const("minus_one", np.array([-1], np.int64))]) == expected


def test_a_shape_of_a_dynamic_tensor_leaves_the_reshape_dynamic():
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Reshape", ["d", "s"], ["r"])]
    assert _computed_shape(nodes, [tensor("x", ["n", 3]), tensor("d", [6])]) is None
