"""Plugin loading: entry points, the block variable, duplicates, broken plugins, hook validation."""

from __future__ import annotations

import pytest

import mobile_ep
from mepkit import OtherBackend, ToyBackend, ToyPlugin
from mobile_ep.contract import hookspecs
from mobile_ep.contract.plugins import DISABLE_ENV, make_plugins
from mobile_ep.errors import UsageError


def test_register_collects_backends(plugins):
    assert sorted(plugins.backends()) == ["other", "toy"]
    assert plugins.backend("toy").version == "1.0"


def test_unknown_backend_is_a_usage_error(plugins):
    with pytest.raises(UsageError, match="unknown backend 'nope'; available: other, toy"):
        plugins.backend("nope")


def test_duplicate_backend_names_are_reported_not_silently_overwritten():
    pm = make_plugins(entry_points=False, plugins=[ToyPlugin(ToyBackend()), ToyPlugin(ToyBackend())])
    assert list(pm.backends()) == ["toy"]
    assert any("already registered" in e.message for e in pm.errors)


def test_registering_something_else_than_a_backend_fails_by_name():
    class Bad:
        @mobile_ep.hookimpl
        def mobile_ep_register_backends(self, register):
            register("not a backend")

    pm = make_plugins(entry_points=False)
    pm.register(Bad(), name="bad-plugin")
    assert pm.backends() == {}
    assert pm.errors[0].plugin == "bad-plugin"
    assert "not a mobile_ep.Backend" in pm.errors[0].message


def test_a_plugin_raising_during_registration_costs_only_itself():
    class Raises:
        @mobile_ep.hookimpl
        def mobile_ep_register_backends(self, register):
            raise RuntimeError("boom")

    pm = make_plugins(entry_points=False, plugins=[ToyPlugin(OtherBackend())])
    pm.register(Raises(), name="raises")
    assert list(pm.backends()) == ["other"]
    assert [(e.plugin, e.message) for e in pm.errors] == [("raises", "failed to register backends: RuntimeError: boom")]


def test_misspelled_hook_is_caught_by_check_pending():
    class Typo:
        @mobile_ep.hookimpl
        def mobile_ep_register_backend(self, register):  # missing "s"
            pass

    pm = make_plugins(entry_points=False)
    pm.register(Typo(), name="typo")
    assert pm.errors and "mobile_ep_register_backend" in pm.errors[0].message


def test_block_variable_disables_entry_point_plugins(monkeypatch):
    monkeypatch.setenv(DISABLE_ENV, "1")
    pm = make_plugins()
    assert pm.plugin_names() == []
    assert pm.backends() == {}


def test_block_variable_with_names_blocks_only_those(monkeypatch):
    import importlib.metadata

    names = [ep.name for ep in importlib.metadata.entry_points(group="mobile_ep")]
    if not names:
        pytest.skip("no entry-point plugins installed in this environment")
    monkeypatch.setenv(DISABLE_ENV, names[0])
    assert names[0] not in make_plugins().plugin_names()


def test_hookspecs_are_documented():
    for name in dir(hookspecs):
        if name.startswith("mobile_ep_"):
            doc = getattr(hookspecs, name).__doc__ or ""
            assert ":param register:" in doc or ":param" in doc, f"{name} documents no parameter"
