"""Exporters: the EP-aware model as ONNX and as ORT format (through onnxruntime's own conversion)."""

from __future__ import annotations

import os
import pathlib

from mobile_ep import model_io as mir
from mobile_ep.errors import ModelError

__all__ = ["write_ort", "ort_format_ops"]


def write_ort(onnx_path: str | os.PathLike, ort_path: str | os.PathLike) -> pathlib.Path:
    """Convert to ORT format the way ``convert_onnx_models_to_ort --optimization_style Runtime`` does.

    All optimization levels run, but ORT's minimal-build optimizations (Conv+activation fusion, QDQ
    fusions, ...) are only *recorded*, not applied: on the device they are replayed for the nodes the
    execution provider did not take.  So every node the EP can claim stays a plain ONNX op, and the CPU
    part still gets ORT's fusions.  The NCHWc transformer is disabled as for any non-x86 target.
    """
    import onnxruntime as ort

    target = pathlib.Path(ort_path)
    with mir.atomic_path(target) as tmp:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.optimized_model_filepath = str(tmp)
        so.log_severity_level = 3
        so.add_session_config_entry("session.save_model_format", "ORT")
        so.add_session_config_entry("optimization.minimal_build_optimizations", "save")
        # Mobile targets are ARM: keep int8 QDQ as is (ORT's converter sets this for --target_platform arm).
        so.add_session_config_entry("session.qdqisint8allowed", "1")
        mir.lean_session_options(so)  # only written, never run: same file, less time and memory
        try:
            ort.InferenceSession(
                str(onnx_path), so, providers=["CPUExecutionProvider"], disabled_optimizers=["NchwcTransformer"]
            )
        except Exception as exc:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelError(f"onnxruntime could not convert {onnx_path} to ORT format: {message}") from None
        mir.canonicalize_ort_file(tmp)  # onnxruntime's hash-map order differs per process: same model, same bytes
    mir.release_memory()
    return target


def ort_format_ops(ort_path: str | os.PathLike) -> set[str]:
    """The op types (``domain:op`` for non-default domains) an ORT format model's main graph holds."""
    from onnxruntime.tools.ort_format_model.ort_flatbuffers_py.fbs import InferenceSession

    data = pathlib.Path(ort_path).read_bytes()
    session = InferenceSession.InferenceSession.GetRootAsInferenceSession(data, 0)
    graph = session.Model().Graph()
    ops = set()
    for i in range(graph.NodesLength()):
        node = graph.Nodes(i)
        domain = node.Domain().decode() if node.Domain() else ""
        op = node.OpType().decode()
        ops.add(op if domain in ("", "ai.onnx") else f"{domain}:{op}")
    return ops
