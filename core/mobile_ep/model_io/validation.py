"""Validation: onnx's checker on a file the guard passed (with the cases onnxruntime reads although the checker
refuses them), then the values whose *inferred* shape is absurd, refused before onnxruntime folds them."""

from __future__ import annotations

import logging
import os
import pathlib

import onnx

from mobile_ep import lenient, progress
from mobile_ep.errors import ModelError
from mobile_ep.model_io.guard import Refused, check_path, check_values, read_proto
from mobile_ep.model_io.protos import MAX_IR_VERSION, graphs, infer_proto

__all__ = ["validate", "check_inferred_shapes"]


def _checker_message(exc: BaseException) -> str:
    """onnx's message on one line, its "==> Context: ... Name: n OpType: Op" as "(node 'n', Op)"."""
    text = " ".join(str(exc).split()) or "validation failed"
    message, _, context = text.partition(" ==> Context: ")
    if "Name: " in context:
        name, _, op = context.rpartition("Name: ")[2].partition(" OpType:")
        op = op.strip() or "unnamed op"
        message += f" (node {name!r}, {op})" if name else f" ({op} node)"
    return message


def validate(path: str | os.PathLike, proto: onnx.ModelProto | None = None) -> onnx.ModelProto:
    """:func:`read_proto`, then onnx's checker (given the path, it checks external data beside the model),
    then :func:`check_inferred_shapes`.  *proto*: the file as :func:`read_proto` already returned it.

    Not ``full_check``: its strict shape inference refuses models onnxruntime loads (a declared output
    shape that disagrees with the inferred one is a warning to onnxruntime).
    """
    p, _ = check_path(path)
    progress.notify("model", str(p))
    if proto is None:
        proto = read_proto(p)
    try:
        onnx.checker.check_model(str(p), full_check=False)
    except Exception as exc:  # ValidationError, and whatever else the checker raises on hostile input
        if lenient.only_default_domain_refused(exc, proto):
            check_inferred_shapes(proto, str(p))
            return proto
        kind = "" if isinstance(exc, onnx.checker.ValidationError) else f"{type(exc).__name__}: "
        refusal = ModelError(f"{p}: invalid ONNX model: {kind}{_checker_message(exc)}")
        if not any(text in str(exc) for text in lenient.CHECKS):
            raise refusal from None
        check_inferred_shapes(proto, str(p))
        if not _onnxruntime_loads(p, proto):
            raise refusal from None
        logging.getLogger("mobile_ep").warning(
            "%s: onnx's checker refuses the model (%s), but onnxruntime loads it: continuing as onnxruntime "
            "reads it", p, _checker_message(exc))
        return proto
    check_inferred_shapes(proto, str(p))
    return proto


def _onnxruntime_loads(path: pathlib.Path, proto: onnx.ModelProto) -> bool:
    """Whether an onnxruntime session (no optimizations, never run) accepts the model: for files onnx's
    checker refuses but onnxruntime does not (no shape field, an explicit ``ai.onnx`` domain, IR 3
    initializers not listed as inputs ...)."""
    from mobile_ep import sessions

    so = sessions.options(level="disable", log=4)
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    source: str | bytes = str(path)
    if proto.ir_version > MAX_IR_VERSION:  # (as bytes with the IR version onnxruntime reads)
        lowered = onnx.ModelProto.FromString(proto.SerializeToString())
        lowered.ir_version = MAX_IR_VERSION
        so.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                    str(pathlib.Path(path).parent.resolve()))
        source = lowered.SerializeToString()
    try:
        sessions.open_session(source, so)
    except Exception:
        return False
    return True


def check_inferred_shapes(proto: onnx.ModelProto, label: str = "model") -> None:
    """Refuse values whose *inferred* shape is absurd (e.g. ConstantOfShape of 10^12 elements).

    onnxruntime folds constants while it loads a model: a tiny file could make it allocate terabytes.
    ONNX shape inference with data propagation (the model without its large weights) finds them first.
    """
    try:
        inferred = infer_proto(proto, data_prop=True)
    except Exception as exc:
        raise ModelError(f"{label}: invalid ONNX model: shape inference failed: {_checker_message(exc)}") from None
    try:  # (inputs were declared, and checked as such: here large initializers are inputs too)
        for index, graph in enumerate(graphs(inferred.graph)):
            check_values(graph, main=index == 0, inputs=False)
    except Refused as exc:
        raise ModelError(f"{label}: {exc}") from None
