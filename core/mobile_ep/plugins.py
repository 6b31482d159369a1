"""The plugin manager: built-in and third-party backends load through the same entry points.

Set ``MOBILE_EP_DISABLE_PLUGINS=1`` to load no entry-point plugins at all, or to a comma-separated
list of entry-point names (``nnapi,coreml``) to block those.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
import os
from collections.abc import Iterable, Mapping

import pluggy

from . import hookspecs
from .capability import Backend, RuleRegistry
from .errors import BackendError, UsageError

__all__ = ["DISABLE_ENV", "PluginError", "Plugins", "make_plugins"]

log = logging.getLogger(__name__)

#: Environment variable blocking entry-point plugins: ``1``/``all`` for all, or a list of names.
DISABLE_ENV = "MOBILE_EP_DISABLE_PLUGINS"


@dataclasses.dataclass(frozen=True)
class PluginError:
    """A plugin that failed to load or to register; reported by name, never fatal unless strict."""

    plugin: str
    message: str


def _blocked_names() -> set[str] | None:
    """None when nothing is blocked; an empty set means "everything"."""
    raw = os.environ.get(DISABLE_ENV, "").strip()
    if not raw or raw.lower() in ("0", "false", "no"):
        return None
    if raw.lower() in ("1", "true", "yes", "all", "*"):
        return set()
    return {name.strip() for name in raw.split(",") if name.strip()}


class Plugins:
    """A typed facade over pluggy's manager: what the core uses to reach plugins."""

    def __init__(self, manager: pluggy.PluginManager) -> None:
        self.manager = manager
        self.errors: list[PluginError] = []
        self._backends: dict[str, Backend] | None = None
        self._origins: dict[str, str] = {}

    # -- loading ----------------------------------------------------------------------------------
    def load_entry_points(self) -> None:
        blocked = _blocked_names()
        if blocked is not None and not blocked:
            log.info("%s is set: no plugins loaded", DISABLE_ENV)
            return
        entry_points = importlib.metadata.entry_points(group=hookspecs.PROJECT_NAME)
        # Deterministic order, whatever the installation order was.
        for ep in sorted(entry_points, key=lambda e: (e.name, e.value)):
            if blocked and ep.name in blocked:
                continue
            if self.manager.get_plugin(ep.name) is not None or self.manager.is_blocked(ep.name):
                continue
            try:
                plugin = ep.load()
                self.manager.register(plugin, name=ep.name)
            except Exception as exc:  # a broken plugin must not take the tool down
                self.errors.append(PluginError(ep.name, f"failed to load: {type(exc).__name__}: {exc}"))
                continue
            dist = getattr(ep, "dist", None)
            self._origins[ep.name] = f"{dist.name} {dist.version}" if dist is not None else ep.value
        self._check_pending()

    def register(self, plugin: object, name: str | None = None) -> str:
        """Register a plugin object directly (used by tests and embedding applications)."""
        registered = self.manager.register(plugin, name=name)
        self._backends = None
        self._check_pending()
        return registered  # type: ignore[return-value]

    def unregister(self, plugin: object | None = None, name: str | None = None) -> None:
        self.manager.unregister(plugin, name=name)
        self._backends = None

    def _check_pending(self) -> None:
        try:
            self.manager.check_pending()
        except pluggy.PluginValidationError as exc:
            self.errors.append(PluginError(getattr(exc, "plugin_name", "?") or "?", str(exc)))

    # -- backends ---------------------------------------------------------------------------------
    def backends(self) -> Mapping[str, Backend]:
        if self._backends is None:
            self._backends = self._collect_backends()
        return self._backends

    def _collect_backends(self) -> dict[str, Backend]:
        found: dict[str, Backend] = {}
        # pluggy calls the last registered plugin first; we call each plugin's hook ourselves, in
        # registration order, so that a failure is attributed to its plugin and `list` order is stable.
        for name, plugin in self.manager.list_name_plugin():
            impl = getattr(plugin, "mobile_ep_register_backends", None)
            if impl is None or self.manager.parse_hookimpl_opts(plugin, "mobile_ep_register_backends") is None:
                continue

            def register(backend: Backend, _plugin: str = name) -> None:
                _validate(backend, _plugin)
                if backend.name in found:
                    raise BackendError(
                        f"plugin {_plugin!r} registers backend {backend.name!r}, already registered by "
                        f"{self._origins.get(backend.name, 'another plugin')}"
                    )
                found[backend.name] = backend
                self._origins.setdefault(backend.name, self._origins.get(_plugin, _plugin))

            try:
                impl(register=register)
            except Exception as exc:
                self.errors.append(PluginError(name, f"failed to register backends: {type(exc).__name__}: {exc}"))
        return found

    def backend(self, name: str) -> Backend:
        backends = self.backends()
        if name not in backends:
            known = ", ".join(sorted(backends)) or "none installed"
            hint = ""
            broken = [e for e in self.errors if e.plugin == name]
            if broken:
                hint = f" (plugin {name!r} {broken[0].message})"
            elif _blocked_names() is not None:
                hint = f" ({DISABLE_ENV} is set)"
            raise UsageError(f"unknown backend {name!r}; available: {known}{hint}")
        return backends[name]

    def origin(self, backend_name: str) -> str:
        return self._origins.get(backend_name, "")

    def plugin_names(self) -> list[str]:
        return [name for name, _ in self.manager.list_name_plugin()]


def _validate(backend: object, plugin: str) -> None:
    if not isinstance(backend, Backend):
        raise BackendError(f"plugin {plugin!r} registered {backend!r}, which is not a mobile_ep.Backend")
    if not isinstance(backend.rules, RuleRegistry):
        raise BackendError(f"plugin {plugin!r}: backend {backend.name!r} has no RuleRegistry")


def make_plugins(*, entry_points: bool = True, plugins: Iterable[object] = ()) -> Plugins:
    """A fresh plugin manager (each test gets its own), loading entry points unless told not to."""
    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    facade = Plugins(manager)
    for plugin in plugins:
        facade.register(plugin)
    if entry_points:
        facade.load_entry_points()
    return facade
