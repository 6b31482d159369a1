"""A native crash of onnxruntime during a command: one line naming the model and the step, exit code 8, no
partial output (:mod:`mobile_ep.cli.crash`).

The crash is real: onnxruntime 1.32 dies of SIGSEGV while its basic optimizations inline ``If`` nodes whose
conditions become constant one after the other — the pattern of silero VAD's model (``silero_vad.onnx`` of
the silero-vad 6.2.3 wheel) once its sample rate ``sr`` is a constant: the branch of the sample rate holds an
``If`` on the state's batch dim (constant once shapes are fixed), whose branches hold an ``If`` on the rank
of a value computed outside them.  ``--const sr=16000`` no longer hands onnxruntime that model (mobile-ep
takes the branch itself, :func:`mobile_ep.passes.const_inputs.fold_constant_ifs`); a model shipped with the
constant in it still crashes onnxruntime.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from mobile_ep.cli.crash import EXIT_CRASH
from mobile_ep.writes import STAGING_PREFIX

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="crash supervision is Linux-only")

F = TensorProto.FLOAT


def _const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value)))


def _value(name, shape=None):
    return helper.make_tensor_value_info(name, F, shape)


def _rank_branch(p: str) -> onnx.GraphProto:
    """``If(rank(v) != 2)``: Unsqueeze(v) / Identity(v), then a Relu (``v`` is from two scopes up)."""
    then = helper.make_graph([_const(p + "ax", np.array([0], np.int64)), helper.make_node("Unsqueeze", ["v", p + "ax"], [p + "u"])],
                             p + "t3", [], [_value(p + "u")])
    other = helper.make_graph([helper.make_node("Identity", ["v"], [p + "i3"])], p + "e3", [], [_value(p + "i3")])
    nodes = [helper.make_node("Shape", ["v"], [p + "s2"]), helper.make_node("Size", [p + "s2"], [p + "z2"]),
             _const(p + "two", np.int64(2)), helper.make_node("Equal", [p + "z2", p + "two"], [p + "eq2"]),
             helper.make_node("Not", [p + "eq2"], [p + "n2"]),
             helper.make_node("Cast", [p + "n2"], [p + "cb2"], to=TensorProto.BOOL),
             helper.make_node("If", [p + "cb2"], [p + "w"], then_branch=then, else_branch=other),
             helper.make_node("Relu", [p + "w"], [p + "o2"])]
    return helper.make_graph(nodes, p + "b2", [], [_value(p + "o2")])


def nested_constant_ifs(sr: int | None = None) -> onnx.ModelProto:
    """Inputs ``x`` [1,4], ``st`` [2,1,4], ``sr`` (int64 scalar); ``If(sr == 16000)`` whose then-branch
    squeezes ``x`` by an ``If`` on its first dim and branches on ``bool(st.shape[0])``.

    With *sr*, ``sr`` is an initializer of that value instead of an input.  (The names are those of the
    case found to crash every time: the fault is a use after free, whose outcome depends on how the names
    hash.)"""
    squeeze = helper.make_graph([_const("sax", np.array([0], np.int64)), helper.make_node("Squeeze", ["r", "sax"], ["sq"])],
                                "sq", [], [_value("sq")])
    keep = helper.make_graph([helper.make_node("Identity", ["r"], ["idn"])], "idn", [], [_value("idn")])
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Shape", ["r"], ["sr0"]),
             _const("j0", np.array(0, np.int64)), helper.make_node("Gather", ["sr0", "j0"], ["gr"]),
             _const("one", np.int64(1)), helper.make_node("Equal", ["gr", "one"], ["eqr"]),
             helper.make_node("If", ["eqr"], ["v"], then_branch=squeeze, else_branch=keep),
             helper.make_node("Shape", ["st"], ["s1"]), _const("i0", np.array([0], np.int64)),
             helper.make_node("Gather", ["s1", "i0"], ["g1"]), _const("ax0", np.array([0], np.int64)),
             helper.make_node("Squeeze", ["g1", "ax0"], ["q1"]),
             helper.make_node("Cast", ["q1"], ["cb1"], to=TensorProto.BOOL),
             helper.make_node("If", ["cb1"], ["t_out"], then_branch=_rank_branch("a"), else_branch=_rank_branch("b"))]
    sr16k = helper.make_graph(nodes, "t1", [], [_value("t_out")])
    sr8k = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["e_out"])], "e1", [], [_value("e_out")])
    graph = helper.make_graph(
        [_const("k", np.int64(16000)), helper.make_node("Equal", ["sr", "k"], ["cnd"]),
         helper.make_node("If", ["cnd"], ["y"], then_branch=sr16k, else_branch=sr8k)],
        "g", [_value("x", [1, 4]), _value("st", [2, 1, 4]), helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
        [_value("y")])
    if sr is not None:
        graph.input.pop()
        graph.initializer.append(numpy_helper.from_array(np.array(sr, np.int64), "sr"))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], ir_version=8)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "mobile_ep.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONWARNINGS": "ignore"})


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("mobile-ep: error")]


@pytest.fixture
def crashing(tmp_path):
    path = tmp_path / "vad_ifs.onnx"
    onnx.save(nested_constant_ifs(sr=16000), path)
    return path


@pytest.mark.parametrize("command", ["check", "convert"])
def test_an_onnxruntime_crash_is_one_line_naming_the_model_and_the_step(tmp_path, crashing, command):
    args = [command, crashing, "--ep", "nnapi"]
    proc = cli(*args, *(["-o", tmp_path / "out"] if command == "convert" else []))
    assert proc.returncode == EXIT_CRASH == 8, (proc.returncode, proc.stderr)
    (line,) = _errors(proc.stderr)
    assert line.startswith(f"mobile-ep: error: {crashing}: onnxruntime crashed (SIGSEGV) at step "), line
    assert 'step "loading and folding' in line, line
    assert "Traceback" not in proc.stderr and "Fatal Python error" not in proc.stderr, proc.stderr
    assert proc.stdout == ""


def test_a_crash_in_convert_leaves_the_previous_output_set(tmp_path, crashing):
    good = tmp_path / "good.onnx"
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [_value("x", [1, 4])],
                                                  [_value("y", [1, 4])]),
                                opset_imports=[helper.make_opsetid("", 13)], ir_version=8), good)
    out = tmp_path / "out"
    assert cli("convert", good, "--ep", "nnapi", "-o", out).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    proc = cli("convert", crashing, "--ep", "nnapi", "-o", out)
    assert proc.returncode == EXIT_CRASH, proc.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # (no staging folder, no vad_ifs.* file)
    assert not any(p.name.startswith(STAGING_PREFIX) for p in out.iterdir())
    assert json.loads((out / "report.json").read_text())["model"].endswith("good.onnx")


def test_a_model_that_does_not_crash_runs_as_before_in_the_supervised_child(tmp_path):
    """``sr`` left an input: onnxruntime cannot fold the ``If`` away and loads the model; exit codes pass
    through the parent."""
    path = tmp_path / "vad_ifs.onnx"
    onnx.save(nested_constant_ifs(), path)
    proc = cli("check", path, "--ep", "nnapi")
    assert proc.returncode == 0, proc.stderr
    assert cli("check", tmp_path / "missing.onnx", "--ep", "nnapi").returncode == 3


@pytest.mark.parametrize("ep", ["nnapi", "coreml"])
def test_const_takes_the_branch_itself_where_onnxruntime_would_crash_inlining_it(tmp_path, ep):
    """``--const sr=16000``: mobile-ep inlines the ``If`` on ``sr`` before onnxruntime sees the model, which
    then folds the inner ones without crashing; the result verifies against the original."""
    path = tmp_path / "vad_ifs.onnx"
    onnx.save(nested_constant_ifs(), path)
    out = tmp_path / "out"
    proc = cli("convert", path, "--ep", ep, "--const", "sr=16000", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("matches the original") == 2, proc.stdout
    written = onnx.load(out / f"vad_ifs.{ep}.onnx")
    assert [i.name for i in written.graph.input] == ["x", "st"]
    assert not [n for n in written.graph.node if n.op_type == "If"]


def rate_branches() -> onnx.ModelProto:
    """``If(sr == 16000)``: Relu(x), else Reshape(x, [-1, 3]), which breaks once ``x`` is [1, 4]."""
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "sr16k", [], [_value("t")])
    other = helper.make_graph([_const("shape", np.array([-1, 3], np.int64)),
                               helper.make_node("Reshape", ["x", "shape"], ["e"])], "sr8k", [], [_value("e")])
    graph = helper.make_graph(
        [_const("k", np.int64(16000)), helper.make_node("Equal", ["sr", "k"], ["c"]),
         helper.make_node("If", ["c"], ["y"], name="by_rate", then_branch=then, else_branch=other)],
        "g", [_value("x", ["n", "m"]), helper.make_tensor_value_info("sr", TensorProto.INT64, [])], [_value("y")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], ir_version=8)


def test_a_branch_that_breaks_once_dims_are_fixed_names_the_const_that_keeps_only_the_other(tmp_path):
    path = tmp_path / "rates.onnx"
    onnx.save(rate_branches(), path)
    proc = cli("check", path, "--ep", "nnapi", "--shape", "x=1,4")
    assert proc.returncode == 3, proc.stderr
    (line,) = _errors(proc.stderr)
    assert line.startswith(f"mobile-ep: error: {path}: fixing input shapes (--shape x=1,4): "), line
    assert "an If (by_rate) branches on input 'sr': fix it with --const sr=16000" in line, line
    proc = cli("convert", path, "--ep", "nnapi", "--shape", "x=1,4", "--const", "sr=16000", "-o", tmp_path / "out")
    assert proc.returncode == 0 and proc.stdout.count("matches the original") == 2, proc.stdout + proc.stderr


def _relu_model(path):
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [_value("x", [1, 4])],
                                                  [_value("y", [1, 4])]),
                                opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_crash_in_a_batch_is_that_models_failure_alone(tmp_path, crashing, jobs):
    """Each model of a batch runs in a process of its own: the crash is the crashing model's one line and exit
    code 8 in the summary; the models beside it (in the same pool, before and after it) are checked."""
    first, last = _relu_model(tmp_path / "first.onnx"), _relu_model(tmp_path / "last.onnx")
    proc = cli("check", first, crashing, last, "--ep", "nnapi", "--jobs", jobs, "--json")
    assert proc.returncode == 6, (proc.returncode, proc.stderr)
    models = {pathlib.Path(m["model"]).name: m for m in json.loads(proc.stdout)["models"]}
    assert models["first.onnx"]["ok"] and models["last.onnx"]["ok"], models
    failed = models["vad_ifs.onnx"]
    assert failed["exit_code"] == EXIT_CRASH
    assert failed["error"].startswith(f"{crashing}: onnxruntime crashed (SIGSEGV) at step \"loading and folding"), failed
    crash_lines = [line for line in _errors(proc.stderr) if "crashed" in line]
    assert crash_lines == [f"mobile-ep: error: {failed['error']}"], proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_crash_in_a_batch_convert_leaves_no_files_of_that_model(tmp_path, crashing):
    good = _relu_model(tmp_path / "good.onnx")
    out = tmp_path / "out"
    proc = cli("convert", crashing, good, "--ep", "nnapi", "-o", out, "--jobs", "2")
    assert proc.returncode == 6, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["good"]  # (a folder per model; none for the crashed one)
    assert (out / "good" / "good.nnapi.onnx").is_file()
    assert not [p for p in out.rglob("*") if p.name.startswith(("vad_ifs", STAGING_PREFIX))]
    assert "vad_ifs.onnx: onnxruntime crashed (SIGSEGV)" in proc.stderr, proc.stderr
