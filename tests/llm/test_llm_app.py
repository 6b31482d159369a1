"""``mobile-ep llm`` writes a Kotlin and a Swift generation loop in the graphs' own names, shapes and sizes (checked
the way the README's snippets are: every name fed is an input of the graph, every input is fed, every name read
is an output), doing the KV-cache update the verification does (:mod:`mobile_ep.llm.generate`)."""

from __future__ import annotations

import pathlib
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


# A model split into parts (--max-part-mb): the loops run each graph as its parts in order, one session each, the
# hidden state handed from part to part, each part's presents written into its own layers' slots.

SPLIT_MB = 0.2  # (the test decoder's 0.33 MB of weights: 2 parts of one layer each)


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("split")
    out = tmp / "out"
    report = mobile_ep.build_llm(_renamed(tmp), "qnn", context=CONTEXT, prefill=PREFILL, output=out, steps=8,
                                 max_part_mb=SPLIT_MB)
    assert report.verified and len(report.weights) == 2
    return out, report


_KOTLIN_PART = re.compile(r'ModelPart\("([^"]+)", "([^"]+)", (\d+) until (\d+),\s*arrayOf\(([^)]*)\), (null|"[^"]+")\)')
_SWIFT_PART = re.compile(r'ModelPart\(prefillGraph: "([^"]+)", decodeGraph: "([^"]+)", layers: (\d+)\.\.<(\d+),'
                         r'\s*inputs: \[([^\]]*)\], handsOn: (nil|"[^"]+")\)')


def _parts(text, pattern):
    """The loop's parts: (prefill file, decode file, its layers, its inputs besides the cache, what it hands on)."""
    return [(pre, dec, list(range(int(a), int(b))), re.findall(r'"([^"]+)"', inputs), hands.strip('"')
             if hands not in ("null", "nil") else None) for pre, dec, a, b, inputs, hands in pattern.findall(text)]


def _kotlin_loop(out):
    kotlin = (out / "Generate.kt").read_text()
    names = {what: _array(kotlin, rf"val {what} = arrayOf\(([^)]*)\)")
             for what in ("PAST_KEYS", "PAST_VALUES", "PRESENT_KEYS", "PRESENT_VALUES")}
    made = set(re.findall(r'"([^"]+)" to ids\(', kotlin))
    logits = set(re.findall(r'result\.get\("([^"]+)"\)', kotlin))
    sizes = {what: int(re.search(rf"const val {what} = (\d+)", kotlin).group(1))
             for what in ("CONTEXT", "PREFILL", "KV_HEADS", "HEAD_DIM")}
    return kotlin, _parts(kotlin, _KOTLIN_PART), names, made, logits, sizes


def _swift_loop(out):
    swift = (out / "Generate.swift").read_text()
    names = {what: _array(swift, rf"let {name} = \[([^\]]*)\]")
             for what, name in (("PAST_KEYS", "pastKeys"), ("PAST_VALUES", "pastValues"),
                                ("PRESENT_KEYS", "presentKeys"), ("PRESENT_VALUES", "presentValues"))}
    made = set(re.findall(r'inputs\["([^"]+)"\] =', swift))
    logits = set(re.findall(r'result\["([^"]+)"\]', swift)) | set(re.findall(r'part\.handsOn \?\? "([^"]+)"', swift))
    sizes = {what: int(re.search(rf"let {name} = (\d+)", swift).group(1))
             for what, name in (("CONTEXT", "context"), ("PREFILL", "prefill"), ("KV_HEADS", "kvHeads"),
                                ("HEAD_DIM", "headDim"))}
    return swift, _parts(swift, _SWIFT_PART), names, made, logits, sizes


def _check_parts(out, parts, names, made, logits, sizes, count):
    """Per part and graph: every name the loop feeds is an input of the graph and every input is fed, every name it
    reads is an output; the hidden state one part hands on is what the next takes; the sizes are the graphs'."""
    assert len(parts) == count
    files = [(f"part{k}.prefill.onnx", f"part{k}.decode.onnx") for k in range(1, count + 1)] if count > 1 else [
        ("prefill.onnx", "decode.onnx")]
    assert [(p[0], p[1]) for p in parts] == files
    assert [i for p in parts for i in p[2]] == list(range(2))  # (every layer once, in order)
    assert sizes == {"CONTEXT": CONTEXT, "PREFILL": PREFILL, "KV_HEADS": 2, "HEAD_DIM": 16}
    assert logits == {"scores"}  # (what the last part returns)
    for k, (prefill_file, decode_file, layers, inputs, hands_on) in enumerate(parts):
        before = parts[k - 1][4] if k else None
        # the part's own inputs: made by the loop (token ids, mask, positions) or the hidden state handed on
        assert inputs[0] == (before or "input_ids") and all(n in made for n in inputs[1:])
        for file, seq in ((prefill_file, PREFILL), (decode_file, 1)):
            graph = onnx.load(out / file, load_external_data=False)
            ins = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in graph.graph.input}
            outs = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in graph.graph.output}
            fed = set(inputs) | {names[what][i] for what in ("PAST_KEYS", "PAST_VALUES") for i in layers}
            assert fed == set(ins), file
            read = {names[what][i] for what in ("PRESENT_KEYS", "PRESENT_VALUES") for i in layers}
            assert read | {hands_on or "scores"} == set(outs), file
            for i in layers:
                assert ins[names["PAST_KEYS"][i]] == ins[names["PAST_VALUES"][i]] == [1, 2, CONTEXT - seq, 16]
                assert outs[names["PRESENT_KEYS"][i]] == outs[names["PRESENT_VALUES"][i]] == [1, 2, seq, 16]
                assert names["PAST_KEYS"][i] == f"past.{i}.k_key" and names["PRESENT_VALUES"][i] == f"kv_out.{i}.value"
            assert ins["attention_mask"] == [1, CONTEXT] and ins["position_ids"] == [1, seq]
            if hands_on:  # (handed on with the shape the next part takes)
                after = onnx.load(out / parts[k + 1][0 if seq == PREFILL else 1], load_external_data=False)
                taken = next(v for v in after.graph.input if v.name == hands_on)
                assert [d.dim_value for d in taken.type.tensor_type.shape.dim] == outs[hands_on] == [1, seq, 64]
                assert hands_on == f"hidden_states.{layers[-1] + 1}"
    assert parts[-1][4] is None and made == {"input_ids", "attention_mask", "position_ids"}


@pytest.mark.parametrize("which, count", [("split", 2), ("written", 1)])
def test_kotlin_loop_runs_the_parts_in_order(which, count, request):
    out, report = request.getfixturevalue(which)
    kotlin, parts, names, made, logits, sizes = _kotlin_loop(out)
    _check_parts(out, parts, names, made, logits, sizes, count)
    assert report.app == {"kotlin": "Generate.kt", "swift": "Generate.swift"}
    assert kotlin.count("{") == kotlin.count("}") and kotlin.count("(") == kotlin.count(")")


@pytest.mark.parametrize("which, count", [("split", 2), ("written", 1)])
def test_swift_loop_runs_the_parts_in_order(which, count, request):
    out, _ = request.getfixturevalue(which)
    swift, parts, names, made, logits, sizes = _swift_loop(out)
    _check_parts(out, parts, names, made, logits, sizes, count)
    assert swift.count("{") == swift.count("}") and swift.count("(") == swift.count(")")


def _in_order(text, *steps):
    where = [text.find(step) for step in steps]
    assert -1 not in where, [s for s, w in zip(steps, where, strict=True) if w < 0]
    assert where == sorted(where), steps


def test_loops_chain_the_parts_as_the_verification_does(split):
    """The order of operations of mobile_ep.llm.generate (_Graphs.start/step over _chain): the parts in order, each
    fed the earlier part's hidden state, its layers' cache, its presents stored into its layers' slots (prefill:
    the prompt's slots from 0; decode: slot `filled`), the logits from the last part."""
    out, _ = split
    kotlin, swift = (out / "Generate.kt").read_text(), (out / "Generate.swift").read_text()
    chain = kotlin[kotlin.index("private fun chain("):kotlin.index("fun prefill(")]
    _in_order(chain, "for ((k, part) in PARTS.withIndex())",
              "inputs[name] = feed[name] ?: previous!!.get(name).get()",  # (the earlier part's output)
              "inputs[PAST_KEYS[i]] = caches[j].first", "inputs[PAST_VALUES[i]] = caches[j].second",
              "sessions[k].run(inputs)", "previous = result", "for (i in part.layers) keep(result, i)",
              "return previous!!")
    prefill = kotlin[kotlin.index("fun prefill("):kotlin.index("fun decode(")]
    _in_order(prefill, "chain(prefillSessions, feed, { cache(past, CONTEXT - PREFILL) to cache(past, CONTEXT - PREFILL) })",
              "store(floats(result.get(PRESENT_KEYS[i]).get()), PREFILL, keys[i], prompt.size, 0)",
              "store(floats(result.get(PRESENT_VALUES[i]).get()), PREFILL, values[i], prompt.size, 0)",
              "filled = prompt.size", 'floats(result.get("scores").get())',
              "argmax(logits, prompt.size - 1, logits.size / PREFILL)")
    decode = kotlin[kotlin.index("fun decode("):kotlin.index("fun generate(")]
    _in_order(decode, "check(filled < CONTEXT - 1)", "it.fill(1, 0, filled); it[CONTEXT - 1] = 1",
              '"position_ids" to ids(longArrayOf(filled.toLong()))',
              "chain(decodeSessions, feed, { cache(keys[it], CONTEXT - 1) to cache(values[it], CONTEXT - 1) })",
              "store(floats(result.get(PRESENT_KEYS[i]).get()), 1, keys[i], 1, filled)",
              "store(floats(result.get(PRESENT_VALUES[i]).get()), 1, values[i], 1, filled)",
              "filled += 1", 'floats(result.get("scores").get())', "argmax(logits, 0, logits.size)")
    chain = swift[swift.index("func chain("):swift.index("func prefillPrompt(")]
    _in_order(chain, "for (k, part) in parts.enumerated()", "fed[name] = feed[name] ?? previous[name]!",
              "fed[pastKeys[i]] = key", "fed[pastValues[i]] = value",
              'Set([part.handsOn ?? "scores"] + Array(presentKeys[part.layers]) + Array(presentValues[part.layers]))',
              "try sessions[k].run(withInputs: fed, outputNames: names, runOptions: nil)",
              "for i in part.layers { try keep(result, i) }", "previous = result", "return previous")
    prefill = swift[swift.index("func prefillPrompt("):swift.index("func decodeToken(")]
    _in_order(prefill, "try chain(prefillSessions, inputs,",
              "store(try floats(out[presentKeys[i]]!), length: prefill, &keys[i], count: prompt.count, to: 0)",
              "filled = prompt.count", 'try floats(result["scores"]!)',
              "argmax(logits, row: prompt.count - 1, vocab: logits.count / prefill)")
    decode = swift[swift.index("func decodeToken("):swift.index("func generate(")]
    _in_order(decode, "precondition(filled < context - 1", "mask[context - 1] = 1",
              'inputs["position_ids"] = try ids([Int64(filled)])', "try chain(decodeSessions, inputs,",
              "store(try floats(out[presentKeys[i]]!), length: 1, &keys[i], count: 1, to: filled)",
              "store(try floats(out[presentValues[i]]!), length: 1, &values[i], count: 1, to: filled)",
              "filled += 1", 'try floats(result["scores"]!)')
    # (Swift: the methods are not named prefill/decode, which would hide the constant `prefill` inside the class)
    assert "func prefill(" not in swift and "generate(_ prompt: [Int64]" in swift


def test_the_loops_tables_drive_a_generation_equal_to_the_verifications(split):
    """The loop's tables (its constants, names per layer, parts in order) run through onnxruntime the way
    Generate.kt's chain does give the tokens the verification got: the layers' names are paired in the order the
    cache is written and read, the hidden state goes to the right part."""
    import numpy as np
    import onnxruntime as ort

    out, report = split
    _, parts, names, _, _, sizes = _kotlin_loop(out)
    C, P, H, D = sizes["CONTEXT"], sizes["PREFILL"], sizes["KV_HEADS"], sizes["HEAD_DIM"]
    sessions = {f: ort.InferenceSession(str(out / f), providers=["CPUExecutionProvider"])
                for part in parts for f in part[:2]}
    keys = [np.zeros((1, H, C - 1, D), np.float32) for _ in names["PAST_KEYS"]]
    values = [np.zeros((1, H, C - 1, D), np.float32) for _ in names["PAST_VALUES"]]

    def chain(graph, feed, past, keep):
        previous = {}
        for part in parts:
            inputs = {name: feed[name] if name in feed else previous[name] for name in part[3]}
            for i in part[2]:
                inputs[names["PAST_KEYS"][i]], inputs[names["PAST_VALUES"][i]] = past(i)
            session = sessions[part[graph]]
            previous = dict(zip([o.name for o in session.get_outputs()], session.run(None, inputs), strict=True))
            for i in part[2]:
                keep(previous, i)
        return previous

    generation = report.generations[0]
    prompt = generation.prompt
    mask = np.zeros((1, C), np.int64)
    mask[0, C - P:C - P + len(prompt)] = 1
    zeros = np.zeros((1, H, C - P, D), np.float32)

    def keep_prompt(result, i):
        keys[i][:, :, :len(prompt)] = result[names["PRESENT_KEYS"][i]][:, :, :len(prompt)]
        values[i][:, :, :len(prompt)] = result[names["PRESENT_VALUES"][i]][:, :, :len(prompt)]

    result = chain(0, {"input_ids": np.array([prompt + [0] * (P - len(prompt))]), "attention_mask": mask,
                       "position_ids": np.arange(P)[None]}, lambda i: (zeros, zeros), keep_prompt)
    tokens = [int(np.argmax(result["scores"][0, len(prompt) - 1]))]
    filled = len(prompt)
    while len(tokens) < len(generation.tokens):
        mask = np.zeros((1, C), np.int64)
        mask[0, :filled] = 1
        mask[0, C - 1] = 1

        def keep_token(result, i, n=filled):
            keys[i][:, :, n] = result[names["PRESENT_KEYS"][i]][:, :, 0]
            values[i][:, :, n] = result[names["PRESENT_VALUES"][i]][:, :, 0]

        result = chain(1, {"input_ids": np.array([[tokens[-1]]]), "attention_mask": mask,
                           "position_ids": np.array([[filled]])}, lambda i: (keys[i], values[i]), keep_token)
        filled += 1
        tokens.append(int(np.argmax(result["scores"][0, 0])))
    assert tokens == generation.tokens == generation.reference


def test_the_docs_snippets_call_the_generated_loops(split):
    """docs/llm.md's Kotlin snippet and Swift sentence use the generated files' own API: the Generator's
    constructor (one session per part of each graph, in the order of PARTS), the parts' graph fields, generate."""
    out, _ = split
    kotlin, swift = (out / "Generate.kt").read_text(), (out / "Generate.swift").read_text()
    docs = (pathlib.Path(__file__).parents[2] / "docs" / "llm.md").read_text()
    snippet = re.search(r"```kotlin\n(.*?)```", docs, re.S).group(1)
    constructor = re.search(r"class Generator\((.*?)\) \{", kotlin, re.S).group(1)
    assert re.findall(r"val (\w+): ([\w<>]+)", constructor) == [
        ("env", "OrtEnvironment"), ("prefillSessions", "List<OrtSession>"), ("decodeSessions", "List<OrtSession>")]
    fields = set(re.findall(r"val (\w+): ", re.search(r"class ModelPart\((.*?)\)\n", kotlin, re.S).group(1)))
    assert set(re.findall(r"\bit\.(\w+)", snippet)) == {"prefillGraph", "decodeGraph"} <= fields
    assert re.search(r"Generator\(env, PARTS\.map \{[^\n]*prefillGraph[^\n]*\n\s*PARTS\.map \{[^\n]*decodeGraph", snippet)
    assert "fun generate(prompt: LongArray, steps: Int): List<Int>" in kotlin
    assert "generator.generate(promptIds, 32)" in snippet
    assert "init(prefillSessions: [ORTSession], decodeSessions: [ORTSession])" in swift
    assert "func generate(_ prompt: [Int64], steps: Int) throws -> [Int]" in swift
    for name in ("prefillPrompt(_", "decodeToken(_", "parts.map { $0.prefillGraph }", "generate(promptIds, steps: 32)",
                 "Generator(prefillSessions:decodeSessions:)"):
        assert name in docs
    assert "let prefillGraph: String" in swift and "func prefillPrompt(_ prompt:" in swift
    assert "func decodeToken(_ token:" in swift


def test_graphs_that_do_not_chain_are_refused_not_written(split, tmp_path):
    """The loops are written only from graphs that chain: a part whose decode graph hands on another hidden state
    than its prefill graph is refused in one line naming the file."""
    import shutil

    from mobile_ep.errors import ModelError
    from mobile_ep.llm import app

    out, report = split
    for name in ("part1.prefill.onnx", "part1.decode.onnx", "part2.prefill.onnx", "part2.decode.onnx"):
        shutil.copy(out / name, tmp_path / name)
    model = onnx.load(tmp_path / "part1.decode.onnx", load_external_data=False)
    for node in model.graph.node:
        node.output[:] = ["hidden_states.x" if n == "hidden_states.1" else n for n in node.output]
    next(o for o in model.graph.output if o.name == "hidden_states.1").name = "hidden_states.x"
    onnx.save(model, tmp_path / "part1.decode.onnx")
    written = [{g: tmp_path / f"part{k}.{g}.onnx" for g in ("prefill", "decode")} for k in (1, 2)]
    with pytest.raises(ModelError, match=r"part1\.decode\.onnx.*prefill graph"):
        app.write(tmp_path, report.interface, written, CONTEXT, PREFILL)
    assert not (tmp_path / "Generate.kt").exists()
    app.write(tmp_path, report.interface, [{g: out / f"part{k}.{g}.onnx" for g in ("prefill", "decode")}
                                           for k in (1, 2)], CONTEXT, PREFILL)
    assert (tmp_path / "Generate.kt").read_text() == (out / "Generate.kt").read_text()
