"""Export a transformers decoder (``LlamaForCausalLM``, ``Qwen2ForCausalLM``, ...) to ONNX with its KV cache as
inputs and outputs, in the names onnxruntime-genai uses, ready for ``mobile-ep llm``.

    from mobile_ep.llm.torch_export import export_decoder
    export_decoder(model, "decoder.onnx")               # torch.onnx's dynamo exporter
    export_decoder(model, "decoder.onnx", dynamo=False)  # the TorchScript-based one

The exported graph takes ``input_ids [1, seq]``, ``attention_mask [1, past + seq]``, ``position_ids [1, seq]``
and per layer ``past_key_values.N.key`` / ``.value [1, kv_heads, past, head_dim]``; it returns ``logits
[1, seq, vocab]`` and ``present.N.key`` / ``.value [1, kv_heads, past + seq, head_dim]``.  The model is
wrapped so that the past tensors become the ``DynamicCache`` transformers expects.  Needs torch and
transformers (not dependencies of mobile-ep).
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

__all__ = ["export_decoder", "input_names", "output_names"]


def input_names(layers: int) -> list[str]:
    return ["input_ids", "attention_mask", "position_ids"] + [
        f"past_key_values.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]


def output_names(layers: int) -> list[str]:
    return ["logits"] + [f"present.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]


def _dims(config: Any) -> tuple[int, int, int]:
    layers = config.num_hidden_layers
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return layers, kv_heads, head_dim


def export_decoder(model: Any, path: str | os.PathLike, *, dynamo: bool = True, opset: int | None = None,
                   example_seq: int = 3, example_past: int = 5) -> pathlib.Path:
    """Export *model* (a transformers ``*ForCausalLM`` in eval mode) to *path*; weights over 2 GB go to
    ``<path>.data`` (torch.onnx's own rule).  Returns *path*."""
    import torch
    from transformers.cache_utils import DynamicCache

    config = model.config
    layers, kv_heads, head_dim = _dims(config)

    class _WithCache(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, *past):
            cache = DynamicCache(config=config)
            for layer in range(layers):
                cache.update(past[2 * layer], past[2 * layer + 1], layer)
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                             past_key_values=cache, use_cache=True)
            presents = []
            for layer in out.past_key_values.layers[:layers]:
                presents += [layer.keys, layer.values]
            return (out.logits, *presents)

    seq, past_len = example_seq, example_past
    dtype = next(model.parameters()).dtype
    args = (torch.zeros(1, seq, dtype=torch.int64), torch.ones(1, past_len + seq, dtype=torch.int64),
            torch.arange(past_len, past_len + seq).unsqueeze(0),
            *[torch.zeros(1, kv_heads, past_len, head_dim, dtype=dtype) for _ in range(2 * layers)])
    names_in, names_out = input_names(layers), output_names(layers)
    path = pathlib.Path(path)
    wrapper = _WithCache().eval()
    with torch.no_grad():
        if dynamo:
            seq_dim, past_dim, total_dim = (torch.export.Dim(n) for n in ("seq", "past", "total"))
            shapes = {"input_ids": {1: seq_dim}, "attention_mask": {1: total_dim}, "position_ids": {1: seq_dim},
                      "past": tuple({2: past_dim} for _ in range(2 * layers))}
            torch.onnx.export(wrapper, args, str(path), input_names=names_in, output_names=names_out,
                              dynamic_shapes=shapes, dynamo=True, opset_version=opset or 18,
                              external_data=_needs_external(model))
        else:
            axes = {"input_ids": {1: "seq"}, "attention_mask": {1: "total"}, "position_ids": {1: "seq"},
                    "logits": {1: "seq"}}
            axes.update({name: {2: "past"} for name in names_in[3:]})
            axes.update({name: {2: "total"} for name in names_out[1:]})
            torch.onnx.export(wrapper, args, str(path), input_names=names_in, output_names=names_out,
                              dynamic_axes=axes, dynamo=False, opset_version=opset or 17)
    return path


def _needs_external(model: Any) -> bool:
    return sum(p.numel() * p.element_size() for p in model.parameters()) > (1 << 31) - (1 << 26)
