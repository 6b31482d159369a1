"""Loading, validating and saving models: the only module (with the exporters) touching ONNX protobufs.

Models live in memory as ``onnx_ir.Model``; external weights stay memory-mapped (onnx_ir's lazy
external tensors) and are never copied.  Every error a user can cause ends in a one-line
:class:`mobile_ep.ModelError`.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import tempfile
from collections.abc import Iterator

import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError
from onnx_ir.passes.common import NameFixPass, ShapeInferencePass

from .errors import ModelError

__all__ = [
    "MAX_IR_VERSION",
    "load",
    "from_proto",
    "to_proto",
    "save",
    "infer_shapes",
    "ort_optimized",
    "target_ir_version",
    "atomic_path",
]

#: Highest ONNX IR version onnxruntime 1.31 accepts (recent onnx releases write 14 by default).
MAX_IR_VERSION = 13
_MIN_IR_VERSION = 4  # IR 3 lists initializers as inputs; we always write 4+ with them removed.


def _check_path(path: str | os.PathLike) -> pathlib.Path:
    p = pathlib.Path(path)
    if not p.exists():
        raise ModelError(f"{p}: no such file")
    if p.is_dir():
        raise ModelError(f"{p}: is a directory, not an ONNX model")
    return p


def read_proto(path: str | os.PathLike, *, load_external_data: bool = False) -> onnx.ModelProto:
    """Parse a model file, turning every failure into a one-line ModelError."""
    p = _check_path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ModelError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if not data:
        raise ModelError(f"{p}: empty file, not an ONNX model")
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeWarning, ValueError) as exc:
        raise ModelError(f"{p}: not a valid ONNX model (protobuf parse failed: {exc or 'truncated or corrupt'})") from None
    if not proto.HasField("graph") or proto.ir_version <= 0:
        raise ModelError(f"{p}: not an ONNX model (no graph or IR version in the file)")
    if not proto.opset_import and proto.ir_version >= 3:
        raise ModelError(f"{p}: invalid ONNX model: it imports no opset")
    latest = onnx.defs.onnx_opset_version()
    for opset in proto.opset_import:
        if opset.domain in ("", "ai.onnx") and not 1 <= opset.version <= latest:
            raise ModelError(f"{p}: unsupported opset: the model imports ai.onnx opset {opset.version}; "
                             f"supported are 1 to {latest}")
    return proto


def validate(path: str | os.PathLike) -> None:
    """onnx's checker (by path, so external data is checked beside the model), folded into one line."""
    try:
        onnx.checker.check_model(str(path), full_check=False)
    except onnx.checker.ValidationError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "validation failed"
        raise ModelError(f"{path}: invalid ONNX model: {first}") from None
    except Exception as exc:  # the checker itself may raise other errors on hostile input
        raise ModelError(f"{path}: invalid ONNX model: {type(exc).__name__}: {exc}") from None


def from_proto(proto: onnx.ModelProto, *, base_dir: str | os.PathLike | None = None, shapes: bool = True) -> ir.Model:
    """An IR model from a ModelProto, with inferred shapes and a name on every node and value."""
    try:
        model = ir.serde.deserialize_model(proto)
    except Exception as exc:
        raise ModelError(f"cannot read the model's graph: {type(exc).__name__}: {exc}") from None
    if base_dir is not None:
        _set_base_dir(model, pathlib.Path(base_dir))
    if shapes:
        infer_shapes(model)
    NameFixPass()(model)
    return model


def _set_base_dir(model: ir.Model, base_dir: pathlib.Path) -> None:
    for graph in model.graphs():
        for value in graph.initializers.values():
            tensor = value.const_value
            if isinstance(tensor, ir.ExternalTensor):
                tensor.base_dir = base_dir  # type: ignore[misc]


def infer_shapes(model: ir.Model) -> ir.Model:
    """ONNX shape inference into the IR (weights are not copied: onnx_ir strips them for the call)."""
    ShapeInferencePass(check_type=False, strict_mode=False, data_prop=False)(model)
    return model


def load(path: str | os.PathLike, *, shapes: bool = True, check: bool = True) -> ir.Model:
    """Load a model file into the IR; one-line ModelError for anything wrong with it."""
    p = _check_path(path)
    proto = read_proto(p)
    if check:
        validate(p)
    return from_proto(proto, base_dir=p.parent, shapes=shapes)


def to_proto(model: ir.Model) -> onnx.ModelProto:
    return ir.serde.serialize_model(model)


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
        graph.sort()
    NameFixPass()(model)
    return model


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[pathlib.Path]:
    """Yield a temporary path beside *target*; on success it replaces *target* in one rename."""
    target = pathlib.Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = pathlib.Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()


def save(model: ir.Model, path: str | os.PathLike, *, external_data: str | None = None) -> pathlib.Path:
    """Save atomically, with a valid IR version.  Weights above 2 GB in total go to external data."""
    path = pathlib.Path(path)
    prepare_for_save(model)
    with atomic_path(path) as tmp:
        if external_data is None and _total_initializer_bytes(model) > 1_800_000_000:
            external_data = path.name + ".data"
        if external_data is not None:
            data_target = path.parent / external_data
            with atomic_path(data_target) as tmp_data:
                ir.save(model, tmp, external_data=tmp_data.name)
                # onnx_ir wrote the data file next to tmp under the temporary name: fix the reference.
                _rename_external(tmp, tmp_data.name, external_data)
        else:
            # Small enough for one file: embed weights that still live in another file (e.g. a temp dir).
            ir.external_data.load_to_model(model)
            ir.save(model, tmp)
    return path


def _total_initializer_bytes(model: ir.Model) -> int:
    total = 0
    for graph in model.graphs():
        for value in graph.initializers.values():
            if value.const_value is not None:
                total += value.const_value.nbytes
    return total


def _rename_external(model_path: pathlib.Path, old: str, new: str) -> None:
    proto = onnx.load(str(model_path), load_external_data=False)
    for tensor in onnx.external_data_helper._get_all_tensors(proto):
        for entry in tensor.external_data:
            if entry.key == "location" and entry.value == old:
                entry.value = new
    onnx.save(proto, str(model_path))


def ort_optimized(path: str | os.PathLike, out_dir: str | os.PathLike, *, level: str = "basic") -> pathlib.Path:
    """The model as an onnxruntime session sees it after optimization at *level* (basic by default).

    Every ORT session applies the basic level, so this is the graph execution providers partition.
    """
    import onnxruntime as ort

    levels = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    out = pathlib.Path(out_dir) / "optimized.onnx"
    so = ort.SessionOptions()
    so.graph_optimization_level = levels[level]
    so.optimized_model_filepath = str(out)
    so.log_severity_level = 3
    so.add_session_config_entry("session.optimized_model_external_initializers_file_name", "optimized.onnx.data")
    so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1048576")
    try:
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    except Exception as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{path}: onnxruntime cannot load the model: {message}") from None
    return out
