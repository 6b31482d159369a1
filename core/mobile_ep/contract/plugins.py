"""The plugin manager: built-in and third-party backends load through the same entry points.

Set ``MOBILE_EP_DISABLE_PLUGINS=1`` to load no entry-point plugins at all, or to a comma-separated
list of entry-point names (``nnapi,coreml``) to block those.

A broken plugin (an import error, a hook with a wrong signature or a misspelled name, an exception while
registering, a backend needing another plugin API) costs only itself: it is recorded in
:attr:`Plugins.errors` by name, and the CLI warns (or, with ``--strict``, stops with exit code 5).

While a model is analyzed, each backend runs :func:`guarded`: a rule that ends the process (``SystemExit``),
answers something other than a :class:`~mobile_ep.Support`, or spends more than its time budget
(:data:`RULE_BUDGET_ENV`, default :data:`DEFAULT_RULE_BUDGET` seconds per model, all rules together; a rule
that never returns is interrupted) breaks the contract: the backend is dropped for that model with one
warning naming the plugin and the rule (every node stays on the CPU), or, with ``--strict``, the run stops
with a :class:`PluginContractError` (exit code 5).
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.metadata
import logging
import os
import signal
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

import pluggy

from mobile_ep.contract import hookspecs
from mobile_ep.contract.backend import Backend
from mobile_ep.contract.rules import RuleContext, RuleRegistry
from mobile_ep.contract.support import NodeUnit, Support, op_label
from mobile_ep.errors import BackendError, UsageError

__all__ = ["DISABLE_ENV", "RULE_BUDGET_ENV", "DEFAULT_RULE_BUDGET", "PluginError", "PluginApiError",
           "PluginContractError", "Plugins", "make_plugins", "check_plugin_api", "guarded", "rule_budget"]

log = logging.getLogger(__name__)

#: Environment variable blocking entry-point plugins: ``1``/``all`` for all, or a list of names.
DISABLE_ENV = "MOBILE_EP_DISABLE_PLUGINS"


@dataclasses.dataclass(frozen=True)
class PluginError:
    """A plugin that failed to load or to register; reported by name, never fatal unless strict."""

    plugin: str
    message: str
    #: The exception behind it, when there is one.
    error: BaseException | None = dataclasses.field(default=None, compare=False)


class PluginApiError(BackendError):
    """A backend declares a plugin API (``Backend.plugin_api``) this mobile-ep does not provide."""


class PluginContractError(BackendError):
    """A backend's rule broke the plugin contract while a model was analyzed (with ``--strict``)."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split()) or "no message"


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
            except pluggy.PluginValidationError as exc:  # e.g. a hook with a parameter no hookspec has
                self._forget(ep.name)
                self.errors.append(PluginError(ep.name, f"has an invalid hook: {_one_line(exc)}", exc))
                continue
            except Exception as exc:  # a broken plugin must not take the tool down
                self.errors.append(PluginError(ep.name, f"failed to load: {type(exc).__name__}: {_one_line(exc)}",
                                               exc))
                continue
            dist = getattr(ep, "dist", None)
            self._origins[ep.name] = f"{dist.name} {dist.version}" if dist is not None else ep.value
        self._check_pending()

    def _forget(self, name: str) -> None:
        """Drop a plugin pluggy refused half-way (it keeps the name registered when validation fails)."""
        if self.manager.get_plugin(name) is not None:
            self.manager.unregister(name=name)

    def register(self, plugin: object, name: str | None = None) -> str:
        """Register a plugin object directly (used by tests and embedding applications).

        Raises pluggy's ``PluginValidationError`` for a hook with a wrong signature.
        """
        try:
            registered = self.manager.register(plugin, name=name)
        except pluggy.PluginValidationError:
            self._forget(name or self.manager.get_canonical_name(plugin))
            raise
        self._backends = None
        self._check_pending()
        return registered  # type: ignore[return-value]

    def unregister(self, plugin: object | None = None, name: str | None = None) -> None:
        self.manager.unregister(plugin, name=name)
        self._backends = None

    def _check_pending(self) -> None:
        """Report every implementation of an unknown (misspelled?) hook once, by plugin name.

        pluggy's ``check_pending()`` stops at the first one and names the plugin object, not its name.
        """
        known = sorted(name for name in dir(hookspecs) if name.startswith("mobile_ep_"))
        for hook_name, hook in vars(self.manager.hook).items():
            if hook_name.startswith("_") or hook.has_spec():
                continue
            for impl in hook.get_hookimpls():
                if impl.optionalhook:
                    continue
                plugin = self.manager.get_name(impl.plugin) or repr(impl.plugin)
                message = f"implements unknown hook {hook_name!r} (known hooks: {', '.join(known)})"
                if PluginError(plugin, message) not in self.errors:
                    self.errors.append(PluginError(plugin, message))

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
            except BackendError as exc:  # a contract violation we diagnosed: our message says it all
                self.errors.append(PluginError(name, f"failed to register backends: {exc}", exc))
            except Exception as exc:
                self.errors.append(PluginError(
                    name, f"failed to register backends: {type(exc).__name__}: {_one_line(exc)}", exc))
        return found

    def backend(self, name: str) -> Backend:
        return self.backends()[self.canonical_name(name)]

    def canonical_name(self, name: str, *, strict: bool = True) -> str:
        """The installed backend's name for *name*, whatever its case (``coreML`` -> ``coreml``); an unknown
        name is a usage error with the closest installed names (*strict*), or is returned as it is."""
        backends = self.backends()
        if name in backends:
            return name
        folded = {known.casefold(): known for known in backends}
        if name.casefold() in folded:
            return folded[name.casefold()]
        if not strict:
            return name
        import difflib

        known = ", ".join(sorted(backends)) or "none installed"
        hint = ""
        broken = [e for e in self.errors if e.plugin == name]
        close = difflib.get_close_matches(name.casefold(), list(folded), n=2, cutoff=0.6)
        if broken:
            hint = f" (plugin {name!r} {broken[0].message})"
        elif close:
            hint = f"; did you mean {' or '.join(repr(folded[c]) for c in close)}?"
        elif _blocked_names() is not None:
            hint = f" ({DISABLE_ENV} is set)"
        raise UsageError(f"unknown backend {name!r}; available: {known}{hint}")

    def origin(self, backend_name: str) -> str:
        return self._origins.get(backend_name, "")

    def plugin_names(self) -> list[str]:
        return [name for name, _ in self.manager.list_name_plugin()]


def _validate(backend: object, plugin: str) -> None:
    if not isinstance(backend, Backend):
        raise BackendError(f"plugin {plugin!r} registered {backend!r}, which is not a mobile_ep.Backend")
    check_plugin_api(backend, plugin)
    if not isinstance(backend.rules, RuleRegistry):
        raise BackendError(f"plugin {plugin!r}: backend {backend.name!r} has no RuleRegistry")


def _api_range(declared: Any) -> tuple[int, int] | None:
    if isinstance(declared, int) and not isinstance(declared, bool):
        return declared, declared
    if (isinstance(declared, tuple) and len(declared) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in declared) and declared[0] <= declared[1]):
        return declared
    return None


def check_plugin_api(backend: Backend, plugin: str | None = None) -> None:
    """Raise :class:`PluginApiError` unless *backend* can run on this mobile-ep's plugin API.

    A backend declares ``plugin_api = N`` (it needs plugin API N) or ``plugin_api = (LOW, HIGH)`` (it
    works with any of LOW..HIGH); ``None`` (the default) declares nothing and is not checked.
    """
    from mobile_ep import PLUGIN_API_VERSION, __version__

    declared = getattr(backend, "plugin_api", None)
    if declared is None:
        return
    where = f"plugin {plugin!r}: backend {backend.name!r}" if plugin else f"backend {backend.name!r}"
    span = _api_range(declared)
    if span is None:
        raise PluginApiError(f"{where} declares plugin_api={declared!r}; expected an int or an (min, max) "
                             "tuple of ints")
    low, high = span
    if low <= PLUGIN_API_VERSION <= high:
        return
    needed = str(low) if low == high else f"{low} to {high}"
    advice = ("upgrade mobile-ep" if low > PLUGIN_API_VERSION
              else "upgrade the plugin, or use an older mobile-ep")
    raise PluginApiError(f"{where} needs mobile-ep plugin API {needed}, but mobile-ep {__version__} provides "
                         f"plugin API {PLUGIN_API_VERSION}: {advice}")


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


# --------------------------------------------------------------------------------------------------
# The contract, enforced while a model is analyzed
# --------------------------------------------------------------------------------------------------
#: Environment variable: seconds a backend's rules may spend on one model, all together (``--rule-budget``).
RULE_BUDGET_ENV = "MOBILE_EP_RULE_BUDGET"
#: The default of :data:`RULE_BUDGET_ENV`.
DEFAULT_RULE_BUDGET = 5.0


def rule_budget() -> float:
    """Seconds a backend's rules may spend on one model (:data:`RULE_BUDGET_ENV`; 0 or less: no limit)."""
    raw = os.environ.get(RULE_BUDGET_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_RULE_BUDGET
    except ValueError:
        raise UsageError(f"{RULE_BUDGET_ENV}={raw!r} is not a number of seconds") from None
    return value if value > 0 else float("inf")


class _OverBudget(BaseException):
    """Raised inside a rule that runs past its backend's budget (a BaseException: rules catch Exception)."""


class _Watchdog:
    """One daemon thread for the process: interrupts the main thread (SIGALRM) when the rule running in it
    has used up its backend's budget.  Rules running on other threads are timed after they return."""

    def __init__(self) -> None:
        self.current: _Contract | None = None
        self.since = 0.0
        self.expired: _Contract | None = None  # the contract whose rule is being interrupted
        self.previous: Any = None  # the SIGALRM handler before ours
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def start(self) -> bool:
        """Whether rules on this thread can be interrupted (the main thread, with SIGALRM)."""
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_kill"):
            return False
        with self.lock:
            if self.thread is None:
                self.previous = signal.signal(signal.SIGALRM, self._on_alarm)
                self.thread = threading.Thread(target=self._watch, name="mobile-ep-rule-budget", daemon=True)
                self.thread.start()
        return True

    def _on_alarm(self, signum, frame) -> None:
        if self.expired is not None:
            self.expired = None
            raise _OverBudget
        if callable(self.previous):  # (an application's own alarm, passed on)
            self.previous(signum, frame)

    def _watch(self) -> None:
        main = threading.main_thread().ident
        while True:
            time.sleep(0.05)
            contract = self.current
            if contract is not None and contract.spent + time.perf_counter() - self.since > contract.budget:
                self.expired, self.current = contract, None  # (one interruption per overrun)
                signal.pthread_kill(main, signal.SIGALRM)  # type: ignore[arg-type]


_WATCHDOG = _Watchdog()


class _Contract:
    """The contract of one backend on one model: the time its rules spent, and the first violation."""

    def __init__(self, backend: Backend, plugin: str, budget: float, strict: bool) -> None:
        self.backend = backend
        self.plugin = plugin
        self.budget = budget
        self.strict = strict
        self.spent = 0.0
        self.depth = 0  # calls in progress (rules may ask about other nodes)
        self.violation: str | None = None

    def call(self, what, func, *args):
        """``func(*args)`` for the rule or hook *what()* names; ``(True, result)``, or ``(False, None)`` after a
        violation (the backend is dropped)."""
        if self.violation is not None:
            return False, None
        if self.depth:  # a rule asking about another node (ctx.claims): timed and guarded as part of the first
            return True, func(*args)
        watched = self.budget != float("inf") and _WATCHDOG.start()
        start = time.perf_counter()
        if watched:
            _WATCHDOG.since, _WATCHDOG.current = start, self
        self.depth += 1
        try:
            return True, func(*args)
        except _OverBudget:
            self.violate(f"{what()} ran past the backend's time budget ({self.budget:g} s per model; "
                         f"{RULE_BUDGET_ENV} or --rule-budget sets it)")
        except (SystemExit, GeneratorExit) as exc:
            self.violate(f"{what()} raised {type(exc).__name__}({getattr(exc, 'code', '') or ''}), which a rule "
                         "must never do")
        finally:
            self.depth -= 1
            if watched:
                _WATCHDOG.current = _WATCHDOG.expired = None
            self.spent += time.perf_counter() - start
        return False, None

    def check_time(self, what: str) -> bool:
        if self.spent > self.budget and self.violation is None:
            self.violate(f"{what} took the backend past its time budget ({self.budget:g} s per model; "
                         f"{RULE_BUDGET_ENV} or --rule-budget sets it)")
        return self.violation is None

    def violate(self, message: str) -> None:
        text = f"plugin {self.plugin!r}: backend {self.backend.name!r}: {message}"
        if self.strict:
            raise PluginContractError(f"{text} (--strict)")
        self.violation = text
        log.warning("%s; the backend is dropped for this model (every node stays on the CPU)", text)

    def dropped(self) -> Support:
        return Support.no(f"backend dropped: {self.violation}")


def _rule_name(backend: Backend, unit: NodeUnit, ctx: RuleContext) -> str:
    target = unit.target
    try:
        rule = backend.rules.lookup(target.domain, target.op_type, ctx.node_opset(target))
    except Exception:
        rule = None
    label = f"{op_label(target)} node {target.name!r}"
    return f"rule {type(rule).__name__} ({label})" if rule is not None else f"supports() ({label})"


def guarded(backend: Backend, *, plugin: str = "", budget: float | None = None, strict: bool = False) -> Backend:
    """A copy of *backend* whose rules and partition hooks keep the plugin contract: see the module's
    docstring.  *plugin*: its plugin's name, for the messages; *budget*: seconds (default :func:`rule_budget`)."""
    budget = rule_budget() if budget is None else budget
    if backend.needs_seconds is not None:
        budget = max(budget, backend.needs_seconds)
    contract = _Contract(backend, plugin or backend.name, budget, strict)
    original = copy.copy(backend)  # (the calls go to the unguarded methods)
    guard = copy.copy(backend)

    def supports(unit: NodeUnit, ctx: RuleContext) -> Support:
        ok, answer = contract.call(lambda: _rule_name(original, unit, ctx), original.supports, unit, ctx)
        if ok and not isinstance(answer, Support):
            contract.violate(f"{_rule_name(original, unit, ctx)} returned {type(answer).__name__}, not a "
                             "mobile_ep.Support")
        if not ok or not isinstance(answer, Support) or not contract.check_time(_rule_name(original, unit, ctx)):
            return contract.dropped()
        return answer

    def accept_partition(partition, ctx: RuleContext) -> Support:
        ok, answer = contract.call(lambda: "accept_partition()", original.accept_partition, partition, ctx)
        if ok and not isinstance(answer, Support):
            contract.violate(f"accept_partition() returned {type(answer).__name__}, not a mobile_ep.Support")
        if not ok or not isinstance(answer, Support) or not contract.check_time("accept_partition()"):
            return contract.dropped()
        return answer

    def excluded_nodes(graph, ctx: RuleContext):
        ok, answer = contract.call(lambda: "excluded_nodes()", original.excluded_nodes, graph, ctx)
        if ok and not isinstance(answer, Mapping):
            contract.violate(f"excluded_nodes() returned {type(answer).__name__}, not a mapping")
        if not ok or not isinstance(answer, Mapping) or not contract.check_time("excluded_nodes()"):
            return {node: contract.dropped().reason for node in graph}
        return answer

    guard.supports, guard.accept_partition, guard.excluded_nodes = supports, accept_partition, excluded_nodes
    guard.contract = contract
    return guard
