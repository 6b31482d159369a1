"""Determinism: the same input and options give byte-identical outputs across runs and hash seeds.

Each run is a fresh ``mobile-ep`` process with its own ``PYTHONHASHSEED`` in its own folder (same relative
paths), so set and dict iteration orders, object addresses and temporary names all differ between runs.
Compared: every file ``convert`` writes (``.onnx``, ``.onnx.data``, ``.ort``, ``report.json`` without
its timings) and the ``check --json`` output without timings.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from mobile_ep.contract.plugins import make_plugins

HASH_SEEDS = ("0", "1", "4242")


def _without_timings(data):
    if isinstance(data, dict):
        return {k: _without_timings(v) for k, v in data.items() if k != "timings"}
    if isinstance(data, list):
        return [_without_timings(v) for v in data]
    return data


def _run(cwd: pathlib.Path, hash_seed: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    proc = subprocess.run([sys.executable, "-m", "mobile_ep.cli", *args], cwd=cwd, env=env, capture_output=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc


def _outputs(folder: pathlib.Path) -> dict[str, bytes]:
    files = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.name == "report.json":
                data = json.dumps(_without_timings(json.loads(data)), sort_keys=True).encode()
            files[str(p.relative_to(folder))] = data
    return files


@pytest.fixture(scope="module")
def backends():
    names = sorted(make_plugins().backends())
    if not names:
        pytest.skip("no backend installed")
    return names


def _model_with_subgraph_and_external_weights(folder: pathlib.Path) -> None:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), "w")
    then_g = helper.make_graph([helper.make_node("Relu", ["m"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 4])])
    else_g = helper.make_graph([helper.make_node("Sigmoid", ["m"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 4])])
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["i"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Add", ["i", "m"], ["a"]), helper.make_node("Softmax", ["a"], ["y"], axis=-1),
         helper.make_node("Relu", ["y"], ["z"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4])],
        initializer=[w, numpy_helper.from_array(np.array(0.0, np.float32), "zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, folder / "model.onnx", save_as_external_data=True, location="model.weights",
              size_threshold=0)


def _sample(folder: pathlib.Path) -> None:
    from mobile_ep.samples import write_sample

    shutil.move(write_sample(folder), folder / "model.onnx")


MODELS = {
    "sample_cnn": _sample,
    "subgraph_external": _model_with_subgraph_and_external_weights,
}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_convert_and_check_are_byte_identical_across_hash_seeds(tmp_path, backends, model):
    results, checks = [], []
    for seed in HASH_SEEDS:
        run_dir = tmp_path / f"run{seed}"
        run_dir.mkdir()
        MODELS[model](run_dir)
        for backend in backends[:1]:
            _run(run_dir, seed, "convert", "model.onnx", "--ep", backend, "-o", "out")
        check = _run(run_dir, seed, "check", "model.onnx", "--json")
        checks.append(_without_timings(json.loads(check.stdout)))
        results.append(_outputs(run_dir / "out"))
    assert results[0], "convert wrote nothing"
    assert any(name.endswith(".onnx") for name in results[0])
    for seed, other in zip(HASH_SEEDS[1:], results[1:], strict=True):
        assert sorted(other) == sorted(results[0]), seed
        for name in results[0]:
            assert other[name] == results[0][name], f"{name} differs with PYTHONHASHSEED={seed}"
    for seed, other in zip(HASH_SEEDS[1:], checks[1:], strict=True):
        assert other == checks[0], f"check --json differs with PYTHONHASHSEED={seed}"



@pytest.mark.parametrize("model_format", ["MLProgram", "NeuralNetwork"])
def test_coreml_compile_is_byte_identical_across_hash_seeds(tmp_path, backends, model_format):
    # the Core ML model inside the compiled partition: its metadata map and op attributes in a fixed order
    if "coreml" not in backends:
        pytest.skip("the coreml backend is not installed")
    results = []
    for seed in HASH_SEEDS[:2]:
        run_dir = tmp_path / f"run{seed}"
        run_dir.mkdir()
        _sample(run_dir)
        _run(run_dir, seed, "convert", "model.onnx", "--ep", "coreml", "--compile", "-O",
             f"coreml.model_format={model_format}", "-o", "out")
        results.append(_outputs(run_dir / "out"))
    assert any(name.endswith(".mlmodel") for name in results[0]) and any(
        name.endswith(".compiled.onnx") for name in results[0])
    assert sorted(results[1]) == sorted(results[0])
    for name in results[0]:
        assert results[1][name] == results[0][name], f"{name} differs between runs"
