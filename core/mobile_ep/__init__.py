"""mobile-ep: get ONNX models onto mobile accelerators (Android NNAPI, Apple Core ML) through backends.

The public API for users (``check``, ``convert`` and ``explain`` mirror the command line and return
typed reports; the pipeline behind them is :mod:`mobile_ep.pipeline`) and for backend plugin
authors: subclass :class:`Backend`, write :class:`OpRule` subclasses answering with :class:`Support`,
and register the backend from a ``@hookimpl`` function ``mobile_ep_register_backends(register)``.
"""

from __future__ import annotations

from mobile_ep import _startup

_startup.defer_heavy_imports()  # before onnx_ir, which imports sympy only to have it at hand

from onnx_ir import DataType

from mobile_ep.contract.compile import CompiledPartition, CompileError, TensorSpec
from mobile_ep.contract.hookspecs import hookimpl
from mobile_ep.contract.plugins import PluginApiError
from mobile_ep.contract.rewrite import Builder, Rewrite
from mobile_ep.contract.rules import (
    MAX_OPSET,
    SUPPORTED,
    Backend,
    DuplicateRuleError,
    Layout,
    NodeUnit,
    OpRule,
    PartitionView,
    RuleContext,
    RuleRegistry,
    Support,
    UnitIO,
    attr,
    op_label,
)
from mobile_ep.errors import BackendError, MobileEpError, ModelError, UsageError, VerificationError
from mobile_ep.passes import rewrites
from mobile_ep.toplevel import check, convert, explain

__version__ = "0.1.0"
#: Version of the plugin API (hooks, Backend and OpRule contracts).  Bumped on incompatible changes.
PLUGIN_API_VERSION = 1

__all__ = [
    "__version__",
    # the command line, from Python (mobile_ep.toplevel)
    "check",
    "convert",
    "explain",
    "PLUGIN_API_VERSION",
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
    "MobileEpError",
    "ModelError",
    "UsageError",
    "BackendError",
    "VerificationError",
    "PluginApiError",
    "CompiledPartition",
    "TensorSpec",
    "CompileError",
]
