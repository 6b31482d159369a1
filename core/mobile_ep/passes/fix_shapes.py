"""Fix dynamic input shapes: ``--shape NAME=1,3,224,224`` and ``--dim PARAM=VALUE``.

Unlike ORT's ``make_dynamic_shape_fixed``, a ``--shape`` replaces an input's whole shape whatever its
dims are called, so inputs whose dims share one name (often ``?`` or ``N``), have no name at all, or use
conflicting names are fixed as asked.  Shapes then propagate through the whole graph, control-flow
bodies included, by ONNX shape inference; shapes that cannot fit the model are a one-line error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx_ir as ir

from mobile_ep import model_io as mir
from mobile_ep.errors import UsageError

__all__ = ["FixShapesPass"]


def _fmt(shape: ir.Shape | None) -> str:
    if shape is None:
        return "unknown"
    return "[" + ",".join(str(d) if isinstance(d, int) else (d.value or "?") for d in shape) + "]"


class FixShapesPass(ir.passes.InPlacePass):
    """Set graph input shapes, then re-infer every shape in the model."""

    def __init__(self, shapes: Mapping[str | None, Sequence[int]] | None = None,
                 dims: Mapping[str, int] | None = None) -> None:
        super().__init__()
        self.shapes = dict(shapes or {})
        self.dims = dict(dims or {})
        #: What changed, for the report: input name -> (old shape, new shape).
        self.changes: dict[str, tuple[str, str]] = {}

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        inputs = [v for v in graph.inputs if not v.is_initializer()]
        by_name = {v.name: v for v in inputs}
        shapes = dict(self.shapes)
        if None in shapes:
            if len(inputs) != 1:
                names = ", ".join(repr(v.name) for v in inputs)
                raise UsageError(f"--shape without a name needs a model with one input; this one has {names}")
            shapes[inputs[0].name] = shapes.pop(None)
        for name in shapes:
            if name not in by_name:
                names = ", ".join(repr(v.name) for v in inputs) or "none"
                raise UsageError(f"--shape {name}: the model has no input {name!r} (inputs: {names})")

        params = {d.value for v in inputs if v.shape is not None for d in v.shape if isinstance(d, ir.SymbolicDim)}
        for param in self.dims:
            if param not in params:
                known = ", ".join(sorted(repr(p) for p in params if p)) or "none"
                raise UsageError(f"--dim {param}: no input has a dim named {param!r} (named dims: {known})")

        modified = False
        for value in inputs:
            old = value.shape
            if value.name in shapes:
                new_dims = list(shapes[value.name])
                if old is not None and len(old) != len(new_dims):
                    raise UsageError(f"--shape {value.name}: the input has rank {len(old)} {_fmt(old)}, "
                                     f"not {len(new_dims)}")
                if old is not None:
                    for i, (have, want) in enumerate(zip(old, new_dims, strict=True)):
                        if isinstance(have, int) and have != want:
                            raise UsageError(f"--shape {value.name}: dim {i} is fixed to {have} in the model, "
                                             f"not {want}")
                        if isinstance(have, ir.SymbolicDim) and have.value in self.dims \
                                and self.dims[have.value] != want:
                            raise UsageError(f"--shape {value.name}: dim {i} ({have.value}) is {want} here but "
                                             f"--dim {have.value}={self.dims[have.value]}")
            elif old is not None and self.dims:
                new_dims = [self.dims.get(d.value, d) if isinstance(d, ir.SymbolicDim) else d for d in old]
            else:
                continue
            new_shape = ir.Shape(new_dims)
            if old is None or list(old) != list(new_shape):
                self.changes[value.name or ""] = (_fmt(old), _fmt(new_shape))
                value.shape = new_shape
                modified = True
        if modified:
            _reinfer(model)
        return ir.passes.PassResult(model, modified)


def _reinfer(model: ir.Model) -> None:
    """Forget every inferred shape, then infer again from the new input shapes.

    A strict inference runs first so that shapes the model cannot take (a Reshape that no longer fits,
    mismatched broadcasts) are reported instead of silently leaving values without shapes.
    """
    for graph in model.graphs():
        for node in graph:
            for value in node.outputs:
                if not value.is_graph_output():
                    value.shape = None
    mir.check_shapes_strictly(model)
    mir.infer_shapes(model)
