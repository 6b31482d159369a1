"""``mobile-ep llm --ep coreml --compile``: besides each graph's compiled model, one multifunction .mlpackage
holding every Core ML partition of the prefill and decode graphs as a function, the weights the graphs share
stored once, each function run by the emulator against the graph on the CPU EP."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
from decoders import decoder

import mobile_ep
from mobile_ep import hookimpl, runtime
from mobile_ep.errors import VerificationError

CONTEXT, PREFILL = 64, 16
WEIGHTS = "Data/com.apple.CoreML/weights/weight.bin"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    pytest.importorskip("mobile_ep_coreml")
    out = tmp_path_factory.mktemp("llm-coreml") / "out"
    run = subprocess.run([sys.executable, "-m", "mobile_ep.cli", "llm", str(decoder("llama")), "--ep", "coreml",
                          "--context", str(CONTEXT), "--prefill", str(PREFILL), "--compile", "--no-cost-model",
                          "--steps", "4", "-o", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return out, run, json.loads((out / "report.json").read_text())


def _function_names(report: dict) -> list[str]:
    names = []
    for graph in ("prefill", "decode"):
        count = report["graphs"][graph]["compiled"]["compiled_partitions"]
        names += [graph] if count == 1 else [f"{graph}_{k}" for k in range(count)]
    return names


def test_one_package_holds_every_partition_of_both_graphs(compiled):
    out, run, report = compiled
    [functions] = report["functions"]
    names = _function_names(report)
    assert len(names) >= 2 and functions["package"] == "coreml/decoder.mlpackage"
    assert list(functions["functions"]) == names and functions["default"] == names[0]
    assert {f["graph"] for f in functions["functions"].values()} == {"prefill", "decode"}
    import coremltools as ct

    package = out / "coreml" / "decoder.mlpackage"
    spec = ct.models.MLModel(str(package), skip_model_load=True).get_spec()
    assert [f.name for f in spec.description.functions] == names
    assert spec.description.defaultFunctionName == names[0] and set(spec.mlProgram.functions) == set(names)
    for graph in ("prefill", "decode"):  # (the EPContext models onnxruntime runs stay)
        assert (out / "coreml" / graph / f"{graph}.coreml.compiled.onnx").is_file()
    assert "coreml/decoder.mlpackage: " in run.stdout and "each function emulated" in run.stdout


def test_the_weights_both_graphs_share_are_stored_once(compiled):
    out, _, report = compiled
    [functions] = report["functions"]
    separate = sum(p.stat().st_size for graph in ("prefill", "decode")
                   for p in (out / "coreml" / graph).glob(f"{graph}.coreml.compiled/*.mlpackage/{WEIGHTS}"))
    together = (out / "coreml" / "decoder.mlpackage" / WEIGHTS).stat().st_size
    shared = (out / "weights.data").stat().st_size  # (every weight of the float graphs, once)
    # measured: 359,552 bytes against 714,752 for the four per-graph packages (weights.data: 360,448)
    assert separate - together >= 0.9 * shared, (separate, together, shared)
    assert functions["bytes"] < 0.7 * functions["separate_bytes"] and functions["ratio"] < 0.7


def test_each_function_is_emulated_and_matches_the_cpu_ep(compiled):
    out, _, report = compiled
    [functions] = report["functions"]
    assert functions["verified"] is True and functions["not_run"] == []
    for graph in ("prefill", "decode"):
        checked = functions["verification"][graph]
        assert checked["verified"] is True and checked["max_abs_error"] < 1e-3
    from mobile_ep_coreml.emulator import load_package

    # each function computes what its graph's own partition computes, on the inputs the CPU EP gives it
    package = out / "coreml" / "decoder.mlpackage"
    for graph in ("prefill", "decode"):
        model = out / "coreml" / graph / f"{graph}.coreml.compiled.onnx"
        steps = runtime.plan_compiled(model)
        env = dict(runtime.make_inputs(out / f"{graph}.onnx", seed=3))
        reference = runtime.run(out / f"{graph}.onnx", env)
        names = [n for n, f in functions["functions"].items() if f["graph"] == graph]
        partitions = [s for s in steps if s.kind == "partition"]
        assert len(names) == len(partitions)
        k = 0
        for step in steps:
            if step.kind == "onnx":
                session = ort.InferenceSession(step.model.SerializeToString(), providers=["CPUExecutionProvider"])
                env.update(zip(step.outputs, session.run(step.outputs, {n: env[n] for n in step.inputs}),
                               strict=True))
                continue
            got = load_package(package, names[k]).run({s.name: env[s.name] for s in step.payload.inputs})
            env.update({name: got[s.name] for name, s in zip(step.outputs, step.payload.outputs, strict=True)})
            k += 1
        for name, expected in reference.items():
            np.testing.assert_allclose(env[name], expected, rtol=1e-4, atol=1e-4)


def test_functions_that_do_not_compute_the_graph_are_not_verified(compiled, tmp_path):
    """The check can fail: the functions of another decoder's partitions (qwen2, the same shapes, other weights)
    checked against this decoder's graphs differ from the CPU EP's result, and the report says where."""
    from mobile_ep.contract.plugins import make_plugins
    from mobile_ep.llm import functions

    out, _, _ = compiled
    other = tmp_path / "qwen2"
    run = subprocess.run([sys.executable, "-m", "mobile_ep.cli", "llm", str(decoder("qwen2")), "--ep", "coreml",
                          "--context", str(CONTEXT), "--prefill", str(PREFILL), "--compile", "--no-cost-model",
                          "--no-verify", "-o", str(other)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    graphs = {graph: (out / f"{graph}.onnx", other / "coreml" / graph / f"{graph}.coreml.compiled.onnx", [])
              for graph in ("prefill", "decode")}
    report = functions.package_graphs(make_plugins().backends()["coreml"], graphs, tmp_path / "mixed", tmp_path)
    assert report.package == "mixed.mlpackage" and not report.verified
    assert all(not v["verified"] and "max abs error" in v["detail"] for v in report.verification.values())
    assert "NOT verified: prefill: output" in report.text()


def _llm(out, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mobile_ep.cli", "llm", str(decoder("llama")), "--ep", "coreml",
                           "--context", str(CONTEXT), "--prefill", str(PREFILL), "--compile", "--no-cost-model",
                           "--steps", "4", "-o", str(out), *args], capture_output=True, text=True)


def test_a_split_model_gets_one_package_per_part(tmp_path):
    pytest.importorskip("mobile_ep_coreml")
    run = _llm(tmp_path / "o", "--max-part-mb", "0.2")
    assert run.returncode == 0, run.stderr
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["parts"] == 2 and len(report["functions"]) == 2
    for k, functions in enumerate(report["functions"], start=1):
        assert functions["package"] == f"coreml/part{k}.decoder.mlpackage" and functions["verified"] is True
        assert all(name.startswith(f"part{k}_") for name in functions["functions"])
        assert (tmp_path / "o" / functions["package"] / WEIGHTS).is_file()


def test_neuralnetwork_partitions_get_no_package_and_the_report_says_why(tmp_path):
    pytest.importorskip("mobile_ep_coreml")
    run = _llm(tmp_path / "o", "-O", "model_format=NeuralNetwork")
    assert run.returncode == 0, run.stderr
    [functions] = json.loads((tmp_path / "o" / "report.json").read_text())["functions"]
    assert functions["package"] is None and "ML Program" in functions["error"]
    assert not (tmp_path / "o" / "coreml" / "decoder.mlpackage").exists()
    assert "no functions package" in run.stdout


def test_a_package_whose_functions_differ_fails_the_command(tmp_path):
    """A backend handing out the package's functions under each other's names (decode's for prefill's): the
    check runs each graph with them, they differ from the CPU EP's result, and llm fails with the report kept."""
    pytest.importorskip("mobile_ep_coreml")
    from mobile_ep.contract.plugins import make_plugins
    from mobile_ep_coreml import CoreMLBackend

    class Swapped(CoreMLBackend):
        name = "coremlswapped"

        def package_functions(self, payloads, path):
            written, functions = super().package_functions(payloads, path)
            names = list(functions)
            return written, dict(zip(names, [functions[n] for n in reversed(names)], strict=True))

    class Plugin:
        @hookimpl
        def mobile_ep_register_backends(self, register):
            register(Swapped())

    out = tmp_path / "o"
    with pytest.raises(VerificationError, match="NOT verified: prefill"):
        mobile_ep.build_llm(decoder("llama"), "coremlswapped", context=CONTEXT, prefill=PREFILL, output=out,
                            compile=True, verify=False, cost_model=False, plugins=make_plugins(plugins=[Plugin()]))
    [functions] = json.loads((out / "report.json").read_text())["functions"]
    assert functions["verified"] is False and functions["package"] == "coremlswapped/decoder.mlpackage"
    assert all(v["verified"] is False for v in functions["verification"].values())
