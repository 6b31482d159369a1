"""Plugin API versions and broken plugins: each is reported by name, never takes the CLI down, and is an
error (exit code 5) with ``--strict``.

The plugins here are real entry points: a throwaway ``site`` folder with a ``*.dist-info`` declaring them
goes on ``sys.path``, so they load exactly as an installed third-party plugin does.
"""

from __future__ import annotations

import textwrap

import pytest
from onnx import TensorProto, helper

import mobile_ep
from mobile_ep import errors
from mobile_ep.contract.plugins import PluginApiError, check_plugin_api, make_plugins

GOOD_BACKEND = """
import mobile_ep

class Rule(mobile_ep.OpRule):
    op_types = ("Relu",)

    def check(self, unit, ctx):
        '''always'''
        return mobile_ep.SUPPORTED

class Backend(mobile_ep.Backend):
    name = "{name}"
    plugin_api = {api}

    def build_rules(self):
        return mobile_ep.RuleRegistry([Rule()])
"""

PLUGINS = {
    # entry-point name: module source
    "healthy": GOOD_BACKEND.format(name="healthy", api="mobile_ep.PLUGIN_API_VERSION") + """
@mobile_ep.hookimpl
def mobile_ep_register_backends(register):
    register(Backend())
""",
    "import_error": "import vendor_sdk_that_is_not_installed\n",
    "bad_signature": """
import mobile_ep

@mobile_ep.hookimpl
def mobile_ep_register_backends(reg):
    pass
""",
    "misspelled": """
import mobile_ep

@mobile_ep.hookimpl
def mobile_ep_register_backend(register):
    pass
""",
    "future_api": GOOD_BACKEND.format(name="future", api="99") + """
@mobile_ep.hookimpl
def mobile_ep_register_backends(register):
    register(Backend())
""",
    "rule_raises": GOOD_BACKEND.format(name="raises", api="1").replace(
        "return mobile_ep.SUPPORTED", "raise ZeroDivisionError('division by zero in the vendor SDK')") + """
@mobile_ep.hookimpl
def mobile_ep_register_backends(register):
    register(Backend())
""",
}


def install(site, names):
    """Write fake installed distributions, one per plugin, into *site*."""
    for name in names:
        module = f"mep_test_{name}"
        (site / f"{module}.py").write_text(textwrap.dedent(PLUGINS[name]))
        dist = site / f"mep_test_{name}-1.0.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: mep-test-{name}\nVersion: 1.0\n")
        (dist / "entry_points.txt").write_text(f"[mobile_ep]\n{name} = {module}\n")


@pytest.fixture
def site(tmp_path, monkeypatch):
    """Install plugins for one test: ``site(*names)``; only these and the real installed ones are found."""
    folder = tmp_path / "site"
    folder.mkdir()

    def add(*names):
        install(folder, names)
        monkeypatch.syspath_prepend(str(folder))
        return folder

    yield add
    import sys

    for name in PLUGINS:
        sys.modules.pop(f"mep_test_{name}", None)


def only(plugins, name):
    return [e for e in plugins.errors if e.plugin == name]


# -- plugin API versions -------------------------------------------------------------------------------
class Api(mobile_ep.Backend):
    name = "api"

    def build_rules(self):
        return mobile_ep.RuleRegistry()


@pytest.mark.parametrize("declared", [None, mobile_ep.PLUGIN_API_VERSION, (1, mobile_ep.PLUGIN_API_VERSION),
                                      (mobile_ep.PLUGIN_API_VERSION, mobile_ep.PLUGIN_API_VERSION + 3)])
def test_compatible_declarations(monkeypatch, declared):
    monkeypatch.setattr(Api, "plugin_api", declared)
    check_plugin_api(Api())


@pytest.mark.parametrize(("declared", "message"), [
    (99, "backend 'api' needs mobile-ep plugin API 99, but mobile-ep 0.1.0 provides plugin API 1: "
         "upgrade mobile-ep"),
    ((0, 0), "needs mobile-ep plugin API 0, but mobile-ep 0.1.0 provides plugin API 1: upgrade the plugin, "
             "or use an older mobile-ep"),
    ((5, 7), "needs mobile-ep plugin API 5 to 7"),
    ("1", "declares plugin_api='1'; expected an int or an (min, max) tuple of ints"),
    (True, "declares plugin_api=True"),
    ((3, 1), "declares plugin_api=(3, 1)"),
])
def test_incompatible_declarations_raise_a_named_error(monkeypatch, declared, message):
    monkeypatch.setattr(Api, "plugin_api", declared)
    with pytest.raises(PluginApiError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_plugin_api(Api())


def test_plugin_api_error_is_a_backend_error_with_exit_code_5():
    assert issubclass(mobile_ep.PluginApiError, mobile_ep.BackendError)
    assert mobile_ep.PluginApiError("x").exit_code == errors.EXIT_BACKEND


# -- broken plugins, loaded through entry points --------------------------------------------------------
def test_each_broken_plugin_is_reported_by_name_and_costs_only_itself(site):
    site(*PLUGINS)
    plugins = make_plugins()
    assert "healthy" in plugins.backends() and "raises" in plugins.backends()
    assert "future" not in plugins.backends()
    (load,) = only(plugins, "import_error")
    assert load.message == ("failed to load: ModuleNotFoundError: No module named "
                            "'vendor_sdk_that_is_not_installed'")
    (signature,) = only(plugins, "bad_signature")
    assert signature.message.startswith("has an invalid hook: ") and "'reg'" in signature.message
    (typo,) = only(plugins, "misspelled")
    assert typo.message.startswith("implements unknown hook 'mobile_ep_register_backend' (known hooks: "
                                   "mobile_ep_quantization_config, mobile_ep_register_backends")
    (api,) = only(plugins, "future_api")
    assert isinstance(api.error, PluginApiError)
    assert api.message == ("failed to register backends: plugin 'future_api': backend 'future' needs mobile-ep "
                           "plugin API 99, but mobile-ep 0.1.0 provides plugin API 1: upgrade mobile-ep")
    assert all("\n" not in e.message for e in plugins.errors)


@pytest.mark.parametrize("name", ["import_error", "bad_signature", "misspelled", "future_api"])
def test_cli_warns_and_goes_on_then_strict_exits_5(site, name, mobile_ep_cli):
    site("healthy", name)
    result = mobile_ep_cli("list", plugins=None)
    assert result.exit_code == 0, result.output
    assert "healthy" in result.stdout
    assert f"mobile-ep: warning: plugin {name!r} " in result.stderr
    strict = mobile_ep_cli("--strict", "list", plugins=None)
    assert strict.exit_code == errors.EXIT_BACKEND
    lines = strict.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mobile-ep: error: plugin {name!r} ")
    assert "Traceback" not in strict.output


@pytest.fixture
def relu_model(tmp_path):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = tmp_path / "relu.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                                       ir_version=8).SerializeToString())
    return path


def test_a_rule_that_raises_is_reported_by_backend_and_node(site, relu_model, caplog, mobile_ep_cli):
    site("healthy", "rule_raises")
    result = mobile_ep_cli("check", str(relu_model), "--ep", "raises,healthy", "--json", plugins=None)
    assert result.exit_code == 0, result.output
    import json

    report = json.loads(result.stdout)
    (unsupported,) = report["backends"]["raises"]["unsupported"]
    assert "raises failed on this node (ZeroDivisionError: division by zero in the vendor SDK)" in unsupported["reason"]
    assert report["backends"]["healthy"]["supported_nodes"] == 1
    assert "backend raises raised ZeroDivisionError on Relu node 'relu'" in caplog.text  # a warning
    strict = mobile_ep_cli("--strict", "check", str(relu_model), "--ep", "raises", plugins=None)
    assert strict.exit_code == errors.EXIT_BACKEND
    assert strict.stderr.strip() == ("mobile-ep: error: backend 'raises' raised ZeroDivisionError on Relu node "
                                     "'relu': division by zero in the vendor SDK")
