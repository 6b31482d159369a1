"""Several compiled partitions as the functions of one multifunction .mlpackage (coremltools' save_multifunction):
the weights they share stored once, each function run by the emulator (chosen by name) and matching onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from coreml_compile_kit import compile_whole, feeds_for, onnxruntime_outputs
from coreml_testing import MLP, NN, F, model
from onnx import helper

from mobile_ep import CompileError
from mobile_ep_coreml.emulator import WEIGHTS_PATH, load_package
from mobile_ep_coreml.package import read_package, write_package

RNG = np.random.default_rng(7)
SHARED = RNG.normal(size=(64, 64)).astype(np.float32)  # 16 KiB: stored once in the package
OWN = RNG.normal(size=(64, 64)).astype(np.float32)


def _mlp(seq: int, second: np.ndarray):
    """A prefill-like (seq > 1) or decode-like (seq 1) graph: x @ SHARED, Relu, @ second."""
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"), helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")]
    return model(nodes, [("x", F, [1, seq, 64]), ("w1", SHARED), ("w2", second)], [("y", F, [1, seq, 64])])


PREFILL, DECODE, OTHER = _mlp(8, OWN), _mlp(1, OWN), _mlp(1, RNG.normal(size=(64, 64)).astype(np.float32))


@pytest.fixture(scope="module")
def packaged(tmp_path_factory):
    folder = tmp_path_factory.mktemp("functions")
    payloads = {name: compile_whole(proto, MLP)[0] for name, proto in
                (("prefill", PREFILL), ("decode", DECODE), ("other", OTHER))}
    path, functions = MLP.package_functions(payloads, folder / "decoder")
    return folder, payloads, path, functions


def _weights(data: bytes) -> int:
    return len(read_package(data)[WEIGHTS_PATH])


def test_the_package_holds_each_function_and_the_shared_weights_once(packaged):
    folder, payloads, path, functions = packaged
    assert path == folder / "decoder.mlpackage" and path.is_dir()
    separate = sum(_weights(p.data) for p in payloads.values())
    together = (path / WEIGHTS_PATH).stat().st_size
    # SHARED in all three and OWN in two: 3 + 2 copies of 16 KiB become 1 + 1
    assert separate - together >= 3 * SHARED.nbytes, (separate, together)
    import coremltools as ct

    spec = ct.models.MLModel(str(path), skip_model_load=True).get_spec()
    assert spec.description.defaultFunctionName == "prefill" and spec.specificationVersion >= 9
    assert [f.name for f in spec.description.functions] == ["prefill", "decode", "other"]
    assert set(spec.mlProgram.functions) == {"prefill", "decode", "other"}
    assert {f.metadata["function"] for f in functions.values()} == {"prefill", "decode", "other"}


@pytest.mark.parametrize("name", ["prefill", "decode", "other"])
def test_each_function_runs_in_the_emulator_as_onnxruntime(packaged, name):
    folder, payloads, path, functions = packaged
    proto = {"prefill": PREFILL, "decode": DECODE, "other": OTHER}[name]
    feeds = feeds_for(proto, seed=1)
    expected = onnxruntime_outputs(proto, feeds)["y"]
    got = load_package(path, name).run(feeds)["y"]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(MLP.emulate(functions[name], feeds)["y"], expected, rtol=1e-5, atol=1e-4)
    assert got.shape == expected.shape


def test_function_selection(packaged, tmp_path):
    folder, payloads, path, functions = packaged
    assert load_package(path).function == "prefill"  # the default function
    with pytest.raises(CompileError, match="no function 'nope'.*prefill, decode, other"):
        load_package(path, "nope")
    single = write_package(payloads["decode"].data, tmp_path / "one.mlpackage")
    assert load_package(single, "main").function == "main"
    with pytest.raises(CompileError, match="one function, main, not 'decode'"):
        load_package(single, "decode")


def test_the_package_is_deterministic(packaged, tmp_path):
    folder, payloads, path, functions = packaged
    again, _ = MLP.package_functions(payloads, tmp_path / "decoder")
    assert {p.relative_to(again): p.read_bytes() for p in again.rglob("*") if p.is_file()} == \
        {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def test_what_cannot_be_a_function_is_refused(packaged, tmp_path):
    folder, payloads, path, functions = packaged
    with pytest.raises(CompileError, match="one-function ML Program"):
        relu = model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [("x", F, [1, 64])], [("y", F, [1, 64])])
        MLP.package_functions({"nn": compile_whole(relu, NN)[0]}, tmp_path / "nn")
    with pytest.raises(CompileError, match="not a Core ML function name"):
        MLP.package_functions({"part1.prefill": payloads["prefill"]}, tmp_path / "bad")
    with pytest.raises(CompileError, match="exists"):
        MLP.package_functions(payloads, folder / "decoder")
