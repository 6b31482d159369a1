"""``mobile_ep.check/convert/explain``: the command line from Python, and the README's worked example."""

from __future__ import annotations

import inspect
import pathlib
import re
import sys

import pytest
from test_html import split_model

import mobile_ep
from mepkit import has_backend
from mobile_ep import pipeline as api
from mobile_ep.errors import ModelError, UsageError
from mobile_ep.options import Options
from mobile_ep.reports import explain as explanation
from mobile_ep.reports import model as reports
from mobile_ep.samples import write_sample

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_functions_are_exported_and_lazy():
    assert mobile_ep.check is api.check and mobile_ep.convert is api.convert
    assert mobile_ep.explain is explanation.explain
    for name in ("check", "convert", "explain", "Options"):
        assert name in mobile_ep.__all__
    assert inspect.signature(mobile_ep.check).return_annotation.endswith("CheckReport")
    assert inspect.signature(mobile_ep.convert).return_annotation.endswith("ConvertReport")
    assert inspect.signature(mobile_ep.explain).return_annotation.endswith("ExplainReport")


def test_importing_mobile_ep_does_not_import_the_pipeline():
    import subprocess

    code = "import sys, mobile_ep; print('onnxruntime' in sys.modules, 'mobile_ep.pipeline' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_cli_options_have_python_counterparts():
    """Every check/convert option of the command has a keyword (or is a CLI-only matter): the function's own
    or one of Options.build, which both take."""
    from mobile_ep.cli.main import check, convert

    cli_only = {"as_json", "jobs", "html_path", "models", "option_values", "eps", "shapes", "dims", "ep", "compile_",
                "verbose"}
    built = set(inspect.signature(Options.build).parameters)
    for command, function in ((check, mobile_ep.check), (convert, mobile_ep.convert)):
        keywords = set(inspect.signature(function).parameters) | built
        for param in command.params:
            if param.name not in cli_only:
                assert param.name in keywords, f"{command.name} --{param.name} has no keyword in mobile_ep.{command.name}"
    assert {"ep", "html"} <= set(inspect.signature(mobile_ep.check).parameters)
    assert {"options", "shape", "dim", "strict"} <= built
    assert {"compile", "verify", "seed", "output"} <= set(inspect.signature(mobile_ep.convert).parameters)


def test_check_returns_the_typed_report(tmp_path, plugins):
    path = split_model(tmp_path, blocks=2)
    report = mobile_ep.check(path, ep="toy", plugins=plugins)
    assert isinstance(report, reports.CheckReport)
    assert isinstance(report.backends["toy"], reports.BackendReport)
    assert report.backends["toy"].graph is None  # only recorded for the HTML report
    same = api.check(path, ["toy"], plugins=plugins)
    assert report.as_dict().keys() == same.as_dict().keys()
    assert report.backends["toy"].as_dict() == same.backends["toy"].as_dict()


def test_html_keyword_writes_the_report(tmp_path, plugins):
    path = split_model(tmp_path, blocks=2)
    report = mobile_ep.check(path, ep=["toy"], html=tmp_path / "r.html", plugins=plugins)
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert report.backends["toy"].graph is not None


@pytest.mark.parametrize("options", [{"toy.x": 1}, {"toy": {"x": True}}, {"x": "1"}])
def test_option_forms(options):
    assert Options.build("toy", options=options).backend_options in ({"toy": {"x": "1"}}, {"toy": {"x": "true"}})


def test_cli_option_strings_are_parsed_the_same():
    assert Options.build("nnapi", options=["api_level=29"]) == Options.build("nnapi", options={"api_level": 29})
    assert Options.build("a,b", options=("a.k=v",)).backend_options == {"a": {"k": "v"}}
    with pytest.raises(UsageError, match="expected BACKEND.KEY=VALUE"):
        Options.build("a", options=["nonsense"])


def test_an_options_object_is_taken_as_it_is(tmp_path, plugins):
    built = Options.build(shape="x=1,3,8,8", legalize=False)
    assert Options.build(options=built) is built
    assert Options.build("toy", options=built).backends == ("toy",)


def test_unqualified_option_needs_one_backend():
    with pytest.raises(UsageError, match="name the backend"):
        Options.build(["nnapi", "coreml"], options={"api_level": 29})


@pytest.mark.parametrize("shape, expected", [
    ({"x": [1, 3, 8, 8]}, {"x": (1, 3, 8, 8)}),
    ((1, 3, 8, 8), {None: (1, 3, 8, 8)}),
    ("x=1,3,8,8", {"x": (1, 3, 8, 8)}),
    (["x=1x3x8x8", "y=2"], {"x": (1, 3, 8, 8), "y": (2,)}),
])
def test_shape_forms(shape, expected):
    assert dict(Options.build(shape=shape).shapes) == expected


def test_dim_forms_and_bad_values():
    assert Options.build(dim={"batch": 1}).dims == {"batch": 1}
    assert Options.build(dim="batch=2").dims == {"batch": 2}
    with pytest.raises(UsageError):
        Options.build(shape={"x": [0, 3]})
    with pytest.raises(UsageError):
        Options.build(dim="batch=0")


def test_errors_are_the_commands_errors(tmp_path, plugins):
    with pytest.raises(ModelError) as info:
        mobile_ep.check(tmp_path / "missing.onnx", ep="toy", plugins=plugins)
    assert info.value.exit_code == 3
    with pytest.raises(UsageError):
        mobile_ep.convert(split_model(tmp_path, 1), ep="toy,other", plugins=plugins)


def test_convert_and_explain(tmp_path, plugins):
    path = split_model(tmp_path, blocks=1)
    converted = mobile_ep.convert(path, "toy", tmp_path / "out", plugins=plugins, html=tmp_path / "c.html")
    assert isinstance(converted, reports.ConvertReport) and all(v.ok for v in converted.verification)
    assert (tmp_path / "c.html").exists()
    why = mobile_ep.explain(path, "erf0", ep="toy", plugins=plugins)
    assert isinstance(why, explanation.ExplainReport)
    assert why.backends[0].why == "toy has no rule for Erf"


def _readme_example() -> str:
    readme = (ROOT / "docs" / "usage.md").read_text()  # the Python API section moved from README.md
    section = readme.split("\n## Python API\n", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.skipif(not (has_backend("nnapi") and has_backend("coreml")), reason="the example uses both backends")
def test_the_readme_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_sample(tmp_path)
    exec(compile(_readme_example(), "docs/usage.md", "exec"), {"__name__": "readme_example"})
    out = capsys.readouterr().out
    assert "nnapi: " in out and "coreml: " in out and "wrote out/mobilenet_sample.nnapi.ort" in out
    assert (tmp_path / "report.html").exists()
    assert (tmp_path / "out" / "mobilenet_sample.nnapi.onnx").exists()
