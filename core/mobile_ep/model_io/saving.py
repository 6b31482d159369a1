"""Saving: an IR model written atomically, with an IR version onnxruntime accepts, its weights in one file or
beside it."""

from __future__ import annotations

import contextlib
import os
import pathlib
import tempfile
from collections.abc import Iterator

import onnx
import onnx_ir as ir
from onnx_ir.passes.common import NameFixPass

from mobile_ep.model_io.protos import MAX_IR_VERSION

__all__ = ["SINGLE_FILE_MAX_BYTES", "target_ir_version", "prepare_for_save", "save", "atomic_path"]

_MIN_IR_VERSION = 4  # IR 3 lists initializers as inputs; we always write 4+ with them removed.
#: Above this, weights fit neither in one protobuf (2 GB) nor in an ORT format file (flatbuffers, 2 GB):
#: :func:`save` puts them in ``<name>.data`` beside the model.
SINGLE_FILE_MAX_BYTES = 1_800_000_000


def target_ir_version(model: ir.Model) -> int:
    """The IR version to write: what the opsets need, at least 4, at most what onnxruntime accepts."""
    opsets = [onnx.helper.make_opsetid(d, v) for d, v in model.opset_imports.items()]
    try:
        needed = onnx.helper.find_min_ir_version_for(opsets, ignore_unknown=True)
    except Exception:
        needed = _MIN_IR_VERSION
    current = model.ir_version or _MIN_IR_VERSION
    return min(max(needed, _MIN_IR_VERSION, min(current, MAX_IR_VERSION)), MAX_IR_VERSION)


def prepare_for_save(model: ir.Model) -> ir.Model:
    """Fix what onnxruntime would reject: IR version, initializers listed as inputs (IR 3), order, names."""
    if (model.ir_version or 0) < 4:
        # Under IR 3 initializers must be graph inputs and are constants; from IR 4 on that would make
        # them overridable.  Dropping them from the inputs keeps their meaning.
        # ORT's optimizer may also drop a folded initializer yet keep its IR 3 input entry: an unused input
        # that was never meant to be fed.
        for graph in model.graphs():
            for value in list(graph.inputs):
                if value.is_initializer() or (not value.uses() and not value.is_graph_output()):
                    graph.inputs.remove(value)
    model.ir_version = target_ir_version(model)
    for graph in model.graphs():
        if not _topologically_sorted(graph):  # an order that is valid is kept: the file reads as analyzed
            graph.sort()
    NameFixPass()(model)
    return model


def _topologically_sorted(graph: ir.Graph) -> bool:
    """Whether every node comes after the producers of its inputs (values from outer graphs aside)."""
    seen: set[int] = set()
    inside = {id(node) for node in graph}
    for node in graph:
        for value in node.inputs:
            producer = value.producer() if value is not None else None
            if producer is not None and id(producer) in inside and id(producer) not in seen:
                return False
        seen.add(id(node))
    return True


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike, *, make_parent: bool = True) -> Iterator[pathlib.Path]:
    """Yield a temporary path beside *target*; on success it replaces *target* in one rename.  Unless
    *make_parent*, a missing folder is an error (a writer on a thread must not bring back a removed one)."""
    target = pathlib.Path(target)
    if make_parent:
        target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = pathlib.Path(tmp)
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp_path, 0o666 & ~mask)  # mkstemp makes 0600; outputs get the usual umask-based mode
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()


def _has_large_strings(model: ir.Model) -> bool:
    return any(value.const_value is not None and value.const_value.dtype == ir.DataType.STRING
               and value.const_value.nbytes >= 256 for graph in model.graphs() for value in graph.initializers.values())


def save(model: ir.Model, path: str | os.PathLike, *, external_data: str | None = None) -> pathlib.Path:
    """Save atomically (:func:`prepare_for_save` first), weights inside the file up to
    :data:`SINGLE_FILE_MAX_BYTES`, beyond it (or when *external_data* names a file) in ``<name>.data``
    beside it, which onnx_ir writes first, atomically too."""
    path = pathlib.Path(path)
    prepare_for_save(model)
    total = sum(value.const_value.nbytes for graph in model.graphs() for value in graph.initializers.values()
                if value.const_value is not None)
    if external_data is None and total > SINGLE_FILE_MAX_BYTES:
        external_data = path.name + ".data"
    with atomic_path(path) as tmp:
        if external_data is not None and _has_large_strings(model):
            # onnx_ir would move string tensors to the data file, which cannot hold them; onnx keeps them inline
            onnx.save_model(ir.serde.serialize_model(model), tmp, save_as_external_data=True,
                            all_tensors_to_one_file=True, location=external_data, size_threshold=256)
        elif external_data is not None:
            ir.save(model, tmp, external_data=external_data)
        else:  # external weights (memory-mapped from other files) are written inline, then put back
            values = [value for graph in model.graphs() for value in graph.initializers.values()]
            tensors = [value.const_value for value in values]
            try:
                for value, tensor in zip(values, tensors, strict=True):
                    if isinstance(tensor, ir.ExternalTensor):  # (its bytes read once, as it is serialized)
                        value.const_value = ir.LazyTensor(lambda tensor=tensor: tensor, tensor.dtype, tensor.shape,
                                                          name=tensor.name)
                ir.save(model, tmp)
            finally:
                for value, tensor in zip(values, tensors, strict=True):
                    value.const_value = tensor
    return path
