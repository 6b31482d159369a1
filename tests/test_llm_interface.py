"""``mobile-ep llm`` on exports it cannot take: one line naming the file and what is missing (no torch needed)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from mobile_ep.errors import ModelError


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mobile_ep.cli", *args], capture_output=True, text=True)


def _save(tmp_path, nodes, inputs, outputs, initializers=(), name="m.onnx"):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17),
                                                                    helper.make_opsetid("com.microsoft", 1)])
    path = tmp_path / name
    onnx.save(model, path)
    return path


def _gqa_decoder(tmp_path):
    """A decoder as onnxruntime-genai's model builder writes one: com.microsoft GroupQueryAttention with
    seqlens_k and total_sequence_length computed from the mask."""
    rng = np.random.default_rng(0)
    hidden, heads, kv_heads, head, vocab = 32, 2, 1, 16, 8
    weights = [numpy_helper.from_array(rng.standard_normal((vocab, hidden)).astype(np.float32), "embed"),
               numpy_helper.from_array(rng.standard_normal((hidden, kv_heads * head)).astype(np.float32), "wk"),
               numpy_helper.from_array(rng.standard_normal((hidden, vocab)).astype(np.float32), "head"),
               numpy_helper.from_array(np.array([1], np.int64), "axes"),
               numpy_helper.from_array(np.array(1, np.int64), "one")]
    nodes = [helper.make_node("Gather", ["embed", "input_ids"], ["x"]),
             helper.make_node("MatMul", ["x", "wk"], ["kv"]),
             helper.make_node("ReduceSum", ["attention_mask", "axes"], ["count"]),
             helper.make_node("Sub", ["count", "one"], ["seqlens64"]),
             helper.make_node("Cast", ["seqlens64"], ["seqlens_k"], to=TensorProto.INT32),
             helper.make_node("Shape", ["attention_mask"], ["mask_shape"], start=1, end=2),
             helper.make_node("Squeeze", ["mask_shape"], ["total64"]),
             helper.make_node("Cast", ["total64"], ["total"], to=TensorProto.INT32),
             helper.make_node("GroupQueryAttention", ["x", "kv", "kv", "past_key_values.0.key", "past_key_values.0.value",
                                                      "seqlens_k", "total"], ["attn", "present.0.key", "present.0.value"],
                              domain="com.microsoft", num_heads=heads, kv_num_heads=kv_heads),
             helper.make_node("MatMul", ["attn", "head"], ["logits"])]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, "total"]),
              *[helper.make_tensor_value_info(f"past_key_values.0.{k}", TensorProto.FLOAT, [1, kv_heads, "past", head])
                for k in ("key", "value")]]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "seq", vocab]),
               *[helper.make_tensor_value_info(f"present.0.{k}", TensorProto.FLOAT, [1, kv_heads, "total", head])
                 for k in ("key", "value")]]
    return _save(tmp_path, nodes, inputs, outputs, weights, "gqa.onnx")


def test_model_builder_attention_is_refused_naming_it(tmp_path):
    path = _gqa_decoder(tmp_path)
    import onnxruntime as ort

    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])  # (onnxruntime itself runs it)
    run = _cli("llm", str(path), "--ep", "qnn", "-o", str(tmp_path / "o"))
    assert run.returncode == ModelError.exit_code
    errors = [line for line in run.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and str(path) in errors[0] and "GroupQueryAttention" in errors[0]
    assert "torch.onnx" in errors[0] and not (tmp_path / "o").exists()


def test_a_model_without_a_cache_is_refused(tmp_path):
    x = helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, 4])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, 4])
    y = helper.make_tensor_value_info("logits", TensorProto.INT64, [1, 4])
    path = _save(tmp_path, [helper.make_node("Add", ["input_ids", "attention_mask"], ["logits"])], [x, mask], [y])
    run = _cli("llm", str(path), "--ep", "qnn", "-o", str(tmp_path / "o"))
    assert run.returncode == ModelError.exit_code and len(run.stderr.strip().splitlines()) == 1
    assert "no past_key_values.N.key/value inputs" in run.stderr
