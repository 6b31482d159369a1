"""Hook specifications of mobile-ep: the whole plugin API in one place.

A plugin is a module (or an object) with functions named like the hooks below and decorated with
:data:`mobile_ep.hookimpl`, published through the ``mobile_ep`` entry-point group::

    # pyproject.toml of your plugin
    [project.entry-points.mobile_ep]
    mybackend = "mybackend_package.plugin"

Hooks are grouped by when mobile-ep calls them.  Every parameter is documented; plugins may accept a
subset of the parameters, by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from mobile_ep.contract.backend import RegisterBackend

__all__ = ["PROJECT_NAME", "hookspec", "hookimpl", "mobile_ep_register_backends"]

#: The pluggy project name, the marker name and the entry-point group: one name for all three.
PROJECT_NAME = "mobile_ep"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# --------------------------------------------------------------------------------------------------
# Start-up: collecting what plugins provide
# --------------------------------------------------------------------------------------------------
@hookspec
def mobile_ep_register_backends(register: RegisterBackend) -> None:
    """Register the backends this plugin provides.

    :param register: call ``register(backend)`` once for each :class:`mobile_ep.Backend` instance.
        mobile-ep validates the backend (a unique name, a rule registry, a compatible
        ``plugin_api``) when you call it and raises :class:`mobile_ep.BackendError` (or its subclass
        :class:`mobile_ep.PluginApiError`) for an invalid one.

    Called once per plugin manager, when the backends are first needed.  Return nothing.
    """
