"""The pytest fixtures of :mod:`mobile_ep.testing`: a fresh plugin manager for each test, backends registered
for one test, and the ``mobile-ep`` command run against that manager.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from mobile_ep.testing.helpers import as_plugin

__all__ = ["mobile_ep_plugins", "mobile_ep_register", "mobile_ep_cli"]

#: The console script that is the ``mobile-ep`` command (``[project.scripts]`` of mobile-ep).
_COMMAND = "mobile-ep"


@pytest.fixture
def mobile_ep_plugins() -> Iterator[Any]:
    """A fresh plugin manager with no entry-point plugins; whatever a test registers is gone after it."""
    from mobile_ep.contract.plugins import make_plugins

    manager = make_plugins(entry_points=False)
    try:
        yield manager
    finally:
        for plugin_name in manager.plugin_names():
            manager.unregister(name=plugin_name)


@pytest.fixture
def mobile_ep_register(mobile_ep_plugins: Any) -> Callable[..., Any]:
    """``register(backend, ...)`` or ``register(plugin, name=...)``: registered for this test only.

    Returns the plugin manager (the ``mobile_ep_plugins`` fixture), to pass as ``plugins=`` to
    :mod:`mobile_ep.pipeline` functions.
    """

    def register(*items: object, name: str | None = None) -> Any:
        mobile_ep_plugins.register(as_plugin(*items), name=name)
        return mobile_ep_plugins

    return register


def _command() -> Any:
    """The ``mobile-ep`` click command, as installed: the kit runs the command a user runs, through its
    console-script entry point (the kit itself sits below the command line and does not import it)."""
    import importlib.metadata

    found = importlib.metadata.entry_points(group="console_scripts", name=_COMMAND)
    if not found:
        raise RuntimeError(f"the {_COMMAND} command is not installed (no console script {_COMMAND!r}): "
                           "install mobile-ep to use the mobile_ep_cli fixture")
    return next(iter(found)).load()


@pytest.fixture
def mobile_ep_cli(mobile_ep_plugins: Any) -> Callable[..., Any]:
    """``run("check", "model.onnx", "--ep", "mynpu")``: the mobile-ep command with this test's plugins.

    Returns click's ``Result`` (``exit_code``, ``stdout``, ``stderr``).  Keywords: *plugins*, another plugin
    manager to run with, or None for the installed plugins (entry points), as a user's command runs; *input*,
    what the command reads on stdin; *env*, environment variables set for the run; *catch_exceptions*: by
    default an exception the command lets out is raised in the test, with its traceback.
    """
    from click.testing import CliRunner

    command = _command()

    def run(*args: str | os.PathLike, plugins: Any = mobile_ep_plugins, input: str | bytes | None = None,
            env: Mapping[str, str | None] | None = None, catch_exceptions: bool = False) -> Any:
        return CliRunner().invoke(command, [str(a) for a in args], obj=plugins, input=input, env=env,
                                  catch_exceptions=catch_exceptions)

    return run
