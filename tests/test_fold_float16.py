"""The basic-level graph of a float16 model: the Casts onnxruntime's CPU-only session inserts around CPU kernels
without float16 (after the EPs chose their nodes) are taken out again where that gives back the model's nodes."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from mobile_ep.passes import fold_constants

LEVELS = [ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
          ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, ort.GraphOptimizationLevel.ORT_ENABLE_ALL]


def _model(nodes, output_type):
    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 4, 3)).astype(np.float16), "w")
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 4, 8])],
                              [helper.make_tensor_value_info("y", output_type, [1, 4, 8])], initializer=[weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def _run(path, level=ort.GraphOptimizationLevel.ORT_ENABLE_BASIC):
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    x = np.random.default_rng(1).standard_normal((1, 4, 8)).astype(np.float16)
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _written(model, tmp_path):
    onnx.save(model, tmp_path / "model.onnx")
    return tmp_path / "model.onnx", fold_constants.ort_optimized(tmp_path / "model.onnx", tmp_path)


def test_float16_nodes_come_back_without_the_inserted_casts(tmp_path):
    # the CPU EP has no float16 Conv or Sigmoid: its session wraps them in Casts to float32
    model = _model([helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1]),
                    helper.make_node("Sigmoid", ["c"], ["s"], name="sig"),
                    helper.make_node("Cast", ["s"], ["y"], name="to_float", to=TensorProto.FLOAT)], TensorProto.FLOAT)
    source, written = _written(model, tmp_path)
    graph = onnx.load(written).graph
    assert [(n.name, list(n.input), list(n.output)) for n in graph.node] == [
        ("conv", ["x", "w"], ["c"]), ("sig", ["c"], ["s"]), ("to_float", ["s"], ["y"])]
    expected = _run(source)
    for level in LEVELS:  # (onnxruntime inserts its Casts again when it loads the written model)
        np.testing.assert_array_equal(_run(written, level), expected)


def test_a_cast_of_the_model_merged_with_an_inserted_one_is_put_back(tmp_path):
    # Conv (float16) -> Cast to float32 -> Sigmoid: onnxruntime merges the model's Cast with the one it inserts
    # after the Conv (the Sigmoid then reads the float32 Conv); the EPs are offered the float16 Conv and the Cast
    model = _model([helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1]),
                    helper.make_node("Cast", ["c"], ["f"], name="to_float", to=TensorProto.FLOAT),
                    helper.make_node("Sigmoid", ["f"], ["s"], name="sig"),
                    helper.make_node("Mul", ["f", "s"], ["y"], name="silu")], TensorProto.FLOAT)
    source, written = _written(model, tmp_path)
    graph = onnx.load(written).graph
    assert [(n.name, list(n.input), list(n.output)) for n in graph.node] == [
        ("conv", ["x", "w"], ["c"]), ("to_float", ["c"], ["f"]), ("sig", ["f"], ["s"]), ("silu", ["f", "s"], ["y"])]
    assert graph.initializer[0].data_type == TensorProto.FLOAT16
    expected = _run(source)
    for level in LEVELS:
        np.testing.assert_array_equal(_run(written, level), expected)


def test_a_float32_model_is_written_as_onnxruntime_wrote_it(tmp_path):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    _, written = _written(model, tmp_path)
    assert [n.name for n in onnx.load(written).graph.node] == ["relu"]
