"""The Core ML emulator covers what the lowering emits: every MIL op the rules' lowerings call, every op the
coremltools passes the compiler runs can make, and the interleaved concat coremltools makes of a channel
shuffle (compiled and verified against onnxruntime's CPU result)."""

from __future__ import annotations

import inspect
import json
import pathlib
import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import mobile_ep
import mobile_ep_coreml
from mobile_ep_coreml.emulator import program
from mobile_ep_coreml.emulator.mil_ops import KERNELS

#: What the emulator runs: the kernels, and the constant ops its interpreter resolves when it loads a program.
EMULATED = set(KERNELS) | set(program._CONSTANT_OPS)

PLUGIN = pathlib.Path(mobile_ep_coreml.__file__).parent
#: Builder calls that make no op of the program.
NOT_OPS = {"placeholder", "program", "TensorSpec", "scope", "set_before_op"}
#: Ops the coremltools passes make only from ops of their own family (quantized weights, stateful models): the
#: first test catches them as soon as a lowering emits one.
FAMILY_ONLY = {"quantize", "dequantize", "constexpr_affine_dequantize", "constexpr_blockwise_shift_scale",
               "constexpr_lut_to_dense", "coreml_update_state", "state_tensor_placeholder"}


def _builder_calls(text: str) -> set[str]:
    return set(re.findall(r"\bmb\.(\w+)\(", text))


def test_every_mil_op_the_lowering_emits_is_emulated():
    emitted = set()
    for path in PLUGIN.rglob("*.py"):
        if "emulator" not in path.parts:
            emitted |= _builder_calls(path.read_text())
    assert len(emitted) > 40  # (the scan finds the lowering's calls)
    assert sorted(emitted - NOT_OPS - EMULATED) == []


def test_every_op_the_default_coremltools_passes_make_is_emulated():
    from mobile_ep_coreml.mil import coremltools

    ct = coremltools()
    from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY

    made = set()
    for name in ct.PassPipeline.DEFAULT.passes:
        module = inspect.getmodule(type(PASS_REGISTRY[name]))
        made |= _builder_calls(inspect.getsource(module))
    assert sorted(made - NOT_OPS - FAMILY_ONLY - EMULATED) == []


def _channel_shuffle(size: int = 6, half: int = 4) -> bytes:
    channels = 2 * half
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((channels, 3, 1, 1)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array([1, 2, half, size, size], np.int64), "s5"),
             numpy_helper.from_array(np.array([1, channels, size, size], np.int64), "s4"),
             numpy_helper.from_array(np.array([half, half], np.int64), "halves")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
             helper.make_node("Split", ["c", "halves"], ["a", "b"], name="split", axis=1),
             helper.make_node("Relu", ["b"], ["rb"], name="relu"),
             helper.make_node("Concat", ["a", "rb"], ["cat"], name="cat", axis=1),
             helper.make_node("Reshape", ["cat", "s5"], ["r5"], name="r5"),
             helper.make_node("Transpose", ["r5"], ["t5"], name="t5", perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", ["t5", "s4"], ["y"], name="r4")]
    graph = helper.make_graph(nodes, "shuffle", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, size, size])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10).SerializeToString()


@pytest.mark.parametrize("model_format", ["MLProgram", "NeuralNetwork"])
def test_channel_shuffle_compiles_to_an_interleaved_concat_that_verifies(tmp_path, model_format):
    source = tmp_path / "shuffle.onnx"
    source.write_bytes(_channel_shuffle())
    out = tmp_path / "out"
    mobile_ep.convert(source, "coreml", out, cost_model=False, compile=True,
                      options={"coreml.model_format": model_format})
    report = json.loads((out / "report.json").read_text())
    assert [v["ok"] for v in report["verification"]] == [True, True, True]
    from coremltools.proto import Model_pb2

    spec = Model_pb2.Model()
    spec.ParseFromString(next((out / "shuffle.coreml.compiled").rglob("model.mlmodel")).read_bytes())
    if model_format == "NeuralNetwork":
        interleaved = [layer for layer in spec.neuralNetwork.layers
                       if layer.WhichOneof("layer") == "concatND" and layer.concatND.interleave]
    else:
        (function,) = spec.mlProgram.functions.values()
        operations = [op for block in function.block_specializations.values() for op in block.operations]
        true_consts = {op.outputs[0].name for op in operations if op.type == "const"
                       and list(op.attributes["val"].immediateValue.tensor.bools.values) == [True]}
        interleaved = [op for op in operations if op.type == "concat"
                       and op.inputs["interleave"].arguments[0].name in true_consts]
    assert interleaved  # coremltools made the interleaved concat the emulator ran
