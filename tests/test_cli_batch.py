"""Many models at once, progress, completion, help texts and the documented exit codes."""

from __future__ import annotations

import io
import json
import pathlib
import re

import pytest
from click.testing import CliRunner
from onnx import helper

from mepkit import LIGHT_DIR, has_backend, make_model, tensor
from mobile_ep import progress
from mobile_ep.cli import batch
from mobile_ep.cli.main import EXIT_CODES_HELP, main
from mobile_ep.errors import EXIT_BAD_MODEL, EXIT_USAGE

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _model(path: pathlib.Path, ops=("Relu", "Sigmoid")) -> pathlib.Path:
    nodes, h = [], "x"
    for i, op in enumerate(ops):
        nodes.append(helper.make_node(op, [h], [f"h{i}"], name=f"{op.lower()}{i}"))
        h = f"h{i}"
    nodes.append(helper.make_node("Relu", [h], ["y"], name="last"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(make_model(nodes, [tensor("x", [1, 4])], [tensor("y", [1, 4])]).SerializeToString())
    return path


@pytest.fixture
def folder(tmp_path):
    models = tmp_path / "models"
    _model(models / "a.onnx")
    _model(models / "b.onnx", ("Relu", "Erf", "Sigmoid"))  # Erf: toy leaves it on CPU, 2 partitions
    _model(models / "nested" / "c.onnx")
    (models / "notes.txt").write_text("not a model")
    return models


def test_a_folder_is_checked_model_by_model_with_a_summary(folder, plugins, mobile_ep_cli):
    result = mobile_ep_cli("check", str(folder), "--ep", "toy", plugins=plugins)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"in {folder}:"
    row_a = next(line for line in lines if line.startswith("a.onnx"))
    row_b = next(line for line in lines if line.startswith("b.onnx"))
    assert row_a.split() == ["a.onnx", "3", "1", "100.0%", "YES", "1p", "YES"]
    assert row_b.split()[:5] == ["b.onnx", "4", "2", "75.0%", "NO"]
    assert not any("c.onnx" in line for line in lines), "folders are not searched recursively"
    assert lines[-1].startswith("2 models: 2 ok, 0 failed")


def test_globs_recurse_and_duplicates_count_once(folder, plugins, mobile_ep_cli):
    result = mobile_ep_cli("check", str(folder / "**" / "*.onnx"), str(folder / "a.onnx"), "--ep", "toy",
                           plugins=plugins)
    assert result.exit_code == 0, result.output
    assert "3 models: 3 ok" in result.stdout
    assert re.search(r"^nested/c\.onnx\s", result.stdout, re.M)


def test_a_bad_model_is_reported_and_the_others_go_on(folder, plugins, mobile_ep_cli):
    (folder / "broken.onnx").write_bytes(b"\x08\x07garbage")
    result = mobile_ep_cli("check", str(folder), "--ep", "toy", plugins=plugins)
    assert result.exit_code == batch.EXIT_SOME_FAILED == 6
    assert "2 ok, 1 failed" in result.stdout
    assert re.search(r"^broken\.onnx\s+FAILED \(exit 3\): .*not a valid ONNX model", result.stdout, re.M)
    errors = result.stderr.strip().splitlines()
    assert errors[0].startswith("mobile-ep: error: ") and "broken.onnx" in errors[0]
    assert errors[-1] == f"mobile-ep: error: 1 of 3 models failed: {folder / 'broken.onnx'}"
    assert "Traceback" not in result.output


def test_missing_files_and_empty_globs(tmp_path, folder, plugins, mobile_ep_cli):
    result = mobile_ep_cli("check", str(folder / "a.onnx"), str(tmp_path / "missing.onnx"), "--ep", "toy",
                           plugins=plugins)
    assert result.exit_code == 6
    assert "FAILED (exit 3): " in result.stdout and "no such file" in result.stdout
    result = mobile_ep_cli("check", str(tmp_path / "none" / "*.onnx"), "--ep", "toy", plugins=plugins)
    assert result.exit_code == EXIT_BAD_MODEL
    assert "no model matches" in result.stderr


def test_parallel_jobs_give_the_same_results(folder, plugins, mobile_ep_cli):
    one = mobile_ep_cli("check", str(folder), "--ep", "toy", "--json", plugins=plugins)
    two = mobile_ep_cli("check", str(folder), "--ep", "toy", "--json", "--jobs", "2", plugins=plugins)
    assert one.exit_code == two.exit_code == 0, two.output
    strip = [{k: v for k, v in m.items() if k != "seconds"} for m in json.loads(one.stdout)["models"]]
    for m in strip:
        m["report"].pop("timings")
    other = [{k: v for k, v in m.items() if k != "seconds"} for m in json.loads(two.stdout)["models"]]
    for m in other:
        m["report"].pop("timings")
    assert strip == other
    assert json.loads(two.stdout)["summary"] == {"models": 2, "ok": 2, "failed": 0}


def test_batch_json_lists_failures_with_their_exit_code(folder, plugins, mobile_ep_cli):
    (folder / "broken.onnx").write_bytes(b"")
    result = mobile_ep_cli("check", str(folder), "--ep", "toy", "--json", plugins=plugins)
    assert result.exit_code == 6
    data = json.loads(result.stdout)
    broken = next(m for m in data["models"] if m["model"].endswith("broken.onnx"))
    assert broken == {"model": broken["model"], "ok": False, "exit_code": 3, "error": broken["error"],
                      "seconds": broken["seconds"]}
    assert data["summary"]["failed"] == 1


def test_batch_html_writes_one_report_per_model_and_an_index(tmp_path, folder, plugins, mobile_ep_cli):
    out = tmp_path / "reports"
    result = mobile_ep_cli("check", str(folder), "--ep", "toy", "--html", str(out), plugins=plugins)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["a.html", "b.html", "index.html"]
    index = (out / "index.html").read_text()
    assert "href='a.html'" in index and "href='b.html'" in index
    result = mobile_ep_cli("check", str(folder), "--ep", "toy", "--html", str(tmp_path / "one.html"),
                           plugins=plugins)
    assert result.exit_code == EXIT_USAGE and "names a folder" in result.stderr


def test_convert_many_writes_a_folder_per_model(tmp_path, plugins, mobile_ep_cli):
    first = _model(tmp_path / "x" / "m.onnx")
    second = _model(tmp_path / "y" / "m.onnx", ("Relu", "Erf"))
    out = tmp_path / "out"
    result = mobile_ep_cli("convert", str(first), str(second), "--ep", "toy", "-o", str(out), plugins=plugins)
    assert result.exit_code == 0, result.output
    assert (out / "m" / "report.json").exists() and (out / "m-2" / "report.json").exists()
    assert (out / "m" / "m.toy.onnx").exists()
    lines = result.stdout.splitlines()
    assert any(line.startswith("x/m.onnx") and line.split()[-1] == "ok" for line in lines), result.stdout
    assert "verify" in lines[2]


@pytest.mark.skipif(not has_backend("nnapi"), reason="needs the NNAPI backend")
def test_the_light_models_folder_in_one_command():
    """The issue's acceptance case: a folder of the light_* models, one command, one summary table."""
    result = CliRunner().invoke(main, ["check", str(LIGHT_DIR), "--ep", "nnapi", "--jobs", "2"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if line.startswith("light_")]
    assert len(rows) == len(list(LIGHT_DIR.glob("*.onnx"))) == 9
    assert "light_resnet50.onnx" in result.stdout and "9 models: 9 ok, 0 failed" in result.stdout


# --------------------------------------------------------------------------------------------------
# Tables fit the terminal
# --------------------------------------------------------------------------------------------------
def _results():
    row = {"nodes": 123, "backends": {name: {"nodes": 123, "claimed": 107, "partitions": 17, "verdict": "NO",
                                             "after": {"nodes": 123, "claimed": 123, "partitions": 1, "verdict": "YES"}}
                                      for name in ("nnapi", "coreml")}}
    return [batch.ModelResult("/very/long/folder/name/with/models/light_resnet50.onnx", True, row=row),
            batch.ModelResult("/very/long/folder/name/with/models/other/broken.onnx", False, 3,
                              "not a valid ONNX model (protobuf parse failed: a long message that goes on and on)")]


@pytest.mark.parametrize("width", [60, 80, 100, 160])
def test_summary_fits_the_width(width):
    text = batch.summary_table(_results(), "check", width=width)
    assert all(len(line) <= width for line in text.splitlines()), text
    assert "resnet50" in text and "FAILED (exit 3)" in text
    if width >= 160:
        assert "after convert" in text
    elif width <= 100:
        assert "after convert" not in text  # dropped to fit


# --------------------------------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------------------------------
class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_drawn_only_on_a_terminal(monkeypatch):
    monkeypatch.delenv("TERM", raising=False)
    assert progress.wants_progress(FakeTerminal())
    assert not progress.wants_progress(io.StringIO())
    assert not progress.wants_progress(FakeTerminal(), quiet=True)
    monkeypatch.setenv("TERM", "dumb")
    assert not progress.wants_progress(FakeTerminal())


def test_terminal_progress_shows_steps_and_loops_then_clears():
    stream = FakeTerminal()
    bar = progress.TerminalProgress(stream, plan=["load", "partition"], interval=0)
    with progress.reporting(bar):
        with progress.step("load"):
            assert "[1/2] loading and folding" in bar.line()
        for i in progress.track(range(4), "models"):
            if i == 2:
                assert "[######" in bar.line() and "2/4 models" in bar.line()
        with progress.step("partition"):
            assert "[2/2] partitioning" in bar.line()
    assert stream.getvalue().endswith("\r")  # the line is wiped at the end
    assert bar.line() == ""


def test_without_a_reporter_nothing_is_printed(capsys):
    with progress.step("load"):
        pass
    assert list(progress.track([1, 2], "x")) == [1, 2]
    assert capsys.readouterr() == ("", "")


def test_cli_output_has_no_progress_when_not_a_terminal(folder, plugins, mobile_ep_cli):
    result = mobile_ep_cli("check", str(folder / "a.onnx"), "--ep", "toy", plugins=plugins)
    assert "\r" not in result.output


# --------------------------------------------------------------------------------------------------
# Help, completion, exit codes
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["check", "convert", "explain", "list", "ops", "conformance", "completion"])
def test_every_command_help_has_examples_or_instructions(command):
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0
    assert "Examples:" in result.output or "Enable it once:" in result.output


def test_completion_scripts_and_backend_names(plugins):
    for shell in ("bash", "zsh", "fish"):
        result = CliRunner().invoke(main, ["completion", shell])
        assert result.exit_code == 0 and "_MOBILE_EP_COMPLETE" in result.output
    from click.shell_completion import ShellComplete

    completer = ShellComplete(main, {}, "mobile-ep", "_MOBILE_EP_COMPLETE")
    assert "check" in [c.value for c in completer.get_completions([], "ch")]
    assert "--jobs" in [c.value for c in completer.get_completions(["check"], "--j")]
    import importlib.metadata

    installed = sorted(ep.name for ep in importlib.metadata.entry_points(group="mobile_ep"))
    offered = [c.value for c in completer.get_completions(["check", "--ep"], "")]
    assert offered == installed
    if installed:
        first = installed[0]
        again = [c.value for c in completer.get_completions(["check", "--ep"], f"{first},")]
        assert first not in [v.split(",")[-1] for v in again]
        assert all(v.startswith(f"{first},") for v in again)


def test_readme_exit_code_table_matches_the_cli():
    readme = (ROOT / "docs" / "reliability.md").read_text()  # the exit-code table moved from README.md
    section = readme.split("## Exit codes", 1)[1].split("\n#", 1)[0]
    documented = {int(m) for m in re.findall(r"^\| (\d+) \|", section, re.M)}
    in_help = {int(m) for m in re.findall(r"^  (\d+)  ", EXIT_CODES_HELP, re.M)}
    assert documented == in_help == {0, 1, 2, 3, 4, 5, 6, 7, 8, 130}
