"""The test kit for backend authors, and a pytest plugin (entry point ``pytest11``: ``mobile_ep``).

A backend proves itself with the same checks as the built-in ones, with one line in its own tests::

    # tests/test_conformance.py of your plugin
    from mobile_ep.testing import conformance_suite
    from my_npu.backend import MyNpu

    TestMyNpu = conformance_suite(MyNpu)

which collects, for ``MyNpu``:

- ``test_contract``: name, version, layout, options, plugin API, rule docs, the compile contract (all of
  ``compile``/``emulate``/``runtime_adapter`` or none) and the runtime adapter's files;
- ``test_registers_and_checks``: registered through a throwaway plugin, the backend partitions the
  built-in sample model through :func:`mobile_ep.pipeline.check` without a plugin error;
- ``test_node_case[<case>]``: ONNX's own node tests (``onnx.backend.test.case.node``) for every case
  whose ops all have a rule: claim -> compile -> emulate, compared with ONNX's expected outputs.  A
  case the backend declines is skipped with the backend's reason; when it declines because an input
  is not constant (weights), the case is retried with every input but the first as a constant
  initializer.  A backend without the compile contract only has its claims checked;
- ``test_real_model[<model>]``: the built-in sample and the ``light_*`` models of the onnx wheel,
  analysed as ORT sees them: partitions are proposed, and each one is compiled and emulated on the
  values ONNX Runtime computes at its boundary.

Subclass :class:`BackendConformance` instead to tune it (tolerances, which cases, which models, known
failures).  pytest prints a summary of claimed, passed and failed cases per backend, and
``--mobile-ep-report=FILE`` writes it as JSON.

Fixtures: ``mobile_ep_plugins`` (a fresh plugin manager without entry points), ``mobile_ep_register``
(register a backend or plugin for one test; unregistered after it), ``mobile_ep_cli`` (run the
``mobile-ep`` command against that manager).

The node cases take ONNX about 20 s to generate; they are cached, per onnx version, under
``$MOBILE_EP_CACHE_DIR`` (default ``~/.cache/mobile-ep``; ``MOBILE_EP_CACHE_DIR=none`` disables it).

Import everything from here; the modules behind it, one job each: :mod:`~mobile_ep.testing.helpers`
(helpers for rule tests), :mod:`~mobile_ep.testing.cases` (ONNX's node cases),
:mod:`~mobile_ep.testing.conformance` (the kit without pytest), :mod:`~mobile_ep.testing.suite` (the
pytest test class and summary), :mod:`~mobile_ep.testing.oracle` (a backend's prediction against the real
execution provider, for EPs that run on the host: :func:`run_oracle`) and :mod:`~mobile_ep.testing.fixtures`.  Nothing here imports the command
line (:mod:`mobile_ep.cli`): ``mobile_ep_cli`` runs the installed ``mobile-ep`` command.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

from mobile_ep.testing.cases import CACHE_ENV, NodeCase, candidate_cases, load_case, onnx_node_cases
from mobile_ep.testing.conformance import (
    CaseResult,
    ConformanceReport,
    ModelResult,
    run_case,
    run_conformance,
    run_model,
    smoke_models,
)
from mobile_ep.testing.helpers import as_model, node_support, proposal, registered, supports_all
from mobile_ep.testing.oracle import (
    ExecutionProvider,
    OracleResult,
    RealPlacement,
    real_placement,
    run_oracle,
)
from mobile_ep.testing.suite import BackendConformance, conformance_suite, session_reports

try:  # the kit's helpers work without pytest; only the fixtures and the suite need it
    import pytest as _pytest
except ImportError:  # pragma: no cover
    _pytest = None  # type: ignore[assignment]

if _pytest is not None:  # this module is the pytest plugin: its fixtures must be names here
    from mobile_ep.testing.fixtures import mobile_ep_cli, mobile_ep_plugins, mobile_ep_register  # noqa: F401

__all__ = [
    # helpers for rule tests
    "as_model",
    "node_support",
    "supports_all",
    "proposal",
    "registered",
    # the conformance kit
    "NodeCase",
    "CaseResult",
    "ModelResult",
    "ConformanceReport",
    "onnx_node_cases",
    "candidate_cases",
    "load_case",
    "run_case",
    "run_model",
    "run_conformance",
    "smoke_models",
    "BackendConformance",
    "conformance_suite",
    "CACHE_ENV",
    # the oracle: a backend's prediction against the real execution provider
    "ExecutionProvider",
    "OracleResult",
    "RealPlacement",
    "real_placement",
    "run_oracle",
]
# (The pytest hooks and fixtures below are names of this module, for pytest, but not in __all__: a conftest.py
# doing ``from mobile_ep.testing import *`` would register them a second time.)


# --------------------------------------------------------------------------------------------------
# The pytest plugin's hooks: an option and the summary
# --------------------------------------------------------------------------------------------------
def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("mobile-ep", "mobile-ep backend conformance")
    group.addoption("--mobile-ep-report", metavar="FILE", default=None,
                    help="write the conformance results (claimed, passed, failed cases per backend) as JSON")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    reports = session_reports()
    if not reports:
        return
    terminalreporter.section("mobile-ep conformance")
    per_backend: dict[str, int] = {}
    for report in reports:
        per_backend[report.backend] = per_backend.get(report.backend, 0) + 1
    for report in reports:
        terminalreporter.write_line(report.summary(with_suite=per_backend[report.backend] > 1))
        for case in report.cases:
            if case.status == "failed":
                terminalreporter.write_line(f"  failed {case.case}: {case.detail}")
    path = config.getoption("--mobile-ep-report", default=None)
    if path:
        pathlib.Path(path).write_text(json.dumps([r.as_dict() for r in reports], indent=2) + "\n")
        terminalreporter.write_line(f"conformance report written to {path}")
