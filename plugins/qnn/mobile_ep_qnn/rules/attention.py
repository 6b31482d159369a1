"""Attention and RotaryEmbedding (ONNX opset 23+): decomposed by the QNN EP into QNN MatMul, Softmax and
element-wise ops."""

from __future__ import annotations

from ._base import SUPPORTED, DataType, QnnRule, Support


class Attention(QnnRule):
    op_types = ("Attention",)
    input_types = {0: frozenset({DataType.FLOAT, DataType.FLOAT16})}
    static_outputs = False  # (static inputs make them static; ONNX's inference leaves qk_matmul_output open)

    def check(self, unit, ctx):
        """A float mask (not a bool one); no nonpad_kv_seqlen (input 6)."""
        node = unit.target
        if len(node.inputs) > 3 and node.inputs[3] is not None and ctx.dtype(node.inputs[3]) == DataType.BOOL:
            return Support.no("a bool attn_mask (input 3): the QNN EP takes an additive float mask")
        if len(node.inputs) > 6 and node.inputs[6] is not None:
            return Support.no("nonpad_kv_seqlen (input 6): the QNN EP does not take padded key/value lengths")
        return SUPPORTED


class RotaryEmbedding(QnnRule):
    op_types = ("RotaryEmbedding",)

    def check(self, unit, ctx):
        """float32 or float16."""
        return SUPPORTED
