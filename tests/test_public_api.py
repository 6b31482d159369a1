"""The public API: ``mobile_ep.__all__`` and ``mobile_ep.contract.__all__`` are exactly what we promise, and
every module says what it exports.

Changing the public surface is deliberate: update ``PUBLIC_NAMES`` / ``CONTRACT_NAMES`` here (and the plugin
guide), and bump ``PLUGIN_API_VERSION`` when a change breaks existing plugins.  (In the style of ir-py's
public_api_test.)
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import pkgutil

import pytest

import mobile_ep
import mobile_ep.contract

#: ``mobile_ep``'s top-level names: for users and for backend plugin authors.
PUBLIC_NAMES = sorted([
    "__version__", "PLUGIN_API_VERSION", "hookimpl",
    # the command line, from Python (mobile_ep.pipeline, mobile_ep.reports.explain) and its options
    "check", "convert", "explain", "build_llm", "Options",
    # the backend contract
    "Backend", "OpRule", "RuleRegistry", "RuleContext", "NodeUnit", "UnitIO", "PartitionView", "Support",
    "SUPPORTED", "DuplicateRuleError", "Layout", "MAX_OPSET", "DataType", "attr", "op_label",
    # rule texts and option checks (contract.rules, contract.backend)
    "shape_text", "doc_summary", "check_option_types",
    # legalizing rewrites a backend asks for (Backend.rewrites)
    "Rewrite", "Builder", "rewrites",
    # the compile contract (mobile_ep.contract.compile)
    "CompiledPartition", "TensorSpec", "CompileError",
    # errors
    "MobileEpError", "ModelError", "UsageError", "BackendError", "VerificationError", "PluginApiError",
])

#: ``mobile_ep.contract``'s names: the whole plugin contract, the one place plugin authors import it from.
CONTRACT_NAMES = sorted([
    # support answers and node units (contract.support)
    "Support", "SUPPORTED", "NodeUnit", "UnitIO", "Layout", "attr", "op_label",
    # op rules (contract.rules)
    "OpRule", "RuleRegistry", "RuleContext", "DuplicateRuleError", "MAX_OPSET", "shape_text", "doc_summary",
    # backends (contract.backend)
    "Backend", "PartitionView", "RegisterBackend", "CostParams", "check_option_types",
    # the compile contract (contract.compile)
    "CompiledPartition", "TensorSpec", "CompileError", "lower_units", "runtime_inputs", "package_files",
    # legalizing rewrites (contract.rewrite)
    "Rewrite", "Builder",
    # hooks and plugin loading (contract.hookspecs, contract.plugins)
    "hookimpl", "hookspecs", "PluginApiError",
])

#: Modules whose names (their ``__all__``) plugin authors and applications may import
#: (``from mobile_ep.X import ...``); docs/plugins.md lists the same.
PUBLIC_MODULES = ["contract", "contract.compile", "contract.hookspecs", "contract.plugins", "errors",
                  "partitioning.cost", "passes.rewrites", "pipeline", "testing"]

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


def test_contract_all_is_exactly_the_plugin_contract():
    assert sorted(mobile_ep.contract.__all__) == CONTRACT_NAMES
    assert len(set(mobile_ep.contract.__all__)) == len(mobile_ep.contract.__all__), "duplicate names in __all__"


def test_no_public_name_outside_the_contract_all():
    submodules = {name.rsplit(".", 1)[1] for name in _modules() if name.startswith("mobile_ep.contract.")}
    stray = [name for name in vars(mobile_ep.contract) if not name.startswith(("_", "@"))
             and name not in mobile_ep.contract.__all__ and name not in submodules and name != "annotations"]
    assert stray == [], f"public names not in mobile_ep.contract.__all__ (export them or prefix with _): {stray}"


@pytest.mark.parametrize("name", sorted(set(PUBLIC_NAMES) & set(CONTRACT_NAMES)))
def test_top_level_contract_names_are_the_contract_objects(name):
    """``mobile_ep`` re-exports the contract; it defines none of it itself."""
    assert getattr(mobile_ep, name) is getattr(mobile_ep.contract, name)


def test_public_modules_exist_and_declare_all():
    for sub in PUBLIC_MODULES:
        assert hasattr(importlib.import_module(f"mobile_ep.{sub}"), "__all__"), sub


def _exports_nothing(module) -> bool:
    """A package whose ``__init__`` binds no public name but its own subpackages and modules."""
    if not hasattr(module, "__path__"):
        return False
    prefix = module.__name__ + "."
    return all(name.startswith(("_", "@")) or name == "annotations"  # ("@": pytest's assertion rewriting)
               or getattr(getattr(module, name), "__name__", "").startswith(prefix) for name in vars(module))


@pytest.mark.parametrize("module_name", sorted(_modules()))
def test_every_module_declares_all_and_it_resolves(module_name):
    module = importlib.import_module(module_name)
    if _exports_nothing(module) and not hasattr(module, "__all__"):
        return  # a namespace of modules (mobile_ep.cli, mobile_ep.reports, ...): each of them declares its own
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
