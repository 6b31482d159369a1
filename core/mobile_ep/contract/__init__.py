"""The plugin contract: everything a backend plugin imports, in one place.

A plugin subclasses :class:`Backend`, writes :class:`OpRule` subclasses (one module per op or op family)
that answer with a :class:`Support`, collects them in a :class:`RuleRegistry` and registers the backend
from a ``@hookimpl`` function ``mobile_ep_register_backends(register)`` (the hooks are specified in
:mod:`~mobile_ep.contract.hookspecs`).  A backend that lowers partitions itself also implements the compile
contract (:class:`CompiledPartition`, :class:`TensorSpec`, :class:`CompileError` and the helpers
:func:`lower_units`, :func:`runtime_inputs`, :func:`package_files`); one that needs a node rewritten first
lists :class:`Rewrite` objects.  The guide is ``docs/plugins.md``.

The modules behind it, one job each:

- :mod:`~mobile_ep.contract.support`: support answers and node units (``Support``, ``NodeUnit``, ``attr``);
- :mod:`~mobile_ep.contract.rules`: op rules, their registry and the context they read the model through;
- :mod:`~mobile_ep.contract.backend`: the ``Backend`` base class, its options, its cost-model constants and
  the partitions it sees;
- :mod:`~mobile_ep.contract.compile`: the optional compile contract;
- :mod:`~mobile_ep.contract.rewrite`: legalizing rewrites;
- :mod:`~mobile_ep.contract.hookspecs` and :mod:`~mobile_ep.contract.plugins`: the hooks and the plugin
  manager that calls them.

``mobile_ep`` re-exports the names most plugins need; ``tests/test_public_api.py`` guards both lists.
"""

from __future__ import annotations

from mobile_ep.contract import hookspecs
from mobile_ep.contract.backend import Backend, CostParams, PartitionView, RegisterBackend, check_option_types
from mobile_ep.contract.compile import (
    CompiledPartition,
    CompileError,
    TensorSpec,
    lower_units,
    package_files,
    runtime_inputs,
)
from mobile_ep.contract.hookspecs import hookimpl
from mobile_ep.contract.plugins import PluginApiError
from mobile_ep.contract.rewrite import Builder, Rewrite
from mobile_ep.contract.rules import (
    MAX_OPSET,
    DuplicateRuleError,
    OpRule,
    RuleContext,
    RuleRegistry,
    doc_summary,
    shape_text,
)
from mobile_ep.contract.support import SUPPORTED, Layout, NodeUnit, Support, UnitIO, attr, op_label

__all__ = [
    # answers and what they are about (contract.support)
    "Support",
    "SUPPORTED",
    "NodeUnit",
    "UnitIO",
    "Layout",
    "attr",
    "op_label",
    # op rules (contract.rules)
    "OpRule",
    "RuleRegistry",
    "RuleContext",
    "DuplicateRuleError",
    "MAX_OPSET",
    "shape_text",
    "doc_summary",
    # backends (contract.backend)
    "Backend",
    "PartitionView",
    "RegisterBackend",
    "CostParams",
    "check_option_types",
    # the compile contract (contract.compile)
    "CompiledPartition",
    "TensorSpec",
    "CompileError",
    "lower_units",
    "runtime_inputs",
    "package_files",
    # legalizing rewrites (contract.rewrite)
    "Rewrite",
    "Builder",
    # hooks (contract.hookspecs) and plugin loading (contract.plugins)
    "hookimpl",
    "hookspecs",
    "PluginApiError",
]
