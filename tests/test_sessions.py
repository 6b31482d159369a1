"""Each command opens each onnxruntime session once: the sessions a command builds, counted, held to a budget.

A ``check`` builds one session on the model, plus one per view of it that really differs (a function op kept
whole for one backend, a written model whose basic level changes it); ``convert`` adds the file it writes,
its ORT format conversion and the verification runs.  The sessions are counted as onnxruntime builds them:
``onnxruntime.InferenceSession`` is wrapped for the test (every session, whoever builds it, runs as usual).
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from mepkit import LIGHT_DIR, has_backend


@pytest.fixture
def count_sessions(monkeypatch):
    """The sources of the onnxruntime sessions built since the test began (paths, or ``bytes``)."""
    built: list[str] = []
    original = onnxruntime.InferenceSession.__init__

    def counting(self, source, *args, **kwargs):
        built.append(source if isinstance(source, str) else "bytes")
        return original(self, source, *args, **kwargs)

    monkeypatch.setattr(onnxruntime.InferenceSession, "__init__", counting)
    return built


def _ok(result) -> None:
    assert result.exit_code == 0, result.output


def mobilenet_v3_like(blocks: int = 3) -> onnx.ModelProto:
    """MobileNetV3's pattern as torch exports it at opset 17: HardSwish (an ONNX function op) after
    convolutions, squeeze-excite with HardSigmoid, residual adds, a pooled classifier."""
    rng = np.random.default_rng(0)
    nodes, inits, count = [], [], [0]

    def weight(*shape):
        count[0] += 1
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), f"w{count[0]}"))
        return inits[-1].name

    def node(op, inputs, **attrs):
        count[0] += 1
        out = f"{op.lower()}_{count[0]}"
        nodes.append(helper.make_node(op, inputs, [out], name=f"/{op}_{count[0]}", **attrs))
        return out

    def conv(x, cin, cout, k=1, stride=1, group=1):
        return node("Conv", [x, weight(cout, cin // group, k, k), weight(cout)], kernel_shape=[k, k],
                    strides=[stride, stride], pads=[k // 2] * 4, group=group)

    x = node("HardSwish", [conv("x", 3, 16, k=3, stride=2)])
    for _ in range(blocks):
        y = node("HardSwish", [conv(x, 16, 32)])
        y = node("HardSwish", [conv(y, 32, 32, k=3, group=32)])
        s = node("Relu", [conv(node("GlobalAveragePool", [y]), 32, 8)])
        y = node("Mul", [y, node("HardSigmoid", [conv(s, 8, 32)], alpha=1 / 6, beta=0.5)])
        x = node("Add", [x, conv(y, 32, 16)])
    x = node("Flatten", [node("GlobalAveragePool", [node("HardSwish", [conv(x, 16, 64)])])], axis=1)
    x = node("HardSwish", [node("Gemm", [x, weight(32, 64), weight(32)], transB=1)])
    nodes.append(helper.make_node("Gemm", [x, weight(10, 32), weight(10)], ["logits"], name="/classifier", transB=1))
    graph = helper.make_graph(nodes, "mobilenet_v3_like", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                          [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


THREE = pytest.mark.skipif(not all(has_backend(b) for b in ("nnapi", "coreml", "qnn")),
                           reason="needs the nnapi, coreml and qnn backends (tox -e qnn installs them)")


@THREE
def test_check_with_three_backends_opens_the_model_once_and_each_written_view_once(count_sessions, mobile_ep_cli):
    # nnapi and coreml rewrite the 16 Sums alike: their after-convert files are the same bytes, one view
    _ok(mobile_ep_cli("check", LIGHT_DIR / "light_resnet50.onnx", "--ep", "nnapi,coreml,qnn", plugins=None))
    assert len(count_sessions) <= 2, count_sessions


@THREE
def test_check_of_function_ops_kept_whole_for_one_backend(tmp_path, count_sessions, mobile_ep_cli):
    # qnn takes HardSwish whole: the model with it cut out once, the same for each backend alone; nnapi's and
    # coreml's after-convert files differ (nnapi rewrites HardSigmoid)
    path = tmp_path / "mobilenet_v3_like.onnx"
    onnx.save(mobilenet_v3_like(), path)
    _ok(mobile_ep_cli("check", path, "--ep", "nnapi,coreml,qnn", plugins=None))
    assert len(count_sessions) <= 4, count_sessions
    assert count_sessions.count(str(path)) == 1


def test_convert_opens_the_original_once_and_each_written_file_once_per_use(tmp_path, count_sessions, mobile_ep_cli):
    # the original: its basic level, which also gives the reference outputs; the .onnx: as ORT loads it, which
    # also runs it, and its ORT format; the .ort: its run
    source = LIGHT_DIR / "light_resnet50.onnx"
    _ok(mobile_ep_cli("convert", source, "--ep", "nnapi", "-o", tmp_path / "out", plugins=None))
    assert count_sessions.count(str(source)) == 1 and len(count_sessions) <= 4, count_sessions
    before = len(count_sessions)
    _ok(mobile_ep_cli("convert", source, "--ep", "nnapi", "--compile", "-o", tmp_path / "compiled", plugins=None))
    assert len(count_sessions) - before <= 4, count_sessions[before:]  # (the compiled model runs no CPU part)


def test_convert_of_a_model_above_the_keep_limit_holds_one_session_at_a_time(tmp_path, count_sessions,
                                                                              mobile_ep_cli, monkeypatch):
    # a model whose view is larger than KEEP_BYTES: its session is released once written and opened again to
    # run, so a large model's weights are held once; the outcome is the same.  (nnapi takes every node of
    # squeezenet with no rewrite: the .onnx is the view written as it is, opened once, to run)
    from mobile_ep import sessions

    monkeypatch.setattr(sessions, "KEEP_BYTES", 1024)
    source = LIGHT_DIR / "light_squeezenet.onnx"
    _ok(mobile_ep_cli("convert", source, "--ep", "nnapi", "-o", tmp_path / "out", plugins=None))
    assert count_sessions.count(str(source)) == 2 and len(count_sessions) == 5, count_sessions


def test_a_qdq_models_ort_file_is_verified_against_the_float_arithmetic_it_runs_here(tmp_path, count_sessions,
                                                                                      mobile_ep_cli):
    # the .ort records its QDQ fusions for ORT Mobile to replay on the device: loaded here, it runs its QDQ
    # groups in float, as the basic level does, 4 output steps on this model from the integer kernels of
    # onnxruntime's default level; it is compared with the original at the basic level, as the .onnx is
    import quant_models

    path = tmp_path / "ties.onnx"
    onnx.save(quant_models.requantization_ties(), path)
    result = mobile_ep_cli("convert", path, "--ep", "nnapi", "-o", tmp_path / "out", "--json", plugins=None)
    _ok(result)
    checked = json.loads(result.output)["verification"]
    assert {pathlib.Path(v["model"]).suffix for v in checked} == {".onnx", ".ort"}
    assert all(v["ok"] for v in checked), checked
    assert count_sessions.count(str(path)) == 1 and len(count_sessions) <= 4, count_sessions


def test_convert_without_verification_keeps_no_session_to_run(tmp_path, count_sessions, mobile_ep_cli):
    # nothing runs: the original's view, the .onnx as ORT loads it, its ORT format
    _ok(mobile_ep_cli("convert", LIGHT_DIR / "light_resnet50.onnx", "--ep", "nnapi", "--no-verify", "-o",
                        tmp_path / "out", plugins=None))
    assert len(count_sessions) == 3, count_sessions


def test_convert_of_a_model_the_backend_takes_whole_as_it_is_does_not_read_the_written_file_again(
        tmp_path, count_sessions, mobile_ep_cli):
    # nnapi takes every node of squeezenet with no rewrite: the .onnx is the basic-level view written as it is,
    # which that level leaves as it is, so what nnapi takes of it is what was planned, as check's after-convert
    # says (tests/test_after_convert.py holds both to a session's reading of the written file): the original's
    # view and the ORT format
    _ok(mobile_ep_cli("convert", LIGHT_DIR / "light_squeezenet.onnx", "--ep", "nnapi", "--no-verify", "-o",
                      tmp_path / "out", plugins=None))
    assert len(count_sessions) == 2, count_sessions


@pytest.mark.skipif(not has_backend("qnn"), reason="the qnn backend is not installed")
def test_convert_compiled_by_the_qnn_ep(tmp_path, count_sessions, mobile_ep_cli):
    # with, besides convert's, the context binary's run on the HTP simulator (the QNN EP compiles in a child
    # process), checked against the .onnx run by the session that looked at it
    _ok(mobile_ep_cli("convert", LIGHT_DIR / "light_squeezenet.onnx", "--ep", "qnn", "--compile", "-o",
                      tmp_path / "out", plugins=None))
    assert len(count_sessions) <= 5, count_sessions


def test_the_owner_counts_every_session_a_command_builds(tmp_path, count_sessions, mobile_ep_cli):
    from mobile_ep import sessions

    start = sessions.created()
    _ok(mobile_ep_cli("check", LIGHT_DIR / "light_squeezenet.onnx", "--ep", "nnapi", plugins=None))
    assert sessions.created() - start == len(count_sessions) == 1
