"""Run from a checkout without installing: put the example package on the path.

The fixtures (``mobile_ep_register``, ``mobile_ep_cli``, ...) come from mobile-ep's pytest plugin,
which pytest loads through mobile-ep's ``pytest11`` entry point.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

if importlib.util.find_spec("mobile_ep_example") is None:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
