"""Fold constants: the model as an onnxruntime session sees it after its basic-level optimizations.

Every ORT session applies the basic level (constant folding, redundant-node elimination, ...) before an
execution provider is asked for its nodes, so that graph is what the backends judge.  onnxruntime itself
does the work: a session that is built only to write the optimized model, never run.
"""

from __future__ import annotations

import os
import pathlib

import onnx

from mobile_ep import model_io
from mobile_ep.errors import ModelError
from mobile_ep.export.ort_format import lean_session_options, ort_model_source

__all__ = ["ort_optimized", "OPTIMIZED_DATA", "OPTIMIZED_EXTERNAL_MIN_BYTES"]

#: Initializers of at least this size go to the optimized model's external data file: the ``.onnx`` stays
#: small (parsed in a few ms), the weights are memory-mapped when, and only when, something reads them.
#: Smaller tensors (shapes, axes, scales: what capability rules read) stay inline.
OPTIMIZED_EXTERNAL_MIN_BYTES = 1024
#: The name of that external data file, beside ``optimized.onnx``.
OPTIMIZED_DATA = "optimized.onnx.data"


def ort_optimized(path: str | os.PathLike, out_dir: str | os.PathLike, *, level: str = "basic",
                  inspected: bool = False, proto: onnx.ModelProto | None = None) -> pathlib.Path:
    """Write ``optimized.onnx`` into *out_dir*: the model at *path* after onnxruntime's optimizations at
    *level* (basic by default), its initializers of :data:`OPTIMIZED_EXTERNAL_MIN_BYTES` and more in
    :data:`OPTIMIZED_DATA` beside it.

    The file is read with :func:`mobile_ep.model_io.read_proto` (external data confined to its folder)
    before onnxruntime opens it, unless *inspected* says the caller has just done so (or wrote it) or hands
    that reading over as *proto*.  A model of a newer IR version than onnxruntime reads is given to it from
    memory with the IR version lowered.
    """
    import onnxruntime as ort

    levels = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    if not inspected and proto is None:
        proto = model_io.read_proto(path)
    out = pathlib.Path(out_dir) / "optimized.onnx"
    so = ort.SessionOptions()
    so.graph_optimization_level = levels[level]
    so.optimized_model_filepath = str(out)
    so.log_severity_level = 4  # errors come back as exceptions: keep stderr to our one line
    so.add_session_config_entry("session.optimized_model_external_initializers_file_name", OPTIMIZED_DATA)
    so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes",
                                str(OPTIMIZED_EXTERNAL_MIN_BYTES))
    lean_session_options(so)
    source = str(path) if proto is None else ort_model_source(path, so, proto)
    try:
        try:
            ort.InferenceSession(source, so, providers=["CPUExecutionProvider"])
        except Exception:
            if proto is not None:
                raise
            source = ort_model_source(path, so)  # (read only when onnxruntime refuses the file: its IR version?)
            if isinstance(source, str):
                raise
            ort.InferenceSession(source, so, providers=["CPUExecutionProvider"])
    except Exception as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{path}: onnxruntime cannot load the model: {message}") from None
    return out
