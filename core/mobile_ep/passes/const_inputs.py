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

__all__ = ["ConstInputsPass", "with_constant_inputs", "reference", "fold_constant_ifs", "branch_hint"]


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
        if self.values:
            fold_constant_ifs(graph)
        return ir.passes.PassResult(model, bool(self.values))


#: Ops on constants :func:`fold_constant_ifs` computes to find an ``If``'s condition.
_CONDITION_OPS = {
    "Equal": np.equal, "Greater": np.greater, "Less": np.less, "GreaterOrEqual": np.greater_equal,
    "LessOrEqual": np.less_equal, "And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor,
    "Not": np.logical_not, "Identity": lambda a: a,
}


def fold_constant_ifs(graph: ir.Graph) -> int:
    """Replace each ``If`` of *graph* whose condition follows from constants (initializers, ``Constant``
    nodes, comparisons and logic on them) by the nodes of the branch it takes; the number replaced.

    onnxruntime does the same while it optimizes, but not always safely: it crashes (SIGSEGV, onnxruntime
    1.32) inlining silero VAD's ``If`` on the sample rate, whose branch holds ``If`` nodes that its constant
    folding then inlines in turn.  With the outer one inlined here, onnxruntime inlines the inner ones."""
    done = 0
    progress = True
    while progress:
        progress = False
        for node in list(graph):
            if node.op_type != "If" or node.domain not in ("", "ai.onnx") or not node.inputs:
                continue
            condition = _constant(node.inputs[0])
            if condition is None or condition.size != 1:
                continue
            branch = node.attributes.get("then_branch" if bool(condition.reshape(())) else "else_branch")
            if branch is None or len(branch.as_graph().outputs) != len(node.outputs):
                continue
            _inline(graph, node, branch.as_graph())
            done += 1
            progress = True
    return done


def _constant(value: ir.Value | None, depth: int = 0) -> np.ndarray | None:
    if value is None or depth > 8:
        return None
    if value.const_value is not None:
        return value.const_value.numpy()
    node = value.producer()
    if node is None or node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "Constant" and "value" in node.attributes:
        return node.attributes["value"].as_tensor().numpy()
    if node.op_type == "Cast" and "to" in node.attributes:
        array = _constant(node.inputs[0], depth + 1)
        return None if array is None else array.astype(ir.DataType(node.attributes["to"].as_int()).numpy())
    f = _CONDITION_OPS.get(node.op_type)
    if f is None or not node.inputs:
        return None
    arrays = [_constant(v, depth + 1) for v in node.inputs]
    return None if any(a is None for a in arrays) else np.asarray(f(*arrays))


def _inline(graph: ir.Graph, node: ir.Node, branch: ir.Graph) -> None:
    """*branch*'s nodes and initializers into *graph* before *node*; *node*'s outputs become Identities of
    the branch's outputs (same names), and *node* goes."""
    nodes = list(branch)
    for inner in nodes:
        branch.remove(inner)
    graph.insert_before(node, nodes)
    for name in list(branch.initializers):
        initializer = branch.initializers.pop(name)
        graph.register_initializer(initializer)
    for old, new in zip(node.outputs, list(branch.outputs), strict=True):
        identity = ir.Node("", "Identity", [new], num_outputs=1, name=f"{node.name or 'If'}_{old.name}")
        graph.insert_before(node, identity)
        out = identity.outputs[0]
        name, old.name = old.name, None
        ir.convenience.replace_all_uses_with(old, out, replace_graph_outputs=True)
        out.name, out.shape, out.type = name, old.shape, old.type
    graph.remove(node, safe=True)


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


def branch_hint(graph: ir.Graph) -> str:
    """For an error of onnxruntime on a model with its shapes fixed: the ``--const`` that keeps only one
    branch of an ``If`` on an input compared with a constant (silero VAD's ``If(sr == 16000)``, whose other
    branch breaks once dims are fixed); empty when there is none."""
    for node in graph:
        if node.op_type != "If" or not node.inputs:
            continue
        found = _compared_input(node.inputs[0], 0)
        if found is not None:
            name, value = found
            return (f"; an If ({node.name or node.op_type}) branches on input {name!r}: fix it with --const "
                    f"{name}={value} (the value your app passes) so that only the branch taken is loaded")
    return ""


def _compared_input(value: ir.Value | None, depth: int) -> tuple[str, str] | None:
    node = value.producer() if value is not None else None
    if node is None or depth > 4:
        return None
    if node.op_type in ("Not", "Cast", "Identity"):
        return _compared_input(node.inputs[0], depth + 1)
    if node.op_type not in ("Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual") or len(node.inputs) != 2:
        return None
    for this, other in (node.inputs, reversed(node.inputs)):
        if this is not None and this.is_graph_input() and not this.is_initializer():
            constant = _constant(other)
            if constant is not None and constant.size == 1:
                return this.name or "", str(constant.reshape(()).item())
    return None
