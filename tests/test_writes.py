"""Writes: nothing misleading is ever left in the output folder.

After any run, finished or stopped (an error, SIGINT, SIGKILL, a full or read-only disk), the output folder
holds the previous complete set or the new one: ``report.json`` lists each file of its set with size and
sha256, and those are the files beside it.  File-system errors are one line naming the path, exit code 7.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import helper, numpy_helper

from mepkit import make_model, tensor
from mobile_ep import errors
from mobile_ep.cli.main import main
from mobile_ep.writes import STAGING_PREFIX


def matmul_model(path, n, seed=0):
    """x [1, n] @ w [n, n]: *n* = 1500 makes a 9 MB model."""
    w = np.random.default_rng(seed).standard_normal((n, n)).astype(np.float32)
    onnx.save(make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [tensor("x", [1, n])],
                         [tensor("y", [1, n])], [numpy_helper.from_array(w, "w")]), path)
    return path


def _as_from_a_terminal() -> None:
    """In the child before it runs: SIGINT's default action, as a command typed in a terminal has it (a test run
    started in the background by a shell without job control inherits SIGINT ignored, and so would the command)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


_FROM_A_TERMINAL = _as_from_a_terminal if os.name == "posix" else None  # (preexec_fn is POSIX only)


def cli(*args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "mobile_ep.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"},
                            preexec_fn=_FROM_A_TERMINAL, **kwargs)


def a_complete_set(out: pathlib.Path) -> dict[str, str] | None:
    """The set *out* holds (name -> sha256), checked against its report.json; None when it has no report."""
    leftovers = [p for p in out.rglob("*.tmp") if not p.relative_to(out).parts[0].startswith(STAGING_PREFIX)]
    assert not leftovers, leftovers  # (only SIGKILL leaves a staging folder, which the next run removes)
    report = out / "report.json"
    if not report.exists():
        return None
    listed = json.loads(report.read_text())["files"]
    for entry in listed:
        data = (out / entry["path"]).read_bytes()
        assert len(data) == entry["bytes"] and hashlib.sha256(data).hexdigest() == entry["sha256"], entry["path"]
    present = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()
               and not p.relative_to(out).parts[0].startswith(STAGING_PREFIX)}
    assert present == {e["path"] for e in listed} | {"report.json"}, present
    return {e["path"]: e["sha256"] for e in listed}


def test_report_json_comes_last_and_lists_every_output(tmp_path, plugins):
    model = matmul_model(tmp_path / "m.onnx", 8)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["convert", str(model), "--ep", "toy", "-o", str(out)], obj=plugins,
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    files = a_complete_set(out)
    assert set(files) == {"m.toy.onnx", "m.toy.ort"}
    report = json.loads((out / "report.json").read_text())
    assert report["outputs"]["onnx"] == str(out / "m.toy.onnx")
    assert [v["model"] for v in report["verification"]] == [str(out / "m.toy.onnx"), str(out / "m.toy.ort")]
    assert not any(p.name.startswith(STAGING_PREFIX) for p in out.iterdir())


def test_a_new_set_replaces_the_old_one_whole(tmp_path, plugins):
    out = tmp_path / "out"
    first = matmul_model(tmp_path / "a.onnx", 8)
    assert CliRunner().invoke(main, ["convert", str(first), "--ep", "toy", "-o", str(out)], obj=plugins).exit_code == 0
    # a model the ORT format cannot hold: its set has no .ort, and the old model's files go
    w = helper.make_tensor("w", onnx.TensorProto.INT4, [4], [1, -2, 3, -4])
    second = tmp_path / "b.onnx"
    onnx.save(make_model([helper.make_node("DequantizeLinear", ["w", "s"], ["wf"]), helper.make_node("Add", ["x", "wf"], ["y"])],
                         [tensor("x", [4])], [tensor("y", [4])],
                         [w, numpy_helper.from_array(np.array(0.5, np.float32), "s")], opset=21), second)
    result = CliRunner().invoke(main, ["convert", str(second), "--ep", "toy", "-o", str(out)], obj=plugins)
    assert result.exit_code == 0, result.output
    assert set(a_complete_set(out)) == {"b.toy.onnx"}


def test_an_old_report_naming_paths_outside_the_folder_removes_nothing_there(tmp_path, plugins):
    out, keep = tmp_path / "out", tmp_path / "keep"
    out.mkdir()
    keep.mkdir()
    (keep / "precious.txt").write_text("x")
    (out / "notes.txt").write_text("mine")
    (out / "report.json").write_text(json.dumps({"files": [{"path": str(keep)}, {"path": "../keep"}, {"path": "/"}],
                                                 "outputs": {"x": str(keep / "precious.txt")}}))
    model = matmul_model(tmp_path / "m.onnx", 8)
    result = CliRunner().invoke(main, ["convert", str(model), "--ep", "toy", "-o", str(out)], obj=plugins)
    assert result.exit_code == 0, result.output
    assert (keep / "precious.txt").read_text() == "x" and (out / "notes.txt").read_text() == "mine"
    assert {p.name for p in out.iterdir()} == {"m.toy.onnx", "m.toy.ort", "report.json", "notes.txt"}


def wait_for(condition, proc: subprocess.Popen, what: str):
    """Poll *condition* until it holds (the run reached a stage), failing if *proc* ends first."""
    deadline = time.monotonic() + 300
    while not condition():
        assert proc.poll() is None, f"the run ended ({proc.returncode}) before {what}: {proc.stderr.read()}"
        assert time.monotonic() < deadline, f"not seen within 300 s: {what}"
        time.sleep(0.01)


def gone(pid: int) -> None:
    """Wait until process *pid* has ended."""
    deadline = time.monotonic() + 300
    while pathlib.Path(f"/proc/{pid}").exists() and "Z" not in _state(pid):
        assert time.monotonic() < deadline, f"process {pid} still running"
        time.sleep(0.01)


def _state(pid: int) -> str:
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return "Z"


def staging(out: pathlib.Path, but: frozenset[pathlib.Path] = frozenset()) -> list[pathlib.Path]:
    """The staging folders in *out*, *but* those (of earlier runs)."""
    return [p for p in out.iterdir() if p.name.startswith(STAGING_PREFIX) and p not in but] if out.exists() else []


STAGES = {  # what shows that a convert writing *name* has reached each stage, seen from outside (*old*: the
    # staging folders there before it started)
    "writing": lambda out, old, name: bool(staging(out, old)),
    "verifying": lambda out, old, name: any((folder / name).exists() for folder in staging(out, old)),
}


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_sigint_says_interrupted_exits_130_and_leaves_the_old_set(tmp_path, stage):
    out = tmp_path / "out"
    small = matmul_model(tmp_path / "small.onnx", 8)
    done = cli("convert", small, "--ep", "nnapi", "-o", out)
    assert done.wait(300) == 0, done.stderr.read()
    old = a_complete_set(out)
    big = matmul_model(tmp_path / "big.onnx", 2500, seed=1)  # 25 MB: seconds of work after the stage is seen
    proc = cli("convert", big, "--ep", "nnapi", "-o", out)
    wait_for(lambda: STAGES[stage](out, frozenset(), "big.nnapi.onnx"), proc, stage)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "mobile-ep: interrupted"
    assert a_complete_set(out) == old
    assert not list(out.rglob("*.tmp")) and not staging(out)


# A module that stops the program while it is imported: the run waits there (signal.pause) until a signal
# comes, after saying so in a file; the test's stand-in for an import that takes a while.
STOP_IN_IMPORT = """
import os, signal, sys

class _Stop:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ.get("MEP_STOP_IN_IMPORT"):
            sys.meta_path.remove(self)
            with open(os.environ["MEP_STOPPED"], "w") as f:
                f.write(name)
            signal.pause()
        return None

sys.meta_path.insert(0, _Stop())

if os.environ.get("MEP_STOP_AT_EXIT"):  # the process is shutting down: wait there until the test says go on
    import atexit
    import time

    def _wait():
        with open(os.environ["MEP_STOPPED"], "w") as f:
            f.write("exit")
        while not os.path.exists(os.environ["MEP_STOPPED"] + ".go"):  # (a SIGINT handler would raise in here)
            time.sleep(0.01)

    atexit.register(_wait)
"""


@pytest.mark.parametrize("module", ["click", "onnx"])  # the CLI's own imports; the command's
def stopping_cli(tmp_path: pathlib.Path, *args, **stop: str) -> tuple[subprocess.Popen, pathlib.Path]:
    """The CLI with the STOP_IN_IMPORT module loaded at start-up (*stop*: its environment), and the file it
    writes once stopped."""
    hooks = tmp_path / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "sitecustomize.py").write_text(STOP_IN_IMPORT)
    stopped = tmp_path / "stopped"
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "MEP_STOPPED": str(stopped), **stop,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(hooks), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", "mobile_ep.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, preexec_fn=_FROM_A_TERMINAL), stopped


@pytest.mark.parametrize("module", ["click", "onnx"])  # the CLI's own imports; the command's
def test_sigint_while_modules_load_says_interrupted_and_exits_130(tmp_path, module):
    out = tmp_path / "out"
    proc, stopped = stopping_cli(tmp_path, "convert", matmul_model(tmp_path / "m.onnx", 8), "--ep", "nnapi",
                                 "-o", out, MEP_STOP_IN_IMPORT=module)
    wait_for(stopped.exists, proc, f"importing {module}")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines() == ["mobile-ep: interrupted"]
    assert not out.exists() or not any(out.iterdir())


def test_sigint_once_the_command_has_ended_changes_nothing(tmp_path):
    """The command has written its set and printed its report; a Ctrl-C while the process shuts down neither
    kills it (the interpreter puts back the default action then) nor turns its exit code into 130."""
    out = tmp_path / "out"
    proc, stopped = stopping_cli(tmp_path, "convert", matmul_model(tmp_path / "m.onnx", 8), "--ep", "nnapi",
                                 "-o", out, MEP_STOP_AT_EXIT="1")
    wait_for(stopped.exists, proc, "the process shutting down")
    proc.send_signal(signal.SIGINT)
    pathlib.Path(f"{stopped}.go").touch()
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert "interrupted" not in stderr and "Traceback" not in stderr and "Exception" not in stderr, stderr
    assert set(a_complete_set(out)) == {"m.nnapi.onnx", "m.nnapi.ort"} and "nnapi" in stdout


def test_sigkill_leaves_the_old_or_the_new_complete_set(tmp_path):
    out = tmp_path / "out"
    small = matmul_model(tmp_path / "m.onnx", 8)
    assert cli("convert", small, "--ep", "nnapi", "-o", out).wait(300) == 0
    old = a_complete_set(out)
    big_dir = tmp_path / "big"
    big_dir.mkdir()
    big = matmul_model(big_dir / "m.onnx", 2000, seed=2)  # the same output names, other contents
    for stage in ("writing", "verifying"):  # killed at each stage: the old set stays
        earlier = frozenset(staging(out))
        proc = cli("convert", big, "--ep", "nnapi", "-o", out)
        reached = functools.partial(STAGES[stage], out, earlier, "m.nnapi.onnx")
        wait_for(reached, proc, stage)
        proc.kill()
        proc.wait()
        for folder in staging(out, earlier):  # the process that wrote it (the command's own, where it forks) dies too
            gone(int(folder.name[len(STAGING_PREFIX):].partition("-")[0]))
        assert a_complete_set(out) == old
    assert staging(out)  # (what the killed runs left)
    # the next run clears what killed runs left, and its set replaces the old one whole
    assert cli("convert", big, "--ep", "nnapi", "-o", out).wait(300) == 0
    new = a_complete_set(out)
    assert new != old and set(new) == set(old)
    assert not staging(out)


# -- the file system refuses ----------------------------------------------------------------------
def test_output_at_an_existing_file_or_under_one_is_one_line_exit_7(tmp_path, plugins):
    model = matmul_model(tmp_path / "m.onnx", 8)
    afile = tmp_path / "afile"
    afile.write_text("mine")
    for out, cause in ((afile, "exists and is not a folder"), (afile / "sub", "a part of the path is a file")):
        result = CliRunner().invoke(main, ["convert", str(model), "--ep", "toy", "-o", str(out)], obj=plugins)
        assert result.exit_code == errors.EXIT_IO == 7, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"mobile-ep: error: {afile}") and cause in lines[0], lines
    result = CliRunner().invoke(main, ["check", str(model), "--ep", "toy", "--html", str(afile / "r.html")],
                                obj=plugins)
    assert result.exit_code == 7 and len(result.stderr.strip().splitlines()) == 1, result.output
    assert afile.read_text() == "mine"


@contextlib.contextmanager
def tmpfs(folder: pathlib.Path, size: str):
    folder.mkdir()
    if os.name != "posix" or os.geteuid() != 0 or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("needs root and mount (a small tmpfs)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.parametrize("html", [False, True])
def test_a_full_disk_is_one_line_exit_7_and_the_old_set_stays(tmp_path, html):
    with tmpfs(tmp_path / "disk", "1m") as disk:
        out = disk / "out"
        assert cli("convert", matmul_model(tmp_path / "m.onnx", 8), "--ep", "nnapi", "-o", out).wait(300) == 0
        old = a_complete_set(out)
        big = matmul_model(tmp_path / "big.onnx", 700)  # 2 MB
        args = ["check", big, "--ep", "nnapi", "--html", disk / "r.html"] if html else \
            ["convert", big, "--ep", "nnapi", "-o", out]
        if html:  # (fill the disk first: the page is small)
            (disk / "filler").write_bytes(b"\0" * (disk.stat().st_blksize * 8))
            with contextlib.suppress(OSError), open(disk / "filler2", "wb") as f:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
        proc = cli(*args)
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 7, stderr
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and "cannot write: no space left on the device" in lines[0], lines
        assert a_complete_set(out) == old
        assert not any(p.name.startswith(STAGING_PREFIX) for p in out.iterdir())


def test_a_read_only_file_system_is_one_line_exit_7(tmp_path):
    with tmpfs(tmp_path / "disk", "4m") as disk:
        out = disk / "out"
        model = matmul_model(tmp_path / "m.onnx", 8)
        assert cli("convert", model, "--ep", "nnapi", "-o", out).wait(300) == 0
        old = a_complete_set(out)
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        proc = cli("convert", matmul_model(tmp_path / "m2.onnx", 8, seed=3), "--ep", "nnapi", "-o", out)
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 7, stderr
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and "read-only file system" in lines[0] and str(out) in lines[0], lines
        assert a_complete_set(out) == old
