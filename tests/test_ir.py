"""Loading and saving: external data, subgraphs, IR versions, atomic writes, shape information."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from mepkit import const, make_model, tensor
from mobile_ep import ir as mir
from mobile_ep.errors import ModelError


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

    monkeypatch.setattr(mir.ir, "save", explode)
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

    from mobile_ep import api

    weight = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)  # 4 KB: written to the side file
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
        [numpy_helper.from_array(weight, "w")])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    with tempfile.TemporaryDirectory() as work:
        model = api.load_for_analysis(path, work)
    np.testing.assert_array_equal(model.graph.initializers["w"].const_value.numpy(), weight)
