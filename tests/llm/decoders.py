"""Tiny transformers decoders exported to ONNX in the tests (configs only, random weights, nothing downloaded),
cached per session: :func:`decoder` returns the path of an export and the torch model it came from."""

from __future__ import annotations

import functools
import pathlib
import tempfile

#: Small configs of the two architectures ``mobile-ep llm`` is tested on.
CONFIGS = {
    "llama": dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=512, rms_norm_eps=1e-5, tie_word_embeddings=False),
    "qwen2": dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=512, rms_norm_eps=1e-6, tie_word_embeddings=False),
}

#: Random weights give near-flat logits, so greedy decoding would turn on rounding: weights are drawn with this
#: standard deviation (transformers' default is 0.02), which makes each step's top token clear.
INIT_STD = 0.4

_FOLDER = pathlib.Path(tempfile.mkdtemp(prefix="mobile-ep-llm-exports-"))


@functools.cache
def torch_model(arch: str = "llama", seed: int = 0):
    import torch
    import transformers

    config_class = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config}[arch]
    config = config_class(initializer_range=INIT_STD, **CONFIGS[arch])
    model_class = {"llama": transformers.LlamaForCausalLM, "qwen2": transformers.Qwen2ForCausalLM}[arch]
    torch.manual_seed(seed)
    model = model_class(config).eval()
    with torch.no_grad():  # (norm weights are ones and biases zeros after init: made random too)
        for name, param in model.named_parameters():
            if name.endswith(("norm.weight",)):
                param.copy_(1 + 0.2 * torch.randn_like(param))
            elif name.endswith("bias"):
                param.copy_(0.2 * torch.randn_like(param))
    return model


@functools.cache
def decoder(arch: str = "llama", dynamo: bool = True) -> pathlib.Path:
    """The ONNX export of :func:`torch_model` (*arch*) by torch.onnx's dynamo or TorchScript exporter."""
    from mobile_ep.llm.torch_export import export_decoder

    path = _FOLDER / f"{arch}.{'dynamo' if dynamo else 'legacy'}.onnx"
    return export_decoder(torch_model(arch), path, dynamo=dynamo)
