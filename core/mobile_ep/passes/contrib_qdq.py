"""``com.microsoft`` QuantizeLinear/DequantizeLinear read as the standard ops they equal.

``onnxruntime.quantization`` writes its Q/DQ nodes in the ``com.microsoft`` domain when it quantizes to 16-bit
activations (``get_qnn_qdq_config(activation_type=QUInt16)``, the QNN EP's w8a16; ``extra_options=
{"UseQDQContribOps": True}``), every Q/DQ of the model, the 8-bit weights' too.  onnxruntime's kernels and its QDQ
node-unit selectors treat them as the standard ops, and the QNN EP takes them as it takes those; onnx's shape
inference does not know them, so their outputs have no shape.  Where the model's ONNX opset has the standard op
for the same types (uint16/int16/int4/uint4 from opset 21; 8-bit and int32 from 13), :func:`standardize` moves
them to the default domain and gives their outputs the input's shape: the rules, the QDQ units and the written
model then see the standard ops.  Below that opset they stay as they are (the backends' rules refuse them).
"""

from __future__ import annotations

import onnx_ir as ir

from mobile_ep import model_io

__all__ = ["standardize"]

_OPS = ("QuantizeLinear", "DequantizeLinear")
_EIGHT = {ir.DataType.UINT8, ir.DataType.INT8}
_SIXTEEN = {ir.DataType.UINT16, ir.DataType.INT16, ir.DataType.UINT4, ir.DataType.INT4}


def _quantized_type(node: ir.Node) -> ir.DataType | None:
    """The integer type of *node*'s quantized side: a DequantizeLinear's input, a QuantizeLinear's zero point
    (uint8 without one); None when unknown."""
    if node.op_type == "DequantizeLinear":
        value = node.inputs[0] if node.inputs else None
    else:
        value = node.inputs[2] if len(node.inputs) > 2 else None
        if value is None:
            return ir.DataType.UINT8
    return value.dtype if value is not None else None


def _standard_at(node: ir.Node, opset: int) -> bool:
    """Whether the standard op of *opset* computes what the ``com.microsoft`` *node* does."""
    if opset < 13 or {a for a in node.attributes} - {"axis"}:
        return False
    dtype = _quantized_type(node)
    allowed = set(_EIGHT) | ({ir.DataType.INT32} if node.op_type == "DequantizeLinear" else set())
    if opset >= 21:
        allowed |= _SIXTEEN
    return dtype in allowed


def standardize(model: ir.Model) -> int:
    """Move, in place, *model*'s ``com.microsoft`` QuantizeLinear/DequantizeLinear nodes to the default domain
    where its ONNX opset has them for their types, giving an output without a shape its input's shape and type
    (a DequantizeLinear: its scale's type; a QuantizeLinear: its zero point's, else uint8), then the shapes after
    them inferred (onnxruntime's file leaves them out).  Returns how many nodes moved."""
    opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 0))
    moved = 0
    for graph in model.graphs():
        for node in graph:
            if node.domain != "com.microsoft" or node.op_type not in _OPS or not _standard_at(node, opset):
                continue
            node.domain = ""
            node.version = None
            moved += 1
            source, out = node.inputs[0], node.outputs[0]
            if out.shape is None and source is not None and source.shape is not None:
                out.shape = source.shape
            if out.type is None:
                if node.op_type == "DequantizeLinear":
                    scale = node.inputs[1] if len(node.inputs) > 1 else None
                    dtype = scale.dtype if scale is not None else None
                else:
                    dtype = _quantized_type(node)
                if dtype is not None:
                    out.type = ir.TensorType(dtype)
    if moved:
        model_io.infer_shapes(model)
    return moved
