"""mobile-ep: get ONNX models onto mobile accelerators (Android NNAPI, Apple Core ML) through backends.

The public API for users (``check``, ``convert`` and ``explain`` mirror the command line and return
typed reports; :mod:`mobile_ep.pipeline` runs them) and for backend plugin authors (everything of
:mod:`mobile_ep.contract`): subclass :class:`Backend`, write :class:`OpRule` subclasses answering with
:class:`Support`, and register the backend from a ``@hookimpl`` function
``mobile_ep_register_backends(register)``.

Names are imported when first used, so ``import mobile_ep`` (and ``mobile-ep --help``) stays quick.
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from mobile_ep import _startup

_startup.handle_interrupts_while_starting()  # (first: the imports below may take a second)
_startup.defer_heavy_imports()  # before onnx_ir is imported, which imports sympy only to have it at hand

__version__ = "0.1.0"
#: Version of the plugin API (hooks, Backend and OpRule contracts).  Bumped on incompatible changes.
PLUGIN_API_VERSION = 1

_CONTRACT = ("hookimpl", "Rewrite", "Builder", "Backend", "OpRule", "RuleRegistry", "RuleContext", "NodeUnit",
             "UnitIO", "PartitionView", "Support", "SUPPORTED", "DuplicateRuleError", "Layout", "MAX_OPSET",
             "attr", "op_label", "PluginApiError", "CompiledPartition", "TensorSpec", "CompileError", "shape_text",
             "doc_summary", "check_option_types")
_ERRORS = ("MobileEpError", "ModelError", "UsageError", "BackendError", "VerificationError")
#: Where each public name lives.
_WHERE: dict[str, str] = {
    "check": "mobile_ep.pipeline",
    "convert": "mobile_ep.pipeline",
    "explain": "mobile_ep.reports.explain",
    "build_llm": "mobile_ep.llm.build",
    "Options": "mobile_ep.options",
    "DataType": "onnx_ir",
    **{name: "mobile_ep.contract" for name in _CONTRACT},
    **{name: "mobile_ep.errors" for name in _ERRORS},
}

__all__ = [
    "__version__",
    "PLUGIN_API_VERSION",
    # the command line, from Python
    "check",
    "convert",
    "explain",
    "build_llm",
    "Options",
    # the plugin contract (mobile_ep.contract)
    "hookimpl",
    "Rewrite",
    "Builder",
    "rewrites",
    "Backend",
    "OpRule",
    "RuleRegistry",
    "RuleContext",
    "NodeUnit",
    "UnitIO",
    "PartitionView",
    "Support",
    "SUPPORTED",
    "DuplicateRuleError",
    "Layout",
    "MAX_OPSET",
    "DataType",
    "attr",
    "op_label",
    "shape_text",
    "doc_summary",
    "check_option_types",
    "PluginApiError",
    "CompiledPartition",
    "TensorSpec",
    "CompileError",
    # errors (mobile_ep.errors)
    "MobileEpError",
    "ModelError",
    "UsageError",
    "BackendError",
    "VerificationError",
]

if _TYPE_CHECKING:
    from onnx_ir import DataType

    from mobile_ep.contract import (
        MAX_OPSET,
        SUPPORTED,
        Backend,
        Builder,
        CompiledPartition,
        CompileError,
        DuplicateRuleError,
        Layout,
        NodeUnit,
        OpRule,
        PartitionView,
        PluginApiError,
        Rewrite,
        RuleContext,
        RuleRegistry,
        Support,
        TensorSpec,
        UnitIO,
        attr,
        check_option_types,
        doc_summary,
        hookimpl,
        op_label,
        shape_text,
    )
    from mobile_ep.errors import BackendError, MobileEpError, ModelError, UsageError, VerificationError
    from mobile_ep.llm.build import build_llm
    from mobile_ep.options import Options
    from mobile_ep.passes import rewrites
    from mobile_ep.pipeline import check, convert
    from mobile_ep.reports.explain import explain


def __getattr__(name: str) -> _Any:
    if name == "rewrites":
        value: _Any = _importlib.import_module("mobile_ep.passes.rewrites")
    elif name in _WHERE:
        value = getattr(_importlib.import_module(_WHERE[name]), name)
    else:
        raise AttributeError(f"module 'mobile_ep' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
