"""``mobile-ep llm`` writes a Kotlin and a Swift generation loop in the graphs' own names, shapes and sizes (checked
the way the README's snippets are: every name fed is an input of the graph, every input is fed, every name read
is an output), doing the KV-cache update the verification does (:mod:`mobile_ep.llm.generate`)."""

from __future__ import annotations

import re

import onnx
import pytest
from decoders import decoder

import mobile_ep

CONTEXT, PREFILL = 48, 8


def _renamed(tmp_path):
    """The llama export with other cache names (``past.N.k``/``.v`` in, ``kv_out.N.k``/``.v`` out) and logits
    called ``scores``: the loops must use these."""
    model = onnx.load(decoder("llama"))
    names = {"logits": "scores"}
    for i in range(2):
        for kind, short in (("key", "k"), ("value", "v")):
            names[f"past_key_values.{i}.{kind}"] = f"past.{i}.{short}_key" if kind == "key" else f"past.{i}.{short}_value"
            names[f"present.{i}.{kind}"] = f"kv_out.{i}.{kind}"
    for value in [*model.graph.input, *model.graph.output]:
        value.name = names.get(value.name, value.name)
    for node in model.graph.node:
        node.input[:] = [names.get(n, n) for n in node.input]
        node.output[:] = [names.get(n, n) for n in node.output]
    path = tmp_path / "renamed.onnx"
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("app")
    out = tmp / "out"
    report = mobile_ep.build_llm(_renamed(tmp), "qnn", context=CONTEXT, prefill=PREFILL, output=out, steps=8)
    assert report.verified
    return out, report


def _graph(out, name):
    model = onnx.load(out / f"{name}.onnx", load_external_data=False)
    inputs = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.input}
    return inputs, {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.output}


def _array(text, pattern):
    return re.findall(r'"([^"]+)"', re.search(pattern, text).group(1))


def test_kotlin_loop_uses_the_graphs_names_and_sizes(written):
    out, report = written
    kotlin = (out / "Generate.kt").read_text()
    assert report.app["kotlin"] == "Generate.kt"
    for name in ("prefill", "decode"):
        inputs, outputs = _graph(out, name)
        fed = set(re.findall(r'"([^"]+)" to ids\(', kotlin))
        fed |= set(_array(kotlin, r"val PAST_KEYS = arrayOf\(([^)]*)\)")) | set(
            _array(kotlin, r"val PAST_VALUES = arrayOf\(([^)]*)\)"))
        assert fed == set(inputs)
        read = set(_array(kotlin, r"val PRESENT_KEYS = arrayOf\(([^)]*)\)")) | set(
            _array(kotlin, r"val PRESENT_VALUES = arrayOf\(([^)]*)\)")) | set(re.findall(r'result\.get\("([^"]+)"\)', kotlin))
        assert read == set(outputs) and "scores" in read and "kv_out.1.value" in read
        # the cache's slots and the presents' slots, as the graphs have them
        assert inputs["past.0.k_key"][2] == CONTEXT - (PREFILL if name == "prefill" else 1)
        assert outputs["kv_out.0.key"][2] == (PREFILL if name == "prefill" else 1)
    assert f"const val CONTEXT = {CONTEXT}" in kotlin and f"const val PREFILL = {PREFILL}" in kotlin
    assert "const val KV_HEADS = 2" in kotlin and "const val HEAD_DIM = 16" in kotlin
    # the KV update generate.py verifies: prompt slots from CONTEXT - PREFILL in the mask, the decode token's
    # own slot last, its key and value stored at slot `filled`
    assert "it.fill(1, CONTEXT - PREFILL, CONTEXT - PREFILL + prompt.size)" in kotlin
    assert "it.fill(1, 0, filled); it[CONTEXT - 1] = 1" in kotlin
    assert "store(floats(result.get(PRESENT_KEYS[i]).get()), 1, keys[i], 1, filled)" in kotlin
    assert kotlin.count("{") == kotlin.count("}") and kotlin.count("(") == kotlin.count(")")


def test_swift_loop_uses_the_graphs_names_and_sizes(written):
    out, report = written
    swift = (out / "Generate.swift").read_text()
    assert report.app["swift"] == "Generate.swift"
    inputs, outputs = _graph(out, "decode")
    fed = set(re.findall(r'inputs\["([^"]+)"\] =', swift)) | set(_array(swift, r"let pastKeys = \[([^\]]*)\]")) | set(
        _array(swift, r"let pastValues = \[([^\]]*)\]"))
    assert fed == set(inputs)
    read = set(_array(swift, r"let presentKeys = \[([^\]]*)\]")) | set(
        _array(swift, r"let presentValues = \[([^\]]*)\]")) | set(re.findall(r'result\["([^"]+)"\]', swift))
    assert read == set(outputs)
    assert f"let context = {CONTEXT}" in swift and f"let prefill = {PREFILL}" in swift
    assert "for i in (context - prefill)..<(context - prefill + prompt.count) { mask[i] = 1 }" in swift
    assert "mask[context - 1] = 1" in swift
    assert "length: 1, &keys[i], count: 1, to: filled)" in swift
    assert swift.count("{") == swift.count("}") and swift.count("(") == swift.count(")")


def test_report_lists_the_app_files(written):
    out, _ = written
    import json

    report = json.loads((out / "report.json").read_text())
    assert report["app"] == {"kotlin": "Generate.kt", "swift": "Generate.swift"}
    assert {f["path"] for f in report["files"]} >= {"Generate.kt", "Generate.swift"}
    assert report["interface"]["logits"] == "scores"
