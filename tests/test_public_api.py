"""The public API: ``mobile_ep.__all__`` is exactly what we promise, and every module says what it exports.

Changing the public surface is deliberate: update ``PUBLIC_NAMES`` here (and the plugin guide), and bump
``PLUGIN_API_VERSION`` when a change breaks existing plugins.  (In the style of ir-py's public_api_test.)
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import pkgutil

import pytest

import mobile_ep

#: ``mobile_ep``'s top-level names: for users and for backend plugin authors.
PUBLIC_NAMES = sorted([
    "__version__", "PLUGIN_API_VERSION", "hookimpl",
    # the command line, from Python (mobile_ep.toplevel)
    "check", "convert", "explain",
    # the backend contract
    "Backend", "OpRule", "RuleRegistry", "RuleContext", "NodeUnit", "UnitIO", "PartitionView", "Support",
    "SUPPORTED", "DuplicateRuleError", "Layout", "MAX_OPSET", "DataType", "attr", "op_label",
    # legalizing rewrites a backend asks for (Backend.rewrites)
    "Rewrite", "Builder", "rewrites",
    # the compile contract (mobile_ep.contract.compile)
    "CompiledPartition", "TensorSpec", "CompileError",
    # errors
    "MobileEpError", "ModelError", "UsageError", "BackendError", "VerificationError", "PluginApiError",
])

#: Modules whose names plugin authors and applications may import (``from mobile_ep.X import ...``).
PUBLIC_MODULES = ["api", "capability", "compile", "cost", "errors", "hookspecs", "plugins", "rewrite", "rewrites",
                  "testing"]

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = pathlib.Path(mobile_ep.__file__).parent


def _modules():
    for info in pkgutil.walk_packages(mobile_ep.__path__, "mobile_ep."):
        if not any(part.startswith("_") for part in info.name.split(".")) and info.name != "mobile_ep.cli.main":
            yield info.name


def test_top_level_all_is_exactly_the_public_api():
    assert sorted(mobile_ep.__all__) == PUBLIC_NAMES
    assert len(set(mobile_ep.__all__)) == len(mobile_ep.__all__), "duplicate names in __all__"


def test_every_exported_name_exists():
    for name in mobile_ep.__all__:
        assert hasattr(mobile_ep, name), name


def test_no_public_name_outside_all():
    submodules = {name.split(".")[1] for name in _modules()} | {"ir", "cli", "passes", "qdq"}
    # (names starting with "@" are pytest's assertion rewriting: the package ships a pytest plugin)
    stray = [name for name in vars(mobile_ep) if not name.startswith(("_", "@")) and name not in mobile_ep.__all__
             and name not in submodules and name != "annotations"]
    assert stray == [], f"public names not in mobile_ep.__all__ (export them or prefix with _): {stray}"


@pytest.mark.parametrize("module_name", sorted(_modules()))
def test_every_module_declares_all_and_it_resolves(module_name):
    module = importlib.import_module(module_name)
    assert hasattr(module, "__all__"), f"{module_name} has no __all__"
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing, f"{module_name}.__all__ names missing objects: {missing}"


def test_plugin_api_version_is_a_positive_int():
    assert isinstance(mobile_ep.PLUGIN_API_VERSION, int) and mobile_ep.PLUGIN_API_VERSION >= 1


def _imports_from_mobile_ep(path: pathlib.Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "mobile_ep":
            for alias in node.names:
                yield node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "mobile_ep":
                    yield alias.name, None


def test_the_example_plugin_uses_only_the_public_api():
    """A third-party backend needs nothing private: the example imports only public names."""
    sources = sorted((ROOT / "examples").rglob("*.py"))
    assert sources, "examples/ is missing"
    for path in sources:
        for module, name in _imports_from_mobile_ep(path):
            where = f"{path.relative_to(ROOT)} imports {module}{'.' + name if name else ''}"
            if module == "mobile_ep":
                assert name is None or name in mobile_ep.__all__ or name in PUBLIC_MODULES, where
            else:
                sub = module.split(".", 1)[1]
                assert sub in PUBLIC_MODULES, where
                if name is not None:
                    assert name in importlib.import_module(module).__all__, where
