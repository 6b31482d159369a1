"""Start-up: Ctrl-C while the program starts, and modules our dependencies import eagerly but that mobile-ep's
work never needs.

As the program (the ``mobile-ep`` script, or ``python -m mobile_ep.cli``), Ctrl-C from the first line of
``mobile_ep`` on, while modules load and until a command takes over (:mod:`mobile_ep.cli.group`), ends the
process at once with ``mobile-ep: interrupted`` and exit code 130 (nothing has been written yet).  An
application or a test run that imports the package keeps its own SIGINT handling.

``onnx_ir`` imports ``sympy`` when it loads (its ``_core`` and ``_symbolic_shapes`` modules: about a third
of a second, a tenth of ``mobile-ep check``'s whole run on a small model), yet uses it only for arithmetic
on symbolic dimensions, which nothing in mobile-ep does.  Each of those modules is stood in for by a
:class:`_Deferred` module until an attribute of it is first read: the real module is imported then, for
whichever code needs it, and the stand-in takes on its contents, so nothing changes for such code.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import signal
import sys
import threading
import types

#: Imported on first use instead of at import (a submodule only while its package is not imported yet).
DEFERRED_MODULES = ("sympy", "onnx_ir._symbolic_shapes")

_LOCK = threading.RLock()


class _Deferred(types.ModuleType):
    """A module that imports the real one when one of its attributes is first read."""

    def __getattr__(self, attr: str):  # called only for names the module does not hold yet
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)  # the import system's own probes (__path__, __file__, ...)
        return getattr(_load(self), attr)


def _load(stub: _Deferred) -> types.ModuleType:
    name = stub.__name__
    with _LOCK:
        real = sys.modules.get(name)
        if real is None or real is stub:
            sys.modules.pop(name, None)
            try:
                real = importlib.import_module(name)
            except BaseException:
                sys.modules.setdefault(name, stub)
                raise
        stub.__dict__.update({k: v for k, v in real.__dict__.items() if k != "__class__"})
        return real


def _spec(name: str) -> importlib.machinery.ModuleSpec | None:
    parent, _, _ = name.rpartition(".")
    if not parent:
        return importlib.util.find_spec(name)
    if parent in sys.modules:  # too late: the package may already hold the real submodule
        return None
    parent_spec = importlib.util.find_spec(parent)  # a top-level package: found, not imported
    if parent_spec is None or not parent_spec.submodule_search_locations:
        return None
    return importlib.machinery.PathFinder.find_spec(name, list(parent_spec.submodule_search_locations))


def defer_heavy_imports() -> None:
    """Stand in for each of :data:`DEFERRED_MODULES` that is installed and not imported yet."""
    for name in DEFERRED_MODULES:
        if name in sys.modules:
            continue
        try:
            spec = _spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        stub = _Deferred(name)
        stub.__spec__ = spec  # what the import system looks at when the name is imported again
        sys.modules[name] = stub


def interrupted_while_starting(signum, frame):  # pragma: no cover - runs in the program only
    os.write(2, b"mobile-ep: interrupted\n")
    os._exit(130)


#: Whether this process is the ``mobile-ep`` program (``-m`` is what ``sys.argv[0]`` holds while ``python -m``
#: imports the packages of the module it runs).
PROGRAM = bool(sys.argv) and os.path.basename(sys.argv[0]) in ("mobile-ep", "mobile-ep.exe", "-m")


def handle_interrupts_while_starting() -> None:
    """As the program, Ctrl-C ends the process with the usual line and exit code 130 until a command runs."""
    if not PROGRAM or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return
    try:
        signal.signal(signal.SIGINT, interrupted_while_starting)
    except ValueError:  # (not the main thread: an application importing us)
        pass
