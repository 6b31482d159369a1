"""Op rules of the Core ML backend: one module per ONNX Runtime CoreML op builder (op or op family).

Each rule reproduces the support conditions of ORT's builder in
``onnxruntime/core/providers/coreml/builders/impl/<op>_op_builder.cc`` (ORT 1.30), for both model
formats, and beside them lowers the node to MIL ops for compiled partitions (``lower``, with a
:class:`mobile_ep_coreml.mil.MILBuilder`).  Modules whose name starts with ``_`` hold shared code and
register nothing.
"""

from mobile_ep_coreml.rules._base import CoreMLRule  # (the base every rule here derives from)

__all__ = ["CoreMLRule"]
