"""The plugin author guide (docs/plugins.md) says what the code does: every hook with its exact signature,
every Backend method, the compile contract and the test kit; and its quick start works when followed
literally, outside this repository (datasette-style documentation tests)."""

from __future__ import annotations

import importlib.util
import inspect
import os
import pathlib
import re
import subprocess
import sys

import pytest

import mobile_ep
from mobile_ep.contract import compile as compile_contract
from mobile_ep.contract import hookspecs

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "plugins.md"


@pytest.fixture(scope="module")
def guide():
    return GUIDE.read_text()


def hook_names():
    return sorted(name for name, obj in vars(hookspecs).items()
                  if name.startswith("mobile_ep_") and inspect.isfunction(obj))


def signature(func) -> str:
    """``name(param: Annotation, ...) -> Return``, annotations as written in the source."""
    sig = inspect.signature(func)
    params = ", ".join(f"{p.name}: {p.annotation}" if p.annotation is not p.empty else p.name
                       for p in sig.parameters.values())
    ret = "" if sig.return_annotation is sig.empty else f" -> {sig.return_annotation}"
    return f"{func.__name__}({params}){ret}".replace("'", "")


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    following = re.search(r"^#{1,3} ", text[start + len(heading):], re.M)
    return text[start:start + len(heading) + (following.start() if following else len(text))]


def test_there_are_hooks():
    assert hook_names() == ["mobile_ep_quantization_config", "mobile_ep_register_backends"]


@pytest.mark.parametrize("name", hook_names())
def test_every_hook_is_documented_with_its_exact_signature(guide, name):
    heading = f"### `{signature(getattr(hookspecs, name))}`"
    assert heading in guide, f"docs/plugins.md needs the heading {heading}"
    body = section(guide, heading)
    for param in inspect.signature(getattr(hookspecs, name)).parameters:
        assert f"`{param}(" in body or f"`{param}`" in body, f"{name}: parameter {param!r} is not described"


@pytest.mark.parametrize("method", sorted(n for n, v in vars(mobile_ep.Backend).items()
                                          if not n.startswith("_") and callable(v) and n != "Options"))
def test_every_backend_method_is_documented(guide, method):
    assert f"`{method}(" in guide, f"Backend.{method} is not in docs/plugins.md"


@pytest.mark.parametrize("name", ["name", "version", "description", "preferred_layout", "Options", "plugin_api"])
def test_every_backend_attribute_is_documented(guide, name):
    assert f"| `{name}` |" in guide


@pytest.mark.parametrize("method", compile_contract.COMPILE_METHODS)
def test_compile_contract_is_documented(guide, method):
    assert f"`{method}(" in guide


@pytest.mark.parametrize("name", ["mobile_ep_plugins", "mobile_ep_register", "mobile_ep_cli", "conformance_suite",
                                  "BackendConformance", "run_conformance", "--mobile-ep-report", "node_support",
                                  "supports_all", "registered", "PLUGIN_API_VERSION", "PluginApiError",
                                  "MOBILE_EP_CACHE_DIR", "MOBILE_EP_DISABLE_PLUGINS", "--strict"])
def test_kit_and_versioning_are_documented(guide, name):
    assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", guide), name


def _resolve(dotted: str) -> object:
    """The module or attribute *dotted* names (``mobile_ep.contract.compile.runtime_inputs``)."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(dotted)


def test_every_module_path_in_the_guide_exists(guide):
    """The guide names modules by their import path (``mobile_ep.contract.hookspecs``) or file
    (``core/mobile_ep/contract/hookspecs.py``): each one is still there after the code moves."""
    dotted = sorted(set(re.findall(r"\bmobile_ep(?:\.[A-Za-z_]\w*)+", guide)))
    assert "mobile_ep.contract" in dotted
    missing = []
    for name in dotted:
        try:
            _resolve(name)
        except (ImportError, AttributeError):
            missing.append(name)
    assert not missing, f"docs/plugins.md names what does not exist: {missing}"
    files = sorted(set(re.findall(r"\bcore/mobile_ep/[\w/]+\.py\b", guide)))
    assert [f for f in files if not (ROOT / f).is_file()] == []


def test_plugin_api_version_in_the_guide_is_current(guide):
    assert f"(an int, now `{mobile_ep.PLUGIN_API_VERSION}`)" in guide


def test_readme_points_to_the_guide():
    readme = (ROOT / "README.md").read_text()
    assert "docs/plugins.md" in readme and "thirdparty" in readme


# -- the quick start, followed literally -------------------------------------------------------------------
def quick_start_files(text: str) -> dict[str, str]:
    """``<!-- file: path -->`` followed by a fenced block: the files a reader creates."""
    pattern = re.compile(r"<!-- file: (?P<path>[^ ]+) -->\n```[a-z]*\n(?P<body>.*?)```", re.S)
    return {m["path"]: m["body"] for m in pattern.finditer(text)}


def test_quick_start_has_the_files_it_promises(guide):
    assert sorted(quick_start_files(guide)) == ["mynpu/__init__.py", "mynpu/plugin.py", "pyproject.toml",
                                                "tests/test_mynpu.py"]


def _can_build_wheels_here() -> bool:
    """setuptools >= 70.1 builds wheels itself; older ones need the `wheel` package."""
    import importlib.metadata

    try:
        installed = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    version = tuple(int(p) for p in re.findall(r"\d+", installed)[:2])
    return version >= (70, 1) or importlib.util.find_spec("wheel") is not None


def run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)


@pytest.mark.skipif(importlib.util.find_spec("pip") is None, reason="pip is not available")
def test_quick_start_backend_installs_lists_and_passes_conformance(guide, tmp_path):
    """Write the guide's files outside the repo, pip-install them, then run `mobile-ep list` and the tests."""
    project = tmp_path / "mynpu-folder"
    for path, body in quick_start_files(guide).items():
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text(body)
    site = tmp_path / "site"
    isolation = ["--no-build-isolation"] if _can_build_wheels_here() else []  # else pip fetches setuptools
    install = run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *isolation, "--target",
                   str(site), str(project)])
    assert install.returncode == 0, install.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    env.pop("MOBILE_EP_DISABLE_PLUGINS", None)

    listed = run([sys.executable, "-m", "mobile_ep.cli", "--strict", "list"], env=env, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    (line,) = [ln for ln in listed.stdout.splitlines() if ln.startswith("mynpu ")]
    assert line == "mynpu      0.1.0    NCHW     2 ops  mynpu 0.1.0"

    tests = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], env=env, cwd=project)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    summary = next(ln for ln in tests.stdout.splitlines() if ln.startswith("mynpu 0.1.0: "))
    assert " 0 failed" in summary and "; 1 real model, 0 failed" in summary, summary
    claimed = int(re.search(r"(\d+) claimed", summary)[1])
    passed = int(re.search(r"(\d+) passed", summary)[1])
    assert claimed == passed > 0, summary
    assert summary in GUIDE.read_text(), f"the guide shows another summary than the real one: {summary}"
