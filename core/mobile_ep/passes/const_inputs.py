"""Fix inputs to constants: ``--const NAME=VALUE``.

An input that is the same for every run of the app (a sample rate, an all-ones attention mask) becomes an
initializer, so onnxruntime's constant folding removes the arithmetic on it (int64 shape and mask
computations, an ``If`` on it) before the backends are asked.  The model then has one input fewer; it is
verified against the original run with that input set to the value.
"""

from __future__ import annotations

import dataclasses
import pathlib
import tempfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

from mobile_ep import model_io
from mobile_ep.errors import UsageError

if TYPE_CHECKING:
    from mobile_ep.options import Options

__all__ = ["ConstInputsPass", "with_constant_inputs", "reference"]


class ConstInputsPass(ir.passes.InPlacePass):
    """Turn the named graph inputs into initializers holding the given values (one value fills the input's
    static shape; several give its elements in order)."""

    def __init__(self, values: Mapping[str, Sequence[float]],
                 shapes: Mapping[str | None, Sequence[int]] | None = None) -> None:
        super().__init__()
        self.values = dict(values)
        #: Shapes for inputs whose shape the model leaves open (``--shape``), by name.
        self.shapes = dict(shapes or {})
        #: The constants made, by input name (for verification).
        self.arrays: dict[str, np.ndarray] = {}

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        inputs = {v.name: v for v in graph.inputs if not v.is_initializer()}
        for name, given in self.values.items():
            value = inputs.get(name)
            if value is None:
                names = ", ".join(repr(n) for n in inputs) or "none"
                raise UsageError(f"--const {name}: the model has no input {name!r} (inputs: {names})")
            shape = self.shapes.get(name, value.shape)
            if shape is None or not all(isinstance(d, int) for d in shape):
                raise UsageError(f"--const {name}: the input's shape is not static; fix it with --shape {name}=...")
            dtype = value.dtype
            if dtype is None or dtype in (ir.DataType.STRING, ir.DataType.UNDEFINED):
                raise UsageError(f"--const {name}: the input is not a tensor of numbers")
            dims = tuple(int(d) for d in shape)
            count = int(np.prod(dims, dtype=np.int64))
            if len(given) not in (1, count):
                raise UsageError(f"--const {name}: {len(given)} values for an input of {count} elements {list(dims)}")
            array = np.resize(np.asarray(given, dtype=np.float64), dims).astype(dtype.numpy())
            graph.inputs.remove(value)
            value.const_value = ir.Tensor(array, name=name)
            graph.register_initializer(value)
            self.arrays[name] = array
        return ir.passes.PassResult(model, bool(self.values))


def with_constant_inputs(path: str | pathlib.Path, values: Mapping[str, Sequence[float]],
                         work: str | pathlib.Path, shapes: Mapping[str | None, Sequence[int]] | None = None
                         ) -> pathlib.Path:
    """A copy of the model at *path* (written into *work*) with the inputs of *values* made constants."""
    model = model_io.load(path, check=False)
    ConstInputsPass(values, shapes)(model)
    target = pathlib.Path(work) / f"{pathlib.Path(path).stem}.const.onnx"
    target.parent.mkdir(parents=True, exist_ok=True)
    return model_io.save(model, target, external_data=target.name + ".data")


def reference(source: pathlib.Path, options: Options
              ) -> tuple[pathlib.Path, Options, tempfile.TemporaryDirectory | None]:
    """For ``--const``: the model with its constant inputs (what ``convert`` fixes, optimizes and verifies
    against), the options to fix its shapes with (the constants' own ``--shape`` used up), and the temporary
    folder holding it (for the caller to clean up).  Without constants: *source*, *options*, None."""
    if not options.consts:
        return source, options, None
    folder = tempfile.TemporaryDirectory(prefix="mobile-ep-const-")
    path = with_constant_inputs(source, options.consts, folder.name, options.shapes)
    rest = {name: dims for name, dims in options.shapes.items() if name not in options.consts}
    return path, dataclasses.replace(options, shapes=rest), folder
