"""The interface of a decoder export with a KV cache: which input is what, and the shapes of the fixed graphs.

A decoder export (``torch.onnx`` through :mod:`mobile_ep.llm.torch_export`, or any export in the names
onnxruntime-genai uses) takes ``input_ids``, ``attention_mask`` (the past and the new tokens), optionally
``position_ids``, and per layer a past key and value ``[batch, kv_heads, past, head_dim]``; it returns the
logits and per layer the present key and value (the past with the new tokens appended).  Inputs and outputs are
recognised by name: ``input_ids``, ``attention_mask``, ``position_ids``; a cache input or output name holds its
layer number and ``key`` or ``value`` (``past_key_values.3.key``, ``past_key.3``, ``present.3.value``); the
logits are the output ``logits``, else the one output that is not a cache output.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
from collections.abc import Sequence

import numpy as np
import onnx

from mobile_ep.errors import ModelError, UsageError

__all__ = ["Interface", "interface", "graph_shapes"]

_LAYER = re.compile(r"\d+")
_KIND = re.compile(r"key|value")


@dataclasses.dataclass(frozen=True)
class Interface:
    """The names of a decoder's inputs and outputs, by role, and the KV cache's geometry."""

    input_ids: str
    attention_mask: str
    position_ids: str | None
    #: Per layer: (key, value) input names.
    past: tuple[tuple[str, str], ...]
    logits: str
    #: Per layer: (key, value) output names.
    present: tuple[tuple[str, str], ...]
    kv_heads: int
    head_dim: int
    #: The cache's element type (numpy name: float32, float16).
    kv_dtype: str
    vocab: int | None

    @property
    def layers(self) -> int:
        return len(self.past)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _layered(names: Sequence[str], what: str, path: pathlib.Path) -> tuple[tuple[str, str], ...]:
    found: dict[int, dict[str, str]] = {}
    for name in names:
        layer, kinds = _LAYER.search(name), _KIND.findall(name.lower())
        if layer is None or not kinds:
            raise ModelError(f"{path}: {what} {name!r} names no layer and key/value (expected names like "
                             f"past_key_values.0.key)")
        layer, kind = int(layer[0]), kinds[-1]
        found.setdefault(layer, {})[kind] = name
    if sorted(found) != list(range(len(found))) or any(len(kv) != 2 for kv in found.values()):
        raise ModelError(f"{path}: the {what}s are not one key and one value per layer 0..N-1: {sorted(names)}")
    return tuple((found[i]["key"], found[i]["value"]) for i in range(len(found)))


def interface(proto: onnx.ModelProto, path: str | pathlib.Path) -> Interface:
    """The decoder interface of *proto* (read from *path*, named in errors): a :class:`ModelError` saying what
    is missing when it is not a decoder with a KV cache."""
    path = pathlib.Path(path)
    initializers = {t.name for t in proto.graph.initializer}
    inputs = {v.name: v for v in proto.graph.input if v.name not in initializers}
    outputs = {v.name: v for v in proto.graph.output}
    listed = ", ".join(inputs) or "none"
    for needed in ("input_ids", "attention_mask"):
        if needed not in inputs:
            raise ModelError(f"{path}: not a decoder export with a KV cache: no input {needed!r} (inputs: {listed})")
    fused = sorted({n.op_type for n in proto.graph.node if n.domain == "com.microsoft"
                    and n.op_type in ("GroupQueryAttention", "MultiHeadAttention", "Attention")})
    if fused:
        raise ModelError(f"{path}: its attention is onnxruntime's fused com.microsoft {', '.join(fused)} (what "
                         "onnxruntime-genai's model builder writes), which places the cache by the mask's count of tokens, "
                         "not by its slots; no mobile backend takes it and the fixed-context graphs need "
                         "the attention as ONNX ops: export with torch.onnx (mobile_ep.llm.torch_export, docs/llm.md)")
    past = [name for name in inputs if name not in ("input_ids", "attention_mask", "position_ids")
            and _KIND.search(name.lower()) and name != "past_sequence_length"]
    present = [name for name in outputs if _KIND.search(name.lower())]
    if not past or not present:
        raise ModelError(f"{path}: not a decoder export with a KV cache: no past_key_values.N.key/value inputs and "
                         f"present.N.key/value outputs (inputs: {listed}; outputs: {', '.join(outputs)})")
    extra = sorted(set(inputs) - {"input_ids", "attention_mask", "position_ids", *past})
    if extra:
        raise ModelError(f"{path}: inputs a fixed-context decoder does not have: {', '.join(extra)} (onnxruntime-genai's "
                         "model builder writes these for its GroupQueryAttention; export with torch.onnx instead, "
                         "see docs/llm.md)")
    logits = "logits" if "logits" in outputs else next((n for n in outputs if n not in present), None)
    if logits is None:
        raise ModelError(f"{path}: the decoder has no logits output (outputs: {', '.join(outputs)})")
    past_pairs, present_pairs = _layered(past, "past input", path), _layered(present, "present output", path)
    if len(past_pairs) != len(present_pairs):
        raise ModelError(f"{path}: {len(past_pairs)} layers of past inputs but {len(present_pairs)} of presents")
    cache = inputs[past_pairs[0][0]].type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else None for d in cache.shape.dim]
    if len(dims) != 4 or dims[1] is None or dims[3] is None:
        raise ModelError(f"{path}: past input {past_pairs[0][0]!r} is not [batch, kv_heads, past, head_dim] with "
                         f"known heads and head size (its shape: {dims})")
    vocab_dims = outputs[logits].type.tensor_type.shape.dim
    vocab = vocab_dims[-1].dim_value if vocab_dims and vocab_dims[-1].HasField("dim_value") else None
    kv_dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(cache.elem_type)).name
    return Interface("input_ids", "attention_mask", "position_ids" if "position_ids" in inputs else None,
                     past_pairs, logits, present_pairs, dims[1], dims[3], kv_dtype, vocab)


def graph_shapes(face: Interface, context: int, seq: int) -> dict[str, tuple[int, ...]]:
    """Input shapes of the graph that takes *seq* new tokens over a KV cache of ``context - seq``."""
    if not 1 <= seq < context:
        raise UsageError(f"the graph's new tokens ({seq}) must be at least 1 and fewer than --context ({context})")
    shapes = {face.input_ids: (1, seq), face.attention_mask: (1, context)}
    if face.position_ids:
        shapes[face.position_ids] = (1, seq)
    for key, value in face.past:
        shapes[key] = shapes[value] = (1, face.kv_heads, context - seq, face.head_dim)
    return shapes
