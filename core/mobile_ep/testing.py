"""Helpers for testing backends and their rules (the pytest plugin for plugin authors builds on these)."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from .capability import Backend, RuleContext, Support
from .partition import Proposal, propose
from .qdq import build_node_units

__all__ = ["as_model", "node_support", "supports_all", "proposal"]


def as_model(model: Any) -> ir.Model:
    """An IR model with inferred shapes from an ``onnx.ModelProto``, a path, or an IR model."""
    from . import ir as mir

    if isinstance(model, ir.Model):
        return model
    if isinstance(model, (str,)) or hasattr(model, "__fspath__"):
        return mir.load(model)
    return mir.from_proto(model)


def node_support(model: Any, backend: Backend, node: str | int = 0) -> Support:
    """The backend's answer for one node (by name or position), inside its QDQ unit if it has one."""
    m = as_model(model)
    nodes = list(m.graph)
    target = nodes[node] if isinstance(node, int) else next(n for n in nodes if n.name == node)
    ctx = RuleContext(m, backend)
    ctx.units = build_node_units(m.graph, backend.qdq_ops(), nodes)
    return ctx.claims_unit(ctx.unit_of(target))


def supports_all(model: Any, backend: Backend) -> dict[str, Support]:
    m = as_model(model)
    ctx = RuleContext(m, backend)
    ctx.units = build_node_units(m.graph, backend.qdq_ops())
    return {n.name: ctx.claims_unit(ctx.unit_of(n)) for n in m.graph}


def proposal(model: Any, *backends: Backend) -> Proposal:
    return propose(as_model(model), backends)
