"""Large models: weights stay memory-mapped, protobuf's and flatbuffers' 2 GB limits are handled.

The model is a chain of MatMuls whose weights live in one external file, written by streaming one chunk
over and over (nothing of the model's size is ever allocated).  ``check`` and ``convert`` run in a child
process whose peak RSS (``getrusage``) is measured.

The default run uses a ~200 MB model (about 12 s); ``tox -e large`` (``MOBILE_EP_LARGE=1``) runs the
~2 GB one: about 2 minutes on 2 cores, 4.3 GB of disk.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

from mobile_ep import model_io as mir
from mobile_ep.model_io import saving

GiB = 2**30
MiB = 2**20

RUN_MEASURED = """
import json, resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": proc.returncode, "peak_rss": usage.ru_maxrss * 1024, "stdout": proc.stdout,
                  "stderr": proc.stderr}))
"""


def write_large_model(folder: pathlib.Path, layers: int, k: int) -> tuple[pathlib.Path, int]:
    """``layers`` MatMuls of [k, k] float32 weights in ``weights.bin``; returns (model path, weight bytes)."""
    folder.mkdir(parents=True, exist_ok=True)
    chunk = np.full((k, k), 1.0 / k, dtype=np.float32)  # one layer's weights, written `layers` times
    initializers, nodes = [], []
    with open(folder / "weights.bin", "wb") as f:
        for i in range(layers):
            offset = f.tell()
            chunk.tofile(f)
            t = TensorProto(name=f"w{i}", data_type=TensorProto.FLOAT, dims=[k, k], data_location=TensorProto.EXTERNAL)
            for key, value in (("location", "weights.bin"), ("offset", str(offset)), ("length", str(chunk.nbytes))):
                entry = t.external_data.add()
                entry.key, entry.value = key, value
            initializers.append(t)
            nodes.append(helper.make_node("MatMul", ["x" if i == 0 else f"h{i}", f"w{i}"],
                                          ["y" if i == layers - 1 else f"h{i + 1}"], name=f"mm{i}"))
    graph = helper.make_graph(nodes, "large", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, k])], initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    path = folder / "large.onnx"
    path.write_bytes(model.SerializeToString())
    return path, layers * chunk.nbytes


def measured(*args: str, cwd: pathlib.Path) -> dict:
    """Run ``mobile-ep ARGS`` in a child process; its exit code, output and peak RSS in bytes."""
    wrapper = [sys.executable, "-c", RUN_MEASURED, sys.executable, "-m", "mobile_ep.cli", *args]
    proc = subprocess.run(wrapper, capture_output=True, text=True, cwd=cwd, check=True, timeout=3600)
    return json.loads(proc.stdout)


def installed_backend() -> str:
    from mobile_ep.contract.plugins import make_plugins

    names = sorted(make_plugins().backends())
    if not names:
        pytest.skip("no backend installed")
    return "nnapi" if "nnapi" in names else names[0]


def check_and_convert(tmp_path: pathlib.Path, layers: int, k: int) -> dict:
    model, size = write_large_model(tmp_path / "model", layers, k)
    backend = installed_backend()
    check = measured("check", str(model), "--ep", backend, cwd=tmp_path)
    assert check["rc"] == 0, check["stderr"]
    convert = measured("convert", str(model), "--ep", backend, "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert convert["rc"] == 0, convert["stderr"]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert all(v["ok"] for v in report["verification"]) and report["verification"]
    numbers = {"weights": size, "check_peak_rss": check["peak_rss"], "convert_peak_rss": convert["peak_rss"],
               "outputs": sorted(p.name for p in (tmp_path / "out").iterdir()), "backend": backend,
               "stderr": convert["stderr"]}
    print(json.dumps({k: v for k, v in numbers.items() if k != "stderr"}))
    # weights are memory-mapped, never copied: far below "size + 1 GB"
    assert check["peak_rss"] < size / 2 + 512 * MiB, numbers
    return numbers


def test_200mb_model_is_checked_and_converted_with_weights_memory_mapped(tmp_path):
    numbers = check_and_convert(tmp_path, layers=12, k=2048)  # 12 x 16 MiB = 192 MiB
    assert numbers["convert_peak_rss"] < numbers["weights"] * 3 + GiB, numbers
    assert "large.nnapi.ort" in numbers["outputs"] or numbers["backend"] != "nnapi"


@pytest.mark.skipif(os.environ.get("MOBILE_EP_LARGE") != "1", reason="2 GB model: run with tox -e large")
def test_2gb_model_is_checked_and_converted_well_under_its_size(tmp_path):
    numbers = check_and_convert(tmp_path, layers=32, k=4096)  # 32 x 64 MiB = 2 GiB
    onnx_file = tmp_path / "out" / f"large.{numbers['backend']}.onnx"
    # protobuf's 2 GB limit: the weights went to external data beside the model
    assert onnx_file.stat().st_size < MiB
    assert (tmp_path / "out" / (onnx_file.name + ".data")).stat().st_size >= numbers["weights"]
    # flatbuffers' 2 GB limit: no .ort, said so
    assert not (tmp_path / "out" / f"large.{numbers['backend']}.ort").exists()
    assert "too large for ORT format" in numbers["stderr"]
    assert numbers["convert_peak_rss"] < numbers["weights"] / 2 + 512 * MiB, numbers


# --------------------------------------------------------------------------------------------------
# The size thresholds, exercised on small models
# --------------------------------------------------------------------------------------------------
def test_save_switches_to_external_data_above_the_single_file_limit(tmp_path, monkeypatch):
    model_path, size = write_large_model(tmp_path / "m", layers=2, k=64)
    monkeypatch.setattr(saving, "SINGLE_FILE_MAX_BYTES", size - 1)
    out = mir.save(mir.load(model_path), tmp_path / "out" / "big.onnx")
    proto = onnx.load(str(out), load_external_data=False)
    locations = {e.value for t in proto.graph.initializer for e in t.external_data if e.key == "location"}
    assert locations == {"big.onnx.data"}
    assert sorted(p.name for p in out.parent.iterdir()) == ["big.onnx", "big.onnx.data"]
    monkeypatch.setattr(saving, "SINGLE_FILE_MAX_BYTES", size)
    out = mir.save(mir.load(model_path), tmp_path / "out2" / "small.onnx")
    assert sorted(p.name for p in out.parent.iterdir()) == ["small.onnx"]


def test_external_weights_are_embedded_when_saved_as_one_file(tmp_path):
    import onnxruntime as ort

    model_path, size = write_large_model(tmp_path / "m", layers=3, k=64)
    model = mir.load(model_path)
    model.graph.initializers["w1"].const_value = ir.tensor(np.eye(64, dtype=np.float32))  # one from memory
    out = mir.save(model, tmp_path / "out" / "one.onnx")
    assert sorted(p.name for p in out.parent.iterdir()) == ["one.onnx"]
    proto = onnx.load(str(out))
    onnx.checker.check_model(proto)
    assert [t.name for t in proto.graph.initializer] == ["w0", "w1", "w2"]
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(proto.graph.initializer[0]),
                                  np.full((64, 64), 1 / 64, np.float32))
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(proto.graph.initializer[1]), np.eye(64))
    x = np.arange(64, dtype=np.float32)[None]
    (y,) = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(y, np.full((1, 64), x.sum() / 64), rtol=1e-5)
    # the model itself still maps its weights from the input's file
    assert isinstance(model.graph.initializers["w0"].const_value, ir.ExternalTensor)


def test_convert_skips_the_ort_file_when_it_cannot_hold_the_weights(tmp_path, monkeypatch, plugins, caplog):
    from click.testing import CliRunner

    from mobile_ep.cli.main import main

    model_path, size = write_large_model(tmp_path / "m", layers=2, k=64)
    monkeypatch.setattr(saving, "SINGLE_FILE_MAX_BYTES", size - 1)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["convert", str(model_path), "--ep", "toy", "-o", str(out)], obj=plugins,
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["large.toy.onnx", "large.toy.onnx.data", "report.json"]
    assert "too large for ORT format" in caplog.text
    report = json.loads((out / "report.json").read_text())
    assert "ort" not in report["outputs"] and [v["ok"] for v in report["verification"]] == [True]


def test_ort_format_fits_counts_the_file_and_its_external_data(tmp_path, monkeypatch):
    from mobile_ep.export.ort_format import ort_format_fits

    model_path, size = write_large_model(tmp_path / "m", layers=2, k=64)
    inline = mir.save(mir.load(model_path), tmp_path / "inline" / "one.onnx")
    monkeypatch.setattr(saving, "SINGLE_FILE_MAX_BYTES", inline.stat().st_size)
    assert ort_format_fits(inline)
    monkeypatch.setattr(saving, "SINGLE_FILE_MAX_BYTES", inline.stat().st_size - 1)
    assert not ort_format_fits(inline)
    # weights in a side file: the small .onnx alone would fit, the weights it refers to do not
    monkeypatch.setattr(saving, "SINGLE_FILE_MAX_BYTES", size - 1)
    split = mir.save(mir.load(model_path), tmp_path / "split" / "two.onnx")
    assert split.stat().st_size < MiB
    assert not ort_format_fits(split)
    monkeypatch.setattr(saving, "SINGLE_FILE_MAX_BYTES", split.stat().st_size + size)
    assert ort_format_fits(split)
