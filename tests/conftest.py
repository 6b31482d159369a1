"""Fixtures for the core tests: a throwaway backend registered per test, the light_* models."""

from __future__ import annotations

import pytest

from mepkit import LIGHT_DIR, OtherBackend, ToyBackend, ToyPlugin
from mobile_ep.contract.plugins import make_plugins


@pytest.fixture
def plugins():
    """A fresh plugin manager with only the toy backends (no entry points)."""
    pm = make_plugins(entry_points=False)
    plugin = ToyPlugin(ToyBackend(), OtherBackend())
    pm.register(plugin, name="toy-plugin")
    try:
        yield pm
    finally:
        pm.unregister(plugin)


@pytest.fixture(scope="session")
def light_dir():
    return LIGHT_DIR
