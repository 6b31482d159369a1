"""The compiled twins of the partitioner's per-node loops (and of the inferred-shapes check), when built.

``speedups`` is the C extension :mod:`mobile_ep._speedups` (built from ``_speedups.c`` when the package is
installed with a C compiler at hand), or ``None``: without a compiler, or with ``MOBILE_EP_PURE_PYTHON`` set
to anything but ``0`` or the empty string, the pure-Python twins in :mod:`mobile_ep.partition` and
:mod:`mobile_ep.capability` run instead.  Both give the same results (``tests/test_speedups.py``).
"""

from __future__ import annotations

import os
import types

__all__ = ["speedups", "pure_python_requested"]


def pure_python_requested() -> bool:
    return os.environ.get("MOBILE_EP_PURE_PYTHON", "") not in ("", "0")


def _load() -> types.ModuleType | None:
    if pure_python_requested():
        return None
    try:
        from . import _speedups
    except ImportError:  # not built (no compiler when installed): the pure-Python twins
        return None
    return _speedups


speedups = _load()
