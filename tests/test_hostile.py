"""Hostile and broken input: one-line errors with exit code 3, external data confined, outputs atomic.

The corpus is generated at test time by ``tests/hostile_corpus.py`` (seeds 0-2 here; the held-out corpus
in ``test_hostile_heldout.py`` uses other seeds).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import stat
import subprocess
import sys

import hostile_corpus
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from mepkit import const, make_model, tensor
from mobile_ep import errors
from mobile_ep import model_io as mir
from mobile_ep.cli.main import main
from mobile_ep.errors import ModelError
from mobile_ep.passes import fold_constants

DEV_SEEDS = (0, 1, 2)
POSIX = os.name == "posix"


def assert_one_line_error(result, case):
    lines = result.stderr.strip().splitlines()
    expected = "mobile-ep: error: " + " ".join(case.message.split())
    assert result.exit_code == case.exit_code, (case.name, result.stderr)
    assert len(lines) == 1, (case.name, result.stderr)
    assert lines[0].startswith(expected), (case.name, lines[0], expected)
    assert "Traceback" not in result.output


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    return {seed: {c.name: c for c in hostile_corpus.generate(root / f"seed{seed}", seed)} for seed in DEV_SEEDS}


def test_the_corpus_is_large_and_tiny(corpus):
    cases = corpus[0]
    assert len(cases) >= 40
    for c in cases.values():
        if c.path.is_file() and not c.path.is_symlink():
            assert c.path.stat().st_size < 64 * 1024, c.name


@pytest.mark.parametrize("seed", DEV_SEEDS)
@pytest.mark.parametrize("name", sorted(hostile_corpus.CASES))
def test_check_gives_the_expected_one_line_error(corpus, plugins, seed, name, mobile_ep_cli):
    case = corpus[seed][name]
    if case.posix_only and not POSIX:
        pytest.skip("POSIX only")
    assert_one_line_error(mobile_ep_cli("check", str(case.path), "--ep", "toy", plugins=plugins), case)


@pytest.mark.parametrize("name", sorted(hostile_corpus.CASES))
def test_convert_gives_the_same_error_and_writes_nothing(corpus, plugins, tmp_path, name, mobile_ep_cli):
    case = corpus[0][name]
    out = tmp_path / "out"
    assert_one_line_error(mobile_ep_cli("convert", str(case.path), "--ep", "toy", "-o", str(out),
                                        plugins=plugins), case)
    assert not out.exists() or not any(out.iterdir())


REAL_PROCESS_CASES = ["truncated_in_graph", "external_symlink_leaving", "constant_of_shape_bomb", "attribute_wrong_type"]


def cli(*args, cwd=None, timeout=300, env=None):
    return subprocess.run([sys.executable, "-m", "mobile_ep.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("name", REAL_PROCESS_CASES)
def test_real_process_with_installed_backends(corpus, name):
    case = corpus[1][name]
    proc = cli("check", str(case.path))
    assert proc.returncode == case.exit_code, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith("mobile-ep: error: " + " ".join(case.message.split())), proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr  # no warnings from onnx or onnxruntime either


def test_debug_shows_the_traceback(corpus, plugins, mobile_ep_cli):
    case = corpus[0]["cycle"]
    with pytest.raises(ModelError, match="must be topologically sorted"):
        mobile_ep_cli("--debug", "check", str(case.path), "--ep", "toy", plugins=plugins)
    proc = cli("--debug", "check", str(case.path), env={"MOBILE_EP_DISABLE_PLUGINS": "1"})
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "ModelError" in proc.stderr


# --------------------------------------------------------------------------------------------------
# Valid but unusual models are not refused (no false positives)
# --------------------------------------------------------------------------------------------------
def _valid_models(folder: pathlib.Path) -> dict[str, pathlib.Path]:
    models: dict[str, onnx.ModelProto] = {}
    models["ir3_initializer_as_input"] = make_model(
        [helper.make_node("Add", ["x", "w"], ["y"])], [tensor("x", [2]), tensor("w", [2])], [tensor("y", [2])],
        [const("w", np.ones(2, np.float32))], opset=9, ir_version=3)
    models["optional_empty_input"] = make_model(
        [helper.make_node("Clip", ["x", "", "hi"], ["y"])], [tensor("x", [3])], [tensor("y", [3])],
        [const("hi", np.array(1.0, np.float32))])
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [tensor("t", [2])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [tensor("e", [2])])
    models["if_reading_outer_scope"] = make_model(
        [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
        [tensor("c", [], TensorProto.BOOL), tensor("x", [2])], [tensor("y", [2])])
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "x"], ["acc_out"]), helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body", [tensor("i", [], TensorProto.INT64), tensor("cond", [], TensorProto.BOOL), tensor("acc", [2])],
        [tensor("cond_out", [], TensorProto.BOOL), tensor("acc_out", [2])])
    models["loop_reading_outer_scope"] = make_model(
        [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body)], [tensor("x", [2])], [tensor("y", [2])],
        [const("n", np.array(3, np.int64))])
    fn = helper.make_function("local", "Twice", ["a"], ["b"],
                              [helper.make_node("Add", ["a", "a"], ["b"])], [helper.make_opsetid("", 13)])
    local = make_model([helper.make_node("Twice", ["x"], ["y"], domain="local")], [tensor("x", [2])],
                       [tensor("y", [2])], extra_opsets=[("local", 1)])
    local.functions.append(fn)
    models["model_local_function"] = local
    models["contrib_op"] = make_model(
        [helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft")], [tensor("x", [4])], [tensor("y", [4])],
        extra_opsets=[("com.microsoft", 1)])
    models["symbolic_dims"] = make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", ["N", 3])],
                                         [tensor("y", ["N", 3])])
    models["zero_sized_initializer"] = make_model(
        [helper.make_node("Concat", ["x", "e"], ["y"], axis=0)], [tensor("x", [2])], [tensor("y", [2])],
        [const("e", np.zeros([0], np.float32))])
    models["ir14"] = make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [2])], [tensor("y", [2])],
                                ir_version=14)
    paths = {}
    for name, proto in models.items():
        (folder / name).mkdir()
        paths[name] = folder / name / "model.onnx"
        paths[name].write_bytes(proto.SerializeToString())
    # external data in a subfolder, at an offset, behind an in-folder directory path, and with IR 14
    for name, ir_version in (("external_data_in_subfolder", 10), ("external_data_ir14", 14)):
        sub = folder / name
        (sub / "weights").mkdir(parents=True)
        w = np.arange(6, dtype=np.float32)
        (sub / "weights" / "w.bin").write_bytes(b"\0" * 64 + w.tobytes())
        t = hostile_corpus.external(numpy_helper.from_array(w, "w"), location="weights/w.bin", offset="64",
                                    length="24")
        proto = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [tensor("x", [6])], [tensor("y", [6])],
                           [t], ir_version=ir_version)
        paths[name] = sub / "model.onnx"
        paths[name].write_bytes(proto.SerializeToString())
    return paths


VALID = ["ir3_initializer_as_input", "optional_empty_input", "if_reading_outer_scope", "loop_reading_outer_scope",
         "model_local_function", "contrib_op", "symbolic_dims", "zero_sized_initializer", "ir14",
         "external_data_in_subfolder", "external_data_ir14"]


@pytest.fixture(scope="module")
def valid_models(tmp_path_factory):
    return _valid_models(tmp_path_factory.mktemp("valid"))


@pytest.mark.parametrize("name", VALID)
def test_valid_unusual_models_are_accepted(valid_models, plugins, tmp_path, name, mobile_ep_cli):
    path = valid_models[name]
    result = mobile_ep_cli("check", str(path), "--ep", "toy", plugins=plugins)
    assert result.exit_code == 0, result.stderr
    result = mobile_ep_cli("convert", str(path), "--ep", "toy", "-o", str(tmp_path / "out"), plugins=plugins)
    assert result.exit_code == 0, result.stderr


# --------------------------------------------------------------------------------------------------
# External data: nothing outside the model's folder is ever opened
# --------------------------------------------------------------------------------------------------
@pytest.mark.skipif(not POSIX, reason="FIFOs and symlinks")
def test_nothing_outside_the_folder_is_opened(tmp_path):
    """Every way out points at a FIFO: whoever opened it would block forever (the timeout would fire).

    With strace installed the test also reads every open() the process made.
    """
    outside = tmp_path / "outside"
    outside.mkdir()
    trap = outside / "trap.bin"
    os.mkfifo(trap)
    os.mkfifo(outside / "w.bin")
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "link.bin").symlink_to(trap)
    (folder / "linkdir").symlink_to(outside, target_is_directory=True)
    locations = {"dotdot": "../outside/trap.bin", "absolute": str(trap), "symlink": "link.bin",
                 "symlinked_dir": "linkdir/w.bin", "deep_dotdot": "a/../../outside/trap.bin"}
    strace = shutil.which("strace")
    for label, location in locations.items():
        t = hostile_corpus.external(numpy_helper.from_array(np.ones(4, np.float32), "w"), location=location)
        proto = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [tensor("x", [4])], [tensor("y", [4])], [t])
        path = folder / f"{label}.onnx"
        path.write_bytes(proto.SerializeToString())
        commands = [["check", str(path)]]
        if label == "symlink":  # convert inspects the same way first; once is enough to show it
            commands.append(["convert", str(path), "--ep", "nnapi", "-o", str(tmp_path / "o")])
        for command in commands:
            log = tmp_path / f"{label}.strace"
            prefix = [strace, "-f", "-qq", "-e", "trace=open,openat,openat2", "-o", str(log)] if strace else []
            proc = subprocess.run([*prefix, sys.executable, "-m", "mobile_ep.cli", *command], capture_output=True,
                                  text=True, timeout=120, env={**os.environ, "MOBILE_EP_DISABLE_PLUGINS": "1"})
            assert proc.returncode == errors.EXIT_BAD_MODEL, (label, proc.stderr)
            assert "external data of initializer 'w' refused" in proc.stderr, (label, proc.stderr)
            if strace:
                opened = [line for line in log.read_text().splitlines()
                          if str(outside) in line or str(folder / "link") in line]
                assert opened == [], (label, opened)


# --------------------------------------------------------------------------------------------------
# Outputs: never over the input, atomic, usual permissions
# --------------------------------------------------------------------------------------------------
@pytest.fixture
def relu_model(tmp_path):
    path = tmp_path / "relu.onnx"
    path.write_bytes(make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [tensor("x", [1, 4])],
                                [tensor("y", [1, 4])]).SerializeToString())
    return path


@pytest.mark.skipif(not POSIX, reason="symlinks")
def test_an_output_symlinked_to_the_input_is_refused(tmp_path, plugins, relu_model, mobile_ep_cli):
    out = tmp_path / "out"
    out.mkdir()
    (out / "relu.toy.onnx").symlink_to(relu_model)
    before = relu_model.read_bytes()
    result = mobile_ep_cli("convert", str(relu_model), "--ep", "toy", "-o", str(out), plugins=plugins)
    assert result.exit_code == errors.EXIT_USAGE
    assert "would overwrite the input model" in result.stderr
    assert relu_model.read_bytes() == before


@pytest.mark.skipif(not POSIX, reason="hard links")
def test_an_output_hard_linked_to_the_input_leaves_the_input_intact(tmp_path, plugins, relu_model, mobile_ep_cli):
    out = tmp_path / "out"
    out.mkdir()
    os.link(relu_model, out / "relu.toy.onnx")  # same inode: writing in place would change the input
    before = relu_model.read_bytes()
    result = mobile_ep_cli("convert", str(relu_model), "--ep", "toy", "-o", str(out), plugins=plugins)
    assert result.exit_code == 0, result.stderr
    assert relu_model.read_bytes() == before  # the output replaced the directory entry, not the inode


def test_a_crash_while_writing_leaves_no_partial_file(tmp_path, plugins, relu_model, monkeypatch):
    from mobile_ep.export import ort_format as export

    out = tmp_path / "out"
    out.mkdir()
    (out / "relu.toy.ort").write_bytes(b"an older output")

    def crash(*args, **kwargs):
        with mir.atomic_path(out / "relu.toy.ort") as tmp:
            tmp.write_bytes(b"half")
            raise KeyboardInterrupt  # as if the process were interrupted mid-write

    monkeypatch.setattr(export, "write_ort", crash)
    result = CliRunner().invoke(main, ["convert", str(relu_model), "--ep", "toy", "-o", str(out)], obj=plugins)
    assert result.exit_code == 130
    assert (out / "relu.toy.ort").read_bytes() == b"an older output"
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.skipif(not POSIX, reason="POSIX permissions")
def test_outputs_get_the_usual_permissions(tmp_path, plugins, relu_model, mobile_ep_cli):
    old = os.umask(0o022)
    try:
        result = mobile_ep_cli("convert", str(relu_model), "--ep", "toy", "-o", str(tmp_path / "out"),
                               plugins=plugins)
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.stderr
    for p in (tmp_path / "out").iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o644, p


def test_ir14_models_reach_onnxruntime_lowered(valid_models, tmp_path):
    optimized = fold_constants.ort_optimized(valid_models["external_data_ir14"], tmp_path)
    session = ort.InferenceSession(str(optimized), providers=["CPUExecutionProvider"])
    x = np.ones(6, np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], x + np.arange(6, dtype=np.float32))


def test_json_mode_prints_nothing_on_stdout_for_a_refused_model(corpus, plugins, mobile_ep_cli):
    result = mobile_ep_cli("check", str(corpus[0]["cycle"].path), "--ep", "toy", "--json", plugins=plugins)
    assert result.exit_code == errors.EXIT_BAD_MODEL
    assert result.stdout == ""  # nothing half-printed for a JSON consumer


# --------------------------------------------------------------------------------------------------
# The inspection as a library function
# --------------------------------------------------------------------------------------------------
def test_inspect_proto_in_memory_never_looks_at_files():
    t = hostile_corpus.external(numpy_helper.from_array(np.ones(2, np.float32), "w"), location="w.bin")
    proto = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [tensor("x", [2])], [tensor("y", [2])], [t])
    mir.inspect_proto(proto)  # no folder: the file is not looked for
    bad = hostile_corpus.external(numpy_helper.from_array(np.ones(2, np.float32), "w"), location="../w.bin")
    proto = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [tensor("x", [2])], [tensor("y", [2])], [bad])
    with pytest.raises(ModelError, match=r"^m: external data of initializer 'w' refused: location '../w.bin'"):
        mir.inspect_proto(proto, label="m")
