"""Tidy a model before it is written: nothing in the file that no node reads.

Folding (``--const`` selecting an ``If`` branch, constants folded by onnxruntime) and rewrites leave behind
initializers no node reads, and onnxruntime's optimized model imports every opset it knows.  The written
model keeps neither: an app loading it gets no warning per dead initializer and carries no dead weights.
(Values removed with their nodes take their shapes, onnx_ir's ``value_info``, with them.)
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
    return model


def tidied(save: Callable[..., object]) -> Callable[..., object]:
    """*save* (``save(model, path, ...)``), tidying the model first."""

    def save_tidy(model: ir.Model, *args: object, **kwargs: object) -> object:
        return save(tidy(model), *args, **kwargs)

    return save_tidy
