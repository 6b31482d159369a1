"""What onnx's checker refuses in a file and onnxruntime reads: :func:`mobile_ep.model_io.validate` goes on.

ONNX's default domain spelled out (``ai.onnx`` in ``opset_import`` or a node's domain) is read as ``""`` by
onnxruntime and by :func:`mobile_ep.model_io.read_proto` (the model is used, and written, with ``""``); onnx's
checker, run on the file, refuses it ("No Op registered for Relu with domain_version of 13" where no ``""``
opset is imported).
"""

from __future__ import annotations

import onnx

__all__ = ["CHECKS", "only_default_domain_refused"]

#: What onnx's checker refuses and onnxruntime accepts: a model with only these faults is used as onnxruntime
#: reads it, once an onnxruntime session has accepted it.
CHECKS = (
    "Field 'shape' of 'type' is required but missing",  # inputs, outputs, sequences without a shape
    "in initializer but not in graph input",  # IR 3 initializers not listed as inputs
    "No opset import for domain 'ai.onnx'",  # a node's domain ai.onnx (read as the default domain)
    "No Op registered for",  # an opset import of ai.onnx spelled out, where it cannot be checked in memory
)
_SPELLING_FAULTS = ("No Op registered for", "No opset import for domain 'ai.onnx'")


def only_default_domain_refused(exc: BaseException, proto: onnx.ModelProto) -> bool:
    """Whether onnx's checker refused a file with *exc* only for spelling the default domain: *proto*, the
    file as read (spelled ``""``), passes the checker in memory.  A model with external data is not
    checked in memory (its data would be looked for from the working folder): False."""
    if not any(fault in str(exc) for fault in _SPELLING_FAULTS):
        return False
    stack = [proto.graph]
    while stack:
        graph = stack.pop()
        if any(t.data_location == onnx.TensorProto.EXTERNAL for t in graph.initializer):
            return False
        stack += [a.g for n in graph.node for a in n.attribute if a.HasField("g")]
        stack += [g for n in graph.node for a in n.attribute for g in a.graphs]
    try:
        onnx.checker.check_model(proto, full_check=False)
    except Exception:  # ValidationError, and whatever else the checker raises
        return False
    return True
