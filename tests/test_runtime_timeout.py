"""A valid model that never finishes must not hang convert's verification."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

from mepkit import const, tensor
from mobile_ep import errors


def endless_loop_model(path):
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["v_in", "one"], ["v_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1])],
        initializer=[const("one", np.ones(1, np.float32))],
    )
    loop = helper.make_node("Loop", ["trips", "go", "x"], ["y"], body=body, name="endless")
    graph = helper.make_graph([loop], "endless", [tensor("x", [1])], [tensor("y", [1])],
                              initializer=[const("trips", np.array(2**62, np.int64)), const("go", np.array(True))])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_verification_of_a_model_that_never_finishes_stops_with_one_line(tmp_path):
    model = endless_loop_model(tmp_path / "endless.onnx")
    env = {**os.environ, "MOBILE_EP_RUN_TIMEOUT": "2", "MOBILE_EP_DISABLE_PLUGINS": ""}
    proc = subprocess.run([sys.executable, "-m", "mobile_ep.cli", "convert", str(model), "--ep",
                           "nnapi" if _has("nnapi") else "coreml", "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=300)
    if "unknown backend" in proc.stderr:
        return  # no built-in backend in this environment: nothing to convert with
    assert proc.returncode == errors.EXIT_BAD_MODEL, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "did not finish running within 2 s" in lines[0]


def _has(name):
    from mobile_ep.contract.plugins import make_plugins

    return name in make_plugins().backends()
