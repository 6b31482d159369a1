"""The ENPU payload: its format round-trips, every malformed payload is refused, and the C runtime adapter
reads exactly what the compiler writes."""

from __future__ import annotations

import shutil
import struct
import subprocess

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from mobile_ep import CompiledPartition, CompileError, RuleContext
from mobile_ep.contract.compile import partition_view
from mobile_ep.testing import as_model
from mobile_ep_example import enpu
from mobile_ep_example.backend import ExampleNpu
from mobile_ep_example.emulator import run


def block():
    """conv -> relu -> maxpool -> add(bias): one partition, four ops, two constants."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
             helper.make_node("Add", ["p", "bias"], ["y"], name="add")]
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((1, 4, 1, 1)).astype(np.float32), "bias")]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.fixture(scope="module")
def compiled():
    npu = ExampleNpu()
    model = as_model(block())
    ctx = RuleContext(model, npu)
    return npu, npu.compile(partition_view(ctx, list(model.graph)), ctx)


def test_payload_describes_its_boundary(compiled):
    _, payload = compiled
    assert payload.format == "enpu/1"
    assert [(s.name, s.shape) for s in payload.inputs] == [("x", (1, 3, 8, 8))]
    assert [(s.name, s.shape) for s in payload.outputs] == [("y", (1, 4, 4, 4))]
    program = enpu.read(payload.data)
    assert [op.op for op in program.operations] == [enpu.Op.CONV2D, enpu.Op.RELU, enpu.Op.MAXPOOL2D, enpu.Op.ADD]
    assert sum(t.data is not None for t in program.tensors) == 2
    assert enpu.write(program) == payload.data


def test_emulation_matches_onnxruntime(compiled):
    import onnxruntime as ort

    npu, payload = compiled
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    session = ort.InferenceSession(block().SerializeToString(), providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"x": x})
    restored = CompiledPartition.from_bytes(payload.to_bytes())
    np.testing.assert_allclose(npu.emulate(restored, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)


def test_every_truncation_is_refused(compiled):
    _, payload = compiled
    for length in range(len(payload.data)):
        with pytest.raises(enpu.FormatError):
            enpu.read(payload.data[:length])


@pytest.mark.parametrize(("patch", "message"), [
    (lambda b: b"XNPU" + b[4:], "bad magic"),
    (lambda b: b[:4] + struct.pack("<H", 2) + b[6:], "version 2 is not supported"),
    (lambda b: b + b"\0", "weights: expected"),
])
def test_malformed_payloads_are_refused_with_a_reason(compiled, patch, message):
    _, payload = compiled
    with pytest.raises(enpu.FormatError, match=message):
        enpu.read(patch(payload.data))


def test_out_of_range_tensor_index_is_refused():
    program = enpu.Program()
    x = program.add_tensor((1, 4))
    program.add_op(enpu.Op.RELU, (x,), (7,))
    program.inputs, program.outputs = [x], [7]
    with pytest.raises(enpu.FormatError, match="out of range"):
        enpu.read(enpu.write(program))


def test_emulator_checks_its_inputs(compiled):
    npu, payload = compiled
    with pytest.raises(RuntimeError, match=r"expected float32\[1, 3, 8, 8\]"):
        run(enpu.read(payload.data), [np.zeros((1, 3, 8, 8), np.float64)])
    foreign = CompiledPartition("example", "other/9", payload.data, payload.inputs, payload.outputs)
    with pytest.raises(CompileError, match="cannot run a 'other/9' payload"):
        npu.emulate(foreign, {"x": np.zeros((1, 3, 8, 8), np.float32)})


HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include "enpu_runtime.h"
extern uint16_t enpu_stub_log[];
extern size_t enpu_stub_count;
int main(int argc, char** argv) {
    FILE* f = fopen(argv[1], "rb");
    long size;
    uint8_t* data;
    enpu_program* p;
    float** ins;
    float** outs;
    uint32_t i;
    int status;
    if (!f || argc < 2) return 2;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    data = malloc((size_t)size + 1);
    if (fread(data, 1, (size_t)size, f) != (size_t)size) return 2;
    fclose(f);
    status = enpu_program_load(data, (size_t)size, &p);
    free(data);
    if (status != ENPU_OK) { printf("status %d\n", status); return 0; }
    ins = calloc(p->n_inputs + 1, sizeof *ins);
    outs = calloc(p->n_outputs + 1, sizeof *outs);
    for (i = 0; i < p->n_inputs; i++) ins[i] = calloc(p->tensors[p->inputs[i]].count, sizeof(float));
    for (i = 0; i < p->n_outputs; i++) outs[i] = calloc(p->tensors[p->outputs[i]].count, sizeof(float));
    status = enpu_program_run(p, (const float* const*)ins, outs);
    printf("status %d tensors %u ops %u inputs %u outputs %u opcodes", status, p->n_tensors, p->n_ops,
           p->n_inputs, p->n_outputs);
    for (i = 0; i < enpu_stub_count; i++) printf(" %u", enpu_stub_log[i]);
    printf("\n");
    for (i = 0; i < p->n_inputs; i++) free(ins[i]);
    for (i = 0; i < p->n_outputs; i++) free(outs[i]);
    free(ins);
    free(outs);
    enpu_program_free(p);
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_runtime_adapter_reads_what_the_compiler_writes(compiled, tmp_path):
    npu, payload = compiled
    files = npu.runtime_adapter()
    assert set(files) == {"enpu_runtime.c", "enpu_runtime.h"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "harness.c").write_text(HARNESS)
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-DENPU_STUB_DRIVER", "-o",
                    str(tmp_path / "harness"), str(tmp_path / "harness.c"), str(tmp_path / "enpu_runtime.c")],
                   check=True, capture_output=True, text=True)

    def run_c(data: bytes) -> str:
        (tmp_path / "payload.bin").write_bytes(data)
        return subprocess.run([str(tmp_path / "harness"), str(tmp_path / "payload.bin")], check=True,
                              capture_output=True, text=True).stdout.strip()

    program = enpu.read(payload.data)
    opcodes = " ".join(str(int(op.op)) for op in program.operations)
    assert run_c(payload.data) == (f"status 0 tensors {len(program.tensors)} ops {len(program.operations)} "
                                   f"inputs 1 outputs 1 opcodes {opcodes}")
    for length in (0, 3, 20, len(payload.data) // 2, len(payload.data) - 1):
        assert run_c(payload.data[:length]) == "status 1"
    assert run_c(payload.data[:4] + struct.pack("<H", 2) + payload.data[6:]) == "status 2"
