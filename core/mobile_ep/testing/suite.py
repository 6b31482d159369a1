"""The conformance suite as a pytest test class (:class:`BackendConformance`, :func:`conformance_suite`),
and what it recorded in this session (:func:`session_reports`, which the pytest plugin in
:mod:`mobile_ep.testing` summarizes).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from mobile_ep.contract import Backend, OpRule
from mobile_ep.contract.compile import is_compiling, missing_compile_methods
from mobile_ep.samples import write_sample
from mobile_ep.testing.cases import NodeCase, candidate_cases
from mobile_ep.testing.conformance import (
    CaseResult,
    ConformanceReport,
    ModelResult,
    run_case,
    run_model,
    smoke_models,
)
from mobile_ep.testing.helpers import registered

try:  # the suite needs pytest when it runs, not when it is imported
    import pytest
except ImportError:  # pragma: no cover
    pytest = None  # type: ignore[assignment]

__all__ = ["SAMPLE", "BackendConformance", "conformance_suite", "session_reports"]


# --------------------------------------------------------------------------------------------------
# Results of this pytest session
# --------------------------------------------------------------------------------------------------
#: Results recorded by the suites of this pytest session, per suite (for the summary and --mobile-ep-report).
_SESSION: dict[str, ConformanceReport] = {}


def _record(suite: type, backend: Backend, result: CaseResult | ModelResult) -> None:
    key = f"{suite.__module__}.{suite.__qualname__}"
    if key not in _SESSION:
        _SESSION[key] = ConformanceReport(backend.name, backend.version, is_compiling(backend), suite=suite.__name__)
    report = _SESSION[key]
    (report.cases if isinstance(result, CaseResult) else report.models).append(result)  # type: ignore[arg-type]


def session_reports() -> list[ConformanceReport]:
    """What the suites of this pytest session recorded, one report per test class (the plugin's summary and
    ``--mobile-ep-report`` show them)."""
    return list(_SESSION.values())


_BACKENDS: dict[type, Backend] = {}


def _rule_doc(rule: OpRule) -> str:
    """The rule's own documentation (its ``check`` docstring or its class docstring, not OpRule's)."""
    for cls in type(rule).__mro__:
        if cls is OpRule or not issubclass(cls, OpRule):
            break
        check = cls.__dict__.get("check")
        doc = (getattr(check, "__doc__", None) or cls.__dict__.get("__doc__") or "").strip()
        if doc:
            return doc
    return ""


#: The name that stands for the built-in sample model (:mod:`mobile_ep.samples`) in ``models``.
SAMPLE = "mobilenet_sample"


class BackendConformance:
    """The conformance suite as a test class: subclass it with ``backend = MyBackend`` (or use
    :func:`conformance_suite`).

    ``backend`` is a Backend class, instance, or a function returning one (to test a configuration:
    ``backend = staticmethod(lambda: MyNpu().configure({"fp16": "true"}))``).
    """

    backend: ClassVar[Any] = None
    #: Which node cases: ``None`` for every case whose ops all have a rule, or a predicate on NodeCase.
    cases: ClassVar[Callable[[NodeCase], bool] | None] = None
    #: Real models: paths, or the names ``"mobilenet_sample"`` and ``"light_*"`` (the default: all of them).
    models: ClassVar[Sequence[str | os.PathLike] | None] = None
    #: Loosen the case tolerances (the larger of the case's and these is used).
    rtol: ClassVar[float | None] = None
    atol: ClassVar[float | None] = None
    #: Cases or models known to fail, with the reason: reported as xfail (strict: a pass is an error).
    known_failures: ClassVar[Mapping[str, str]] = {}

    # -- configuration ----------------------------------------------------------------------------------
    @classmethod
    def make_backend(cls) -> Backend:
        if cls not in _BACKENDS:
            factory = cls.backend
            if factory is None:
                raise TypeError(f"{cls.__name__} must set `backend` to a Backend class, instance or factory")
            backend = factory if isinstance(factory, Backend) else factory()
            if not isinstance(backend, Backend):
                raise TypeError(f"{cls.__name__}.backend gave {backend!r}, not a mobile_ep.Backend")
            _BACKENDS[cls] = backend
        return _BACKENDS[cls]

    @classmethod
    def selected_cases(cls) -> list[NodeCase]:
        chosen = candidate_cases(cls.make_backend())
        return [c for c in chosen if cls.cases(c)] if cls.cases is not None else chosen

    @classmethod
    def selected_models(cls) -> list[str]:
        names = [SAMPLE, *(p.stem for p in smoke_models())] if cls.models is None else [str(m) for m in cls.models]
        return names

    def pytest_generate_tests(self, metafunc: Any) -> None:
        def marks(name: str) -> list[Any]:
            reason = self.known_failures.get(name)
            return [pytest.mark.xfail(reason=reason, strict=True)] if reason else []

        if "node_case" in metafunc.fixturenames:
            cases = self.selected_cases()
            metafunc.parametrize("node_case", [pytest.param(c, id=c.name, marks=marks(c.name)) for c in cases])
        if "real_model" in metafunc.fixturenames:
            models = self.selected_models()
            metafunc.parametrize("real_model", [pytest.param(m, id=pathlib.Path(m).stem,
                                                             marks=marks(pathlib.Path(m).stem)) for m in models])

    # -- tests ------------------------------------------------------------------------------------------
    def test_contract(self) -> None:
        from mobile_ep.contract.plugins import check_plugin_api

        backend = self.make_backend()
        problems = []
        if not isinstance(backend.version, str) or not backend.version:
            problems.append(f"version {backend.version!r} is not a non-empty string")
        if backend.preferred_layout not in ("NCHW", "NHWC"):
            problems.append(f"preferred_layout {backend.preferred_layout!r} is not NCHW or NHWC")
        if not dataclasses.is_dataclass(backend.options):
            problems.append("options is not a dataclass instance")
        else:
            backend.describe_options()
        if not len(backend.rules):
            problems.append("the rule registry is empty")
        for _, op_type, rule in backend.rules:
            if not _rule_doc(rule):
                problems.append(f"{type(rule).__name__} ({op_type}): no docstring for `mobile-ep ops`")
        check_plugin_api(backend)
        missing = missing_compile_methods(backend)
        if 0 < len(missing) < 3:
            problems.append(f"incomplete compile contract: implements some of compile/emulate/runtime_adapter "
                            f"but not {', '.join(missing)}")
        elif not missing:
            files = backend.runtime_adapter()  # type: ignore[attr-defined]
            if not isinstance(files, Mapping) or not files:
                problems.append("runtime_adapter() returned no files")
            else:
                for path, data in files.items():
                    parts = pathlib.PurePosixPath(path).parts if isinstance(path, str) else ("",)
                    if not isinstance(path, str) or path.startswith("/") or ".." in parts:
                        problems.append(f"runtime adapter path {path!r} is not a relative path")
                    if not isinstance(data, bytes):
                        problems.append(f"runtime adapter file {path!r} is {type(data).__name__}, not bytes")
        assert not problems, f"{backend.name}: " + "; ".join(problems)

    def test_registers_and_checks(self, tmp_path: pathlib.Path) -> None:
        from mobile_ep import pipeline as api

        backend = self.make_backend()
        with registered(backend) as plugins:
            assert not plugins.errors, plugins.errors
            assert backend.name in plugins.backends()
            report = api.check(write_sample(tmp_path), [backend.name], plugins=plugins, strict=True)
        result = report.backends[backend.name]
        assert result.supported_nodes + len(result.unsupported) == result.nodes
        assert all(u.reason for u in result.unsupported)

    def test_node_case(self, node_case: NodeCase) -> None:
        backend = self.make_backend()
        result = run_case(backend, node_case, rtol=self.rtol, atol=self.atol)
        _record(type(self), backend, result)
        if result.status == "failed":
            pytest.fail(f"{backend.name}: {node_case.name}{' (' + result.variant + ')' if result.variant else ''}: "
                        f"{result.detail}", pytrace=False)
        if result.status != "passed":
            pytest.skip(f"{result.status}: {result.detail}")

    def test_real_model(self, real_model: str, tmp_path: pathlib.Path) -> None:
        backend = self.make_backend()
        if real_model == SAMPLE:
            path: pathlib.Path = write_sample(tmp_path)
        elif os.sep in real_model or "/" in real_model or real_model.endswith(".onnx"):
            path = pathlib.Path(real_model)
        else:
            path = next(p for p in smoke_models() if p.stem == real_model)
        result = run_model(backend, path)
        _record(type(self), backend, result)
        if result.status != "passed":
            pytest.fail(f"{backend.name}: {result.model}: {result.detail}", pytrace=False)


def conformance_suite(backend: Any, **settings: Any) -> type:
    """A :class:`BackendConformance` subclass for *backend*: ``TestMyNpu = conformance_suite(MyNpu)``.

    *settings* set the class attributes (``cases``, ``models``, ``rtol``, ``atol``, ``known_failures``).
    """
    unknown = set(settings) - {"cases", "models", "rtol", "atol", "known_failures"}
    if unknown:
        raise TypeError(f"unknown conformance settings: {', '.join(sorted(unknown))}")
    name = getattr(backend, "name", None) or getattr(backend, "__name__", "Backend")
    if callable(backend) and not isinstance(backend, (type, Backend)):
        backend = staticmethod(backend)
    return type(f"Test{str(name).title().replace('-', '').replace('_', '')}Conformance", (BackendConformance,),
                {"backend": backend, **settings, "__module__": sys._getframe(1).f_globals.get("__name__", __name__)})
