"""``mobile-ep llm --ep qnn`` at the scale of the models phones run: a decoder of the Qwen2.5-0.5B shape (random
weights from its config, nothing downloaded, exported by torch.onnx with its weights as external data) goes through
the whole flow (graphs over a 512-token context, the split into parts, each graph checked, generation through the
written graphs against the export), the command's peak memory held to 1.5x the weights' size.

The peak is the resident set of the command's process, measured by the kernel (``ru_maxrss`` of the child, read by
a small parent of it so that nothing else the test runs counts)."""

from __future__ import annotations

import gc
import json
import pathlib
import shutil
import subprocess
import sys

import pytest

#: The Qwen2.5-0.5B shape (Qwen2ForCausalLM; tied embeddings).
QWEN2_05B = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                 num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768, rms_norm_eps=1e-6,
                 rope_theta=1000000.0, tie_word_embeddings=True)
#: A Llama-3.2-1B shape (LlamaForCausalLM; tied embeddings): 1.24 billion parameters.
LLAMA_1B = dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072, rms_norm_eps=1e-5,
                rope_theta=500000.0, tie_word_embeddings=True)
#: The goal: the command's peak resident memory at most this many times the weights' size.
PEAK_OVER_WEIGHTS = 1.5
#: What the test writes on disk, in parameters' bytes: the export (the tied embedding written twice), the two
#: graphs as onnxruntime optimized them (a copy of the weights each, in the command's work folder) and the output.
DISK_OVER_WEIGHTS = 6.0

#: Runs the command given as arguments in a child and prints the child's peak resident set size in bytes.
_MEASURE = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024); sys.exit(code)")


def _export(arch: str, config: dict, folder: pathlib.Path) -> pathlib.Path:
    import torch
    import transformers

    from mobile_ep.llm.torch_export import export_decoder

    torch.manual_seed(0)
    config_class, model_class = {"qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
                                 "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM)}[arch]
    model = model_class(config_class(**config)).eval()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    free = shutil.disk_usage(folder).free
    if free < DISK_OVER_WEIGHTS * weights:  # (checked before the export: a full disk fails every other job too)
        pytest.skip(f"{free / 2**30:.1f} GiB free on disk; the export and the flow need about "
                    f"{DISK_OVER_WEIGHTS * weights / 2**30:.0f} GiB")
    # (the TorchScript exporter, what docs/llm.md tells QNN users to use; each weight is a file of its own)
    path = export_decoder(model, folder / "decoder.onnx", dynamo=False)
    del model
    gc.collect()
    return path


def _weights_bytes(folder: pathlib.Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.name != "decoder.onnx")


def _run_llm(export: pathlib.Path, out: pathlib.Path, *args: str) -> tuple[subprocess.CompletedProcess, int]:
    run = subprocess.run([sys.executable, "-c", _MEASURE, sys.executable, "-m", "mobile_ep.cli", "llm", str(export),
                          "--ep", "qnn", "--context", "512", "--prefill", "128", "-o", str(out), "--json", *args],
                         capture_output=True, text=True)
    lines = run.stdout.strip().splitlines()
    return run, int(lines[-1])


# (the 1B model's float32 embedding table alone is 1002 MB: with a layer it is over the default 1024 MB a part)
@pytest.mark.parametrize("arch, config, budget, parts", [
    pytest.param("qwen2", QWEN2_05B, 1024, 3, id="qwen2-0.5b"),
    pytest.param("llama", LLAMA_1B, 1536, 4, id="llama-1b"),
])
def test_a_decoder_of_a_phone_model_size_goes_through_the_flow_within_its_memory_bound(arch, config, budget, parts,
                                                                                        tmp_path):
    (tmp_path / "export").mkdir()
    export = _export(arch, config, tmp_path / "export")
    weights = _weights_bytes(tmp_path / "export")
    run, peak = _run_llm(export, tmp_path / "out", "--max-part-mb", str(budget))
    assert run.returncode == 0, run.stderr
    report = json.loads("\n".join(run.stdout.strip().splitlines()[:-1]))
    assert report["parts"] == parts  # (whole layers per part under the budget)
    assert report["verification"]["equal"]
    assert all(g["equal"] for g in report["verification"]["generations"])
    for graph in report["graphs"].values():
        assert graph["backends"]["qnn"]["partitions"] == 1
        assert graph["backends"]["qnn"]["supported_nodes"] == graph["nodes"]
    print(f"{arch}: weights {weights / 2**30:.2f} GiB, peak {peak / 2**30:.2f} GiB ({peak / weights:.2f}x)")
    assert peak <= PEAK_OVER_WEIGHTS * weights, (
        f"peak resident memory {peak / 2**30:.2f} GiB is over {PEAK_OVER_WEIGHTS}x the weights' "
        f"{weights / 2**30:.2f} GiB")
