"""Boundaries of the QNN rules, each pinned to a one- or two-node graph and judged by the real QNN EP
(onnxruntime-qnn on the HTP simulator, through the oracle): a case on each side of each boundary."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from mobile_ep.cli.main import main
from mobile_ep.testing import run_oracle

T = TensorProto
DTYPES = {"f32": T.FLOAT, "f16": T.FLOAT16, "i32": T.INT32, "i64": T.INT64, "u8": T.UINT8, "i8": T.INT8,
          "u16": T.UINT16, "i16": T.INT16, "bool": T.BOOL}


def graph_model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    """A model of *nodes*; *inputs* and *outputs* as (name, element type, shape)."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs], initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def one_node(op, inputs, outputs, inits=(), opset=17, **attrs) -> onnx.ModelProto:
    """One node *op* named ``op`` reading *inputs* then the initializers *inits*."""
    node = helper.make_node(op, [i[0] for i in inputs] + [t.name for t in inits], [o[0] for o in outputs],
                            name="op", **attrs)
    return graph_model([node], inputs, outputs, inits, opset)


def const(name, value, dtype=None):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def taken(qnn_backend, qnn_ep, model, case) -> bool:
    """Whether the real EP takes node ``op``, after checking that the backend predicts the same placement."""
    result = run_oracle(qnn_backend, model, qnn_ep, case=case)
    assert result.built, result.diff()
    assert result.matches, result.diff()
    return "op" in result.real_nodes


# -- the internal error: a Cast to float16 that onnxruntime merges with the Cast it inserts -----------------------
@pytest.mark.parametrize("source", ["u8", "bool", "i64"])
def test_cast_to_float16_feeding_a_matmul_is_checked_as_the_real_ep(qnn_backend, qnn_ep, tmp_path, source):
    """The CPU EP has no float16 MatMul: onnxruntime inserts a Cast to float32 before it and merges it with the
    model's Cast (uint8 -> float16 -> float32 in one Cast).  The model's Cast is given back: ``check`` ends
    normally, and the EP takes both nodes, as predicted."""
    model = graph_model([helper.make_node("Cast", ["x"], ["c"], to=T.FLOAT16, name="cast"),
                         helper.make_node("MatMul", ["c", "w"], ["y"], name="mm")],
                        [("x", DTYPES[source], [2, 3, 4])], [("y", T.FLOAT16, [2, 3, 5])],
                        [const("w", np.ones((4, 5)), np.float16)])
    result = run_oracle(qnn_backend, model, qnn_ep, case=f"cast {source} to float16")
    assert result.matches, result.diff()
    assert {result.nodes[n] for n in result.real_nodes} == {"Cast", "MatMul"}
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    run = CliRunner().invoke(main, ["check", str(path), "--ep", "qnn", "-O", "qnn.soc_model=60"])
    assert run.exit_code == 0, run.output
    assert "internal error" not in run.output and "2/2 nodes claimed" in run.output
