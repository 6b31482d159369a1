"""README.md: a user's README, short, in a fixed order, whose app snippets match what `convert` writes.

The Kotlin and Swift snippets are checked against the real set-up conversion (`mobile-ep convert --ep
nnapi` with no model: the built-in sample) and its Core ML twin: the model file they load exists in the
output folder, and the tensor names (and the input shape) they use are the converted model's own.  The
names are parsed out of the snippets, so editing a snippet is enough to be checked again.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# The docs that took over the README's details; they are written for users, like the README.
USER_DOCS = [README] + [ROOT / "docs" / name for name in
                        ("usage.md", "reliability.md", "performance.md", "compiled-nnapi.md", "compiled-coreml.md")]

SECTIONS = [
    "What it does",
    "Install and set up",
    "First problem: dynamic shapes",
    "convert and what it writes",
    "Using the output in an app",
    "Commands",
    "Backends",
    "Writing a backend",
    "Architecture",
    "Tests",
]

SETUP_COMMANDS = [
    "pip install ./ ./plugins/nnapi ./plugins/coreml && mobile-ep convert --ep nnapi",
    "pip install tox && tox",
]

# Development history does not belong in user documentation.
HISTORY = [
    r"\bissue\s*#?\s*\d+",
    r"(?<![\w&/])#\d+\b",  # "(#9)"
    r"\b(?:this|earlier|previous|last|that|the) sessions?(?: before)?\b(?! option| options)",
    r"\bsessions? before\b",
    r"\btried and not kept\b",
    r"\bearlier runs?\b",
    r"\bcommit [0-9a-f]{7,40}\b",
    r"\bthe (?:slower|faster|intel) machine\b",
    r"\bthis machine's (?:speed|phase)",
]


def readme() -> str:
    return README.read_text()


def fenced(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.S | re.M)


def one_block(lang: str, containing: str = "") -> str:
    blocks = [b for b in fenced(readme(), lang) if containing in b]
    assert len(blocks) == 1, f"expected one ```{lang} block with {containing!r} in README.md, found {len(blocks)}"
    return blocks[0]


def model_file(snippet: str) -> str:
    names = re.findall(r'"([\w.\-]+\.(?:ort|onnx))"', snippet)
    assert len(names) == 1, f"expected one model file name in the snippet, found {names}"
    return names[0]


def has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def setup_conversion(ep: str, tmp_path: pathlib.Path) -> pathlib.Path:
    """The README's set-up command (`mobile-ep convert --ep EP`, no model), into tmp_path/out."""
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "mobile_ep.cli", "convert", "--ep", ep, "-o", str(out)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return out


def io_of(path: pathlib.Path) -> tuple[dict[str, list], list[str]]:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return {i.name: i.shape for i in session.get_inputs()}, [o.name for o in session.get_outputs()]


# -- shape of the README --------------------------------------------------------------------------------
def test_readme_is_at_most_400_lines():
    assert len(readme().splitlines()) <= 400


def test_sections_come_in_order():
    assert re.findall(r"^## (.+?)\s*$", readme(), re.M) == SECTIONS


def test_the_two_setup_commands_are_verbatim():
    shell = "\n".join(fenced(readme(), "sh"))
    for command in SETUP_COMMANDS:
        assert command in shell.splitlines(), command


def test_links_to_docs_exist():
    for doc in USER_DOCS:
        for target in re.findall(r"\]\(([^)#]+\.md)\)", doc.read_text()):
            assert (doc.parent / target).resolve().exists(), f"{doc.name} links to missing {target}"


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: p.name)
def test_no_development_history(doc):
    text = doc.read_text()
    found = [m.group(0) for pattern in HISTORY for m in re.finditer(pattern, text, re.I)]
    assert not found, f"{doc.name}: {found}"


def test_performance_page_has_commands_and_number_markers():
    text = (ROOT / "docs" / "performance.md").read_text()
    for command in ("python bench/vs_ort.py", "python bench/scale.py", "python bench/memory.py"):
        assert command in text
    assert text.count("<!-- numbers: filled by bench -->") >= 3


# -- the app snippets against the real conversion -------------------------------------------------------
@pytest.mark.skipif(not has("mobile_ep_nnapi"), reason="the NNAPI backend is not installed")
def test_kotlin_snippet_matches_the_setup_conversion(tmp_path):
    import onnxruntime

    kotlin = one_block("kotlin", ".nnapi.ort")
    out = setup_conversion("nnapi", tmp_path)
    name = model_file(kotlin)
    assert name.endswith(".nnapi.ort") and (out / name).is_file(), sorted(p.name for p in out.iterdir())
    inputs, outputs = io_of(out / name)

    fed = re.findall(r'"([^"]+)"\s+to\b', kotlin)  # mapOf("input" to tensor)
    read = re.findall(r'\.get\("([^"]+)"\)', kotlin)  # result.get("probabilities")
    assert fed and set(fed) == set(inputs)
    assert read and set(read) <= set(outputs)
    shape = re.search(r"longArrayOf\(([\d,\s]+)\)", kotlin).group(1)
    assert [int(d) for d in shape.split(",")] == inputs[fed[0]]

    # Every file of the nnapi set-up run the README names is there.
    for mentioned in set(re.findall(r"`(?:out/)?(mobilenet_sample(?:\.nnapi)?\.(?:onnx|ort))`", readme())):
        assert (out / mentioned).is_file(), mentioned

    # The ORT format version the README states for this onnxruntime is the one in the file.
    stated = re.search(r"version (\d+) for onnxruntime (\d+\.\d+)", readme())
    assert stated, "README.md states which ORT format version the .ort has"
    if onnxruntime.__version__.startswith(stated.group(2) + "."):
        from onnxruntime.tools.ort_format_model.ort_flatbuffers_py.fbs import InferenceSession

        data = (out / name).read_bytes()
        version = InferenceSession.InferenceSession.GetRootAsInferenceSession(data, 0).OrtVersion().decode()
        assert version == stated.group(1)


@pytest.mark.skipif(not has("mobile_ep_qnn"), reason="the QNN backend is not installed")
def test_qnn_kotlin_snippet_matches_the_qnn_conversion_and_its_compiled_model(tmp_path):
    """QNN is a first-class backend: named in the intro, installed in the set-up section, in the commands, and
    its Kotlin snippet loads what `convert --ep qnn --compile` writes (the .ort and the EPContext model)."""
    text = readme()
    assert "Qualcomm **QNN**" in text.split("## What it does")[0]
    assert "pip install ./plugins/qnn && mobile-ep convert --ep qnn --compile" in "\n".join(fenced(text, "sh"))
    assert "--ep nnapi,qnn" in text.split("## Commands")[1].split("## Backends")[0]
    kotlin = one_block("kotlin", ".qnn.ort")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "mobile_ep.cli", "convert", "--ep", "qnn", "--compile", "-o",
                           str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    names = re.findall(r'"([\w.\-]+\.(?:ort|onnx))"', kotlin)
    assert sorted(names) == ["mobilenet_sample.qnn.compiled.onnx", "mobilenet_sample.qnn.ort"]
    binary = re.search(r"`(mobilenet_sample\.qnn\.compiled_qnn\.bin)`", text).group(1)
    assert (out / binary).is_file()
    fed = re.findall(r'"([^"]+)"\s+to\b(?! "htp")', kotlin)
    fed = [name for name in fed if name != "backend_type"]
    read = re.findall(r'\.get\("([^"]+)"\)', kotlin)
    shape = [int(d) for d in re.search(r"longArrayOf\(([\d,\s]+)\)", kotlin).group(1).split(",")]
    for name in names:
        assert (out / name).is_file(), sorted(p.name for p in out.iterdir())
        inputs, outputs = io_of(out / name) if name.endswith(".ort") else io_of_onnx(out / name)
        assert fed and set(fed) == set(inputs)
        assert read and set(read) <= set(outputs)
        assert shape == inputs[fed[0]]


def io_of_onnx(path: pathlib.Path) -> tuple[dict[str, list], list[str]]:
    """The graph inputs and outputs of a model file (an EPContext model needs the QNN EP to be loaded)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    weights = {t.name for t in graph.initializer}
    return ({v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in graph.input if v.name not in weights},
            [v.name for v in graph.output])


@pytest.mark.skipif(not has("mobile_ep_coreml"), reason="the Core ML backend is not installed")
def test_swift_snippet_matches_the_coreml_conversion(tmp_path):
    swift = one_block("swift")
    out = setup_conversion("coreml", tmp_path)
    name = model_file(swift)
    assert name.endswith(".coreml.ort") and (out / name).is_file(), sorted(p.name for p in out.iterdir())
    inputs, outputs = io_of(out / name)

    fed_block = re.search(r"withInputs:\s*\[(.*?)\]", swift, re.S).group(1)
    fed = re.findall(r'"([^"]+)"\s*:', fed_block)  # ["input": value]
    requested = re.findall(r'"([^"]+)"', re.search(r"outputNames:\s*\[(.*?)\]", swift, re.S).group(1))
    read = re.findall(r'outputs\["([^"]+)"\]', swift)
    assert fed and set(fed) == set(inputs)
    assert requested and set(requested) <= set(outputs)
    assert read and set(read) <= set(requested)
    shape = re.search(r"shape:\s*\[([\d,\s]+)\]", swift).group(1)
    assert [int(d) for d in shape.split(",")] == inputs[fed[0]]

    for mentioned in set(re.findall(r"`(?:out/)?(mobilenet_sample\.coreml\.(?:onnx|ort))`", readme())):
        assert (out / mentioned).is_file(), mentioned
