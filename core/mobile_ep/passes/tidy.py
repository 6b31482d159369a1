"""Tidy a model before it is written: nothing in the file that no node reads.

Folding (``--const`` selecting an ``If`` branch, constants folded by onnxruntime) and rewrites leave behind
initializers no node reads, and onnxruntime's optimized model imports every opset it knows.  The written
model keeps neither: an app loading it gets no warning per dead initializer and carries no dead weights.
(Values removed with their nodes take their shapes, onnx_ir's ``value_info``, with them.)

The values of a function body onnxruntime inlined keep onnxruntime's names, ``_inlfunc_...``, which
:mod:`mobile_ep.partitioning.propose` reads as "inlined by this session, partitioned after the rest": in a written
model the body is plain nodes, so its values lose the leading underscore.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx_ir as ir
from onnx_ir.passes.common import RemoveUnusedOpsetsPass

__all__ = ["tidy", "tidied"]


def tidy(model: ir.Model) -> ir.Model:
    """Remove, in place, the initializers no node (of the graph or its subgraphs) reads and that are no graph
    input or output, in every graph, and the opset imports no node uses; returns *model*."""
    for graph in model.graphs():
        ends = set(graph.inputs) | set(graph.outputs)
        for name, value in list(graph.initializers.items()):
            if not value.uses() and value not in ends:
                del graph.initializers[name]
    RemoveUnusedOpsetsPass()(model)
    _written_bodies(model)
    return model


def _written_bodies(model: ir.Model) -> None:
    """Rename the values onnxruntime named inside a function body it inlined (``_inlfunc_X`` becomes ``inlfunc_X``,
    or another free name; their float32 copies too): node outputs and initializers, graph inputs and outputs
    excepted."""
    from mobile_ep.partitioning.propose import inlined_name

    for graph in model.graphs():
        ends = set(graph.inputs) | set(graph.outputs)
        values = [v for v in (*(v for node in graph for v in node.outputs), *graph.initializers.values())
                  if v not in ends and inlined_name(v.name or "")]
        if not values:
            continue
        taken = {v.name for node in graph for v in (*node.inputs, *node.outputs) if v is not None} | \
            {v.name for v in graph.inputs} | set(graph.initializers)
        for value in values:
            full = value.name or ""
            base = full.removeprefix("InsertedPrecisionFreeCast_")
            name = full[:len(full) - len(base)] + base.lstrip("_")
            while name in taken:
                name = f"{name}_"
            taken.add(name)
            value.name = name


def tidied(save: Callable[..., object]) -> Callable[..., object]:
    """*save* (``save(model, path, ...)``), tidying the model first."""

    def save_tidy(model: ir.Model, *args: object, **kwargs: object) -> object:
        return save(tidy(model), *args, **kwargs)

    return save_tidy
