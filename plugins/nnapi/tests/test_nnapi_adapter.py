"""The C++ runtime adapter, built on this machine: g++ compiles it against mobile-ep's declaration-only NNAPI
header, a recording stub of the NNAPI functions stands in for libneuralnetworks.so, and the model the adapter
builds through the NNAPI C API must be exactly the serialized one."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import struct
import subprocess

import numpy as np
import pytest
from nnapi_compile_kit import compile_whole, random
from nnapi_models import model, node
from test_nnapi_compile import _qdq_conv
from test_nnapi_serialize import _section_offsets

from mobile_ep_nnapi import NnapiBackend, serialize
from mobile_ep_nnapi.nnapi import FuseCode, OperandCode, OperationCode

ADAPTER = pathlib.Path(__file__).resolve().parents[1] / "mobile_ep_nnapi" / "adapter"
HOST = pathlib.Path(__file__).resolve().parent / "host"
CXX = shutil.which("g++")
FLAGS = ["-std=c++17", "-O0", "-Wall", "-Wextra", "-Werror", f"-I{ADAPTER / 'include'}"]

pytestmark = pytest.mark.skipif(CXX is None, reason="g++ is not installed")


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """The recording stub as a shared library and a runner linking the adapter's sources."""
    out = tmp_path_factory.mktemp("adapter-build")
    stub, runner = out / "libneuralnetworks_stub.so", out / "host_runner"
    subprocess.run([CXX, *FLAGS, "-shared", "-fPIC", str(HOST / "recording_stub.cc"), "-o", str(stub)], check=True)
    sources = sorted(str(p) for p in (ADAPTER / "src").glob("*.cc"))
    subprocess.run([CXX, *FLAGS, *sources, str(HOST / "host_runner.cc"), "-ldl", "-o", str(runner)], check=True)
    return stub, runner


def run(build, blob: bytes, tmp_path: pathlib.Path) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    stub, runner = build
    (tmp_path / "model.nnapi").write_bytes(blob)
    record = tmp_path / "calls.txt"
    record.unlink(missing_ok=True)
    done = subprocess.run([str(runner), str(stub), str(tmp_path / "model.nnapi")], capture_output=True, text=True,
                          env={**os.environ, "MEP_NNAPI_RECORD": str(record)}, timeout=60)
    calls = [line.split(" ") for line in record.read_text().splitlines()] if record.exists() else []
    return done, calls


def _float(bits: str) -> float:
    return struct.unpack("<f", bytes.fromhex(bits)[::-1])[0]


def rebuilt(calls: list[list[str]]) -> dict:
    """What the adapter told NNAPI, reassembled from the recording."""
    built: dict = {"operands": [], "values": {}, "per_channel": {}, "operations": [], "relax": None, "devices": None}
    for call in calls:
        kind, args = call[0], call[1:]
        if kind == "operand":
            rank = int(args[1])
            built["operands"].append((int(args[0]), tuple(int(d) for d in args[2:2 + rank]),
                                      _float(args[2 + rank]), int(args[3 + rank])))
        elif kind == "value":
            built["values"][int(args[0])] = bytes.fromhex(args[2]) if len(args) > 2 else b""
            assert len(built["values"][int(args[0])]) == int(args[1])
        elif kind == "perchannel":
            built["per_channel"][int(args[0])] = (int(args[1]), tuple(_float(s) for s in args[3:]))
        elif kind == "operation":
            n_in = int(args[1])
            ins = tuple(int(a) for a in args[2:2 + n_in])
            outs = tuple(int(a) for a in args[3 + n_in:])
            assert len(outs) == int(args[2 + n_in])
            built["operations"].append((int(args[0]), ins, outs))
        elif kind == "io":
            n_in = int(args[0])
            built["inputs"] = [int(a) for a in args[1:1 + n_in]]
            built["outputs"] = [int(a) for a in args[2 + n_in:]]
        elif kind == "relax":
            built["relax"] = args[0] == "1"
        elif kind == "preference":
            built["preference"] = int(args[0])
        elif kind == "compilation_create":
            built["devices"] = "any"
        elif kind == "compilation_create_for_devices":
            built["devices"] = args[1:]
    return built


def assert_same_model(blob: bytes, calls: list[list[str]]) -> dict:
    m = serialize.read(blob)
    built = rebuilt(calls)
    assert built["operands"] == [(o.type, o.dims, np.float32(o.scale), o.zero_point) for o in m.operands]
    assert built["values"] == m.values
    assert built["per_channel"] == {i: (o.channel_quant.channel_dim, tuple(np.float32(s) for s in o.channel_quant.scales))
                                    for i, o in enumerate(m.operands) if o.channel_quant is not None}
    assert built["operations"] == [(op.type, op.inputs, op.outputs) for op in m.operations]
    assert built["inputs"] == m.inputs and built["outputs"] == m.outputs
    assert built["relax"] == (True if m.relax_fp16 else None)
    assert built["preference"] == m.preference
    kinds = [c[0] for c in calls]
    assert kinds.index("model_finish") < kinds.index("compilation_finish") < kinds.index("execution_create")
    assert kinds.count("input") == len(m.inputs) and kinds.count("output") == len(m.outputs)
    assert "compute" in kinds
    return built


CNN = model([node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["r"]),
             node("GlobalAveragePool", ["r"], ["p"]), node("Flatten", ["p"], ["f"]),
             node("Gemm", ["f", "fc", "bias"], ["y"], transB=1)],
            {"x": [1, 3, 16, 16]}, inits={"w": random((8, 3, 3, 3), 1), "fc": random((5, 8), 2),
                                          "bias": random((5,), 3)})


@pytest.mark.parametrize("name, proto, options, devices", [
    ("cnn", CNN, {}, "any"),
    ("cnn-relaxed-npu", CNN, {"use_fp16": "true", "cpu_disabled": "true", "preference": "sustained_speed"},
     ["stub-npu", "stub-gpu"]),
    ("cnn-reference", CNN, {"cpu_only": "true"}, ["nnapi-reference"]),
    ("qdq-per-channel", _qdq_conv(True), {}, "any"),
    ("qdq-per-tensor-api28", _qdq_conv(False), {"api_level": "29"}, "any"),
])
def test_adapter_builds_exactly_the_serialized_model(build, tmp_path, name, proto, options, devices):
    payload = compile_whole(proto, NnapiBackend().configure(options))
    done, calls = run(build, payload.data, tmp_path)
    assert done.returncode == 0, done.stderr
    built = assert_same_model(payload.data, calls)
    assert built["devices"] == devices
    m = serialize.read(payload.data)
    for spec, line in zip(payload.inputs, (ln for ln in done.stdout.splitlines() if ln.startswith("input ")),
                          strict=True):
        assert line == f"input {spec.name} {m.operands[m.inputs[0]].nbytes()}"


def test_adapter_runs_every_partition_of_a_compiled_sample(build, tmp_path):
    from mobile_ep.passes import to_epcontext as compiled_models
    from mobile_ep.samples import write_sample

    source = write_sample(tmp_path)
    result = compiled_models.compile_model(source, NnapiBackend(), tmp_path / "s.compiled.onnx", tmp_path / "w",
                                           use_cost=False)
    bundle = compiled_models.write_bundle(tmp_path / "s.compiled.onnx")
    blobs = sorted(bundle.glob("*.nnapi"))
    assert len(blobs) == len(result.compiled) >= 1
    operations = set()
    for blob in blobs:  # (the HardSwish body onnxruntime inlines is a partition of its own: no Conv in it)
        done, calls = run(build, blob.read_bytes(), tmp_path)
        assert done.returncode == 0, done.stderr
        assert_same_model(blob.read_bytes(), calls)
        operations |= {int(c[1]) for c in calls if c[0] == "operation"}
    assert OperationCode.CONV_2D in operations


def test_adapter_refuses_what_the_python_reader_refuses(build, tmp_path):
    blob = compile_whole(CNN).data
    bad = {
        "truncated": blob[:-1],
        "header only": blob[:64],
        "bad magic": b"X" + blob[1:],
        "operand out of range": _retarget_first_operation(blob),
        "future version": blob[:8] + struct.pack("<H", 2) + blob[10:],
    }
    for what, data in bad.items():
        with pytest.raises(serialize.CompileError):
            serialize.read(data)
        done, calls = run(build, data, tmp_path)
        assert done.returncode == 2, what
        assert done.stderr.startswith("error: serialized NNAPI model"), (what, done.stderr)
        assert not calls, what  # nothing reached NNAPI


def _retarget_first_operation(blob: bytes) -> bytes:
    """The first operation's first input pointing past the last operand."""
    m = serialize.read(blob)
    offset = _section_offsets(m, blob)["operations"] + 12
    out = bytearray(blob)
    struct.pack_into("<I", out, offset, len(m.operands) + 5)
    return bytes(out)


def test_declaration_header_matches_the_python_codes():
    header = (ADAPTER / "include" / "mobile_ep_nnapi_decls.h").read_text()
    declared = {name: int(value) for name, value in re.findall(r"ANEURALNETWORKS_(\w+) = (\d+),", header)}
    for enum, prefix in ((OperandCode, ""), (OperationCode, ""), (FuseCode, "FUSED_")):
        for member in enum:
            assert declared[prefix + member.name] == member.value, member
    assert declared["PADDING_SAME"] == 1 and declared["PREFER_SUSTAINED_SPEED"] == 2
    assert declared["DEVICE_CPU"] == 2


def test_jni_glue_compiles_when_a_jdk_is_present():
    homes = [pathlib.Path(p) for p in (os.environ.get("JAVA_HOME", ""),) if p]
    homes += sorted(pathlib.Path("/usr/lib/jvm").glob("*")) if pathlib.Path("/usr/lib/jvm").is_dir() else []
    include = next((h / "include" for h in homes if (h / "include" / "jni.h").exists()), None)
    if include is None:
        pytest.skip("no JDK (jni.h) on this machine")
    platform = next((p for p in include.iterdir() if (p / "jni_md.h").exists()), include)
    subprocess.run([CXX, *FLAGS, f"-I{include}", f"-I{platform}", "-fsyntax-only",
                    str(ADAPTER / "jni" / "mobile_ep_nnapi_jni.cc")], check=True)


def test_runtime_adapter_ships_every_source():
    files = NnapiBackend().runtime_adapter()
    assert {"CMakeLists.txt", "README.md", "include/mobile_ep_nnapi.h", "include/mobile_ep_nnapi_decls.h",
            "src/nnapi_model_loader.cc", "src/nnapi_partition.cc", "src/nnapi_api.cc", "jni/mobile_ep_nnapi_jni.cc",
            "kotlin/ai/mobileep/nnapi/NnapiPartition.kt", "kotlin/ai/mobileep/CompiledModelRunner.kt"} <= set(files)
    cmake = files["CMakeLists.txt"].decode()
    assert all(f"src/{name}" in cmake for name in ("nnapi_model_loader.cc", "nnapi_partition.cc", "nnapi_api.cc"))
