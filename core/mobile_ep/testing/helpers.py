"""Helpers for rule tests: a model from whatever a test has, one node's or every node's answer, a proposal,
and backends registered for a ``with`` block.  Part of :mod:`mobile_ep.testing`; none of it needs pytest.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import onnx_ir as ir

from mobile_ep.contract import Backend, RuleContext, Support, hookimpl
from mobile_ep.partitioning.propose import Proposal, propose
from mobile_ep.partitioning.units import build_node_units

__all__ = ["as_model", "node_support", "supports_all", "proposal", "registered", "as_plugin"]


def as_model(model: Any) -> ir.Model:
    """An IR model with inferred shapes from an ``onnx.ModelProto``, a path, or an IR model."""
    from mobile_ep import model_io as mir

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
    """The backend's answer for every node of the model, by node name."""
    m = as_model(model)
    ctx = RuleContext(m, backend)
    ctx.units = build_node_units(m.graph, backend.qdq_ops())
    return {n.name: ctx.claims_unit(ctx.unit_of(n)) for n in m.graph}


def proposal(model: Any, *backends: Backend) -> Proposal:
    """The partitions the partitioner proposes for the model and *backends* (in priority order)."""
    return propose(as_model(model), backends)


class _BackendsPlugin:
    """A throwaway plugin registering given backend instances."""

    def __init__(self, backends: Sequence[Backend]) -> None:
        self.backends = tuple(backends)

    @hookimpl
    def mobile_ep_register_backends(self, register: Callable[[Backend], None]) -> None:
        for backend in self.backends:
            register(backend)

    def __repr__(self) -> str:
        return f"<test plugin for {', '.join(b.name for b in self.backends)}>"


def as_plugin(*items: object) -> object:
    """What to register for *items*: Backend instances become one throwaway plugin registering them; a single
    other object is taken as a plugin (a module or object with ``@hookimpl`` functions) as it is."""
    if items and all(isinstance(i, Backend) for i in items):
        return _BackendsPlugin(items)  # type: ignore[arg-type]
    if len(items) != 1:
        raise TypeError("register either Backend instances or a single plugin object")
    return items[0]


@contextlib.contextmanager
def registered(*items: object, plugins: Any = None, name: str | None = None) -> Iterator[Any]:
    """Register backends (or one plugin object) in a plugin manager for the ``with`` block.

    Yields the manager (a fresh one without entry points unless *plugins* is given); everything
    registered is unregistered on exit, whatever happens.
    """
    from mobile_ep.contract.plugins import make_plugins

    manager = plugins if plugins is not None else make_plugins(entry_points=False)
    plugin = as_plugin(*items)
    manager.register(plugin, name=name)
    try:
        yield manager
    finally:
        manager.unregister(plugin)
