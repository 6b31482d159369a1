"""Reading, validating and saving models: with the exporters and :mod:`mobile_ep.passes.fold_constants`, the
only code that touches ONNX protobufs.

Models live in memory as ``onnx_ir.Model``; external weights stay memory-mapped (onnx_ir's lazy external
tensors) and are never copied.  Every problem a file can have ends in a one-line :class:`mobile_ep.ModelError`
naming it.

One module a job, in the order a file meets them:

- :mod:`~mobile_ep.model_io.guard`: the file parsed by onnx, and :func:`read_proto`'s short guard for what
  neither onnx's checker nor onnxruntime refuse, or refuse only after the harm is done (files that cannot be
  one protobuf message, subgraphs nested too deep, declared shapes too large to allocate, external data
  outside the model's folder or past the end of its file), before anything opens a file the model refers to;
- :mod:`~mobile_ep.model_io.validation`: :func:`validate` runs onnx's checker, and refuses values whose
  *inferred* shape is absurd before onnxruntime folds them;
- :mod:`~mobile_ep.model_io.to_ir`: :func:`load` and :func:`from_proto` make the IR, with ONNX's shapes;
- :mod:`~mobile_ep.model_io.saving`: :func:`save` writes through onnx_ir, atomically, with an IR version
  onnxruntime accepts;
- :mod:`~mobile_ep.model_io.protos`: what they share (walks over a proto's graphs, data type sizes, shape
  inference without the large weights).

Each limit lives in the module that applies it (e.g. ``guard.MAX_VALUE_BYTES``, ``saving.SINGLE_FILE_MAX_BYTES``):
the names below are copies, for reading.
"""

from __future__ import annotations

from mobile_ep.model_io.guard import (
    KNOWN_DOMAINS,
    MAX_ELEMENTS,
    MAX_PROTO_BYTES,
    MAX_SUBGRAPH_DEPTH,
    MAX_VALUE_BYTES,
    check_path,
    inspect_proto,
    read_proto,
)
from mobile_ep.model_io.protos import MAX_IR_VERSION, graphs, subgraphs
from mobile_ep.model_io.saving import (
    SINGLE_FILE_MAX_BYTES,
    atomic_path,
    prepare_for_save,
    save,
    target_ir_version,
)
from mobile_ep.model_io.to_ir import (
    check_shapes_strictly,
    from_proto,
    infer_shapes,
    inline_small_weights,
    load,
)
from mobile_ep.model_io.validation import check_inferred_shapes, validate

__all__ = [
    "MAX_IR_VERSION", "MAX_ELEMENTS", "MAX_VALUE_BYTES", "MAX_SUBGRAPH_DEPTH", "MAX_PROTO_BYTES", "KNOWN_DOMAINS",
    "SINGLE_FILE_MAX_BYTES",
    "read_proto", "inspect_proto", "check_path", "validate", "check_inferred_shapes",
    "load", "from_proto", "infer_shapes", "check_shapes_strictly", "inline_small_weights",
    "target_ir_version", "prepare_for_save", "save", "atomic_path", "graphs", "subgraphs",
]
