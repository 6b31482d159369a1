"""The compile contract around the lowerings: payloads and saved packages, the emulator's reading of them
(unknown ops, damaged weights, flexible shapes), deployment targets, determinism, the Swift adapter."""

from __future__ import annotations

import io
import json
import re
import zipfile

import numpy as np
import pytest
from coreml_compile_kit import check_against_onnxruntime, compile_whole, reload_package
from coreml_testing import MLP, NN, F, const, coreml, model, single, x
from onnx import TensorProto, helper

from mobile_ep import CompiledPartition, CompileError, UsageError
from mobile_ep_coreml import CoreMLBackend
from mobile_ep_coreml.emulator import IO_METADATA_KEY, MODEL_PATH, WEIGHTS_PATH, Package
from mobile_ep_coreml.emulator.blobs import BlobReader
from mobile_ep_coreml.package import read_package, zip_package

RNG = np.random.default_rng(3)
CONV = single("Conv", [x((1, 3, 8, 8)), const("w", RNG.normal(size=(4, 3, 3, 3)).astype(np.float32)),
                       const("b", RNG.normal(size=4).astype(np.float32))], pads=[1, 1, 1, 1])
RELU_CONV = model([helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                   helper.make_node("Relu", ["c"], ["y"], name="relu")],
                  [("x", F, ["N", 3, 8, 8]), const("w", RNG.normal(size=(4, 3, 3, 3)).astype(np.float32))],
                  [("y", F, ["N", 4, 8, 8])])


def rezip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in sorted(files.items()):
            archive.writestr(name, data)
    return buffer.getvalue()


def with_files(payload: CompiledPartition, files: dict[str, bytes]) -> CompiledPartition:
    return CompiledPartition(payload.backend, payload.format, rezip(files), payload.inputs, payload.outputs,
                             payload.metadata)


def test_payload_is_a_deterministic_zipped_mlpackage(tmp_path):
    first, _ = compile_whole(CONV, MLP)
    second, _ = compile_whole(CONV, MLP)
    assert first.data == second.data  # no random manifest ids, no conversion date
    files = read_package(first.data)
    assert {"Manifest.json", MODEL_PATH, WEIGHTS_PATH} <= set(files)
    assert first.metadata["unpack_as"] == "mlpackage"
    path = reload_package(first, tmp_path)
    assert (path / "Data" / "com.apple.CoreML" / "weights").is_dir()


def test_package_metadata_maps_onnx_names_to_features():
    proto = single("Relu", [("in/put:0", F, [2, 3])], [("out.put", F, [2, 3])])
    payload, _ = compile_whole(proto, MLP)
    package = Package(read_package(payload.data))
    io_map = json.loads(package.model.description.metadata.userDefined[IO_METADATA_KEY])
    assert [(s["name"], s["feature"]) for s in io_map["inputs"]] == [("in/put:0", "in_put_0")]
    assert [(s["name"], s["feature"]) for s in io_map["outputs"]] == [("out.put", "out_put")]
    value = np.array([[1, -2, 3], [-4, 5, -6]], np.float32)
    assert np.array_equal(MLP.emulate(payload, {"in/put:0": value})["out.put"], np.maximum(value, 0))


def test_unknown_op_in_a_saved_program_is_a_clear_error():
    payload, _ = compile_whole(CONV, MLP)
    files = read_package(payload.data)
    text = files[MODEL_PATH]
    assert b"conv" in text
    from coremltools.proto import Model_pb2

    spec = Model_pb2.Model()
    spec.ParseFromString(text)
    function = spec.mlProgram.functions["main"]
    for op in function.block_specializations[function.opset].operations:
        if op.type == "conv":
            op.type = "frobnicate_conv"
    files[MODEL_PATH] = spec.SerializeToString()
    with pytest.raises(CompileError, match=r"op 'frobnicate_conv' .*which the emulator does not implement"):
        MLP.emulate(with_files(payload, files), {"x": np.zeros((1, 3, 8, 8), np.float32)})


def test_unknown_layer_in_a_saved_neuralnetwork_is_a_clear_error():
    payload, _ = compile_whole(CONV, NN)
    files = read_package(payload.data)
    from coremltools.proto import Model_pb2

    spec = Model_pb2.Model()
    spec.ParseFromString(files[MODEL_PATH])
    layer = spec.neuralNetwork.layers[0]
    layer.mvn.acrossChannels = True  # replaces the layer's parameters: a layer type the emulator lacks
    files[MODEL_PATH] = spec.SerializeToString()
    with pytest.raises(CompileError, match=r"layer 'mvn'.*does not implement"):
        NN.emulate(with_files(payload, files), {"x": np.zeros((1, 3, 8, 8), np.float32)})


def test_damaged_weights_are_clear_errors():
    payload, _ = compile_whole(CONV, MLP)
    files = read_package(payload.data)
    weights = files[WEIGHTS_PATH]
    with pytest.raises(CompileError, match="truncated"):
        BlobReader(weights[:32])
    broken = bytearray(weights)
    broken[64:68] = b"\0\0\0\0"  # the first blob's sentinel
    with pytest.raises(CompileError, match="bad blob sentinel"):
        MLP.emulate(with_files(payload, {**files, WEIGHTS_PATH: bytes(broken)}), {"x": np.zeros((1, 3, 8, 8), np.float32)})
    with pytest.raises(CompileError, match="runs past the end"):
        MLP.emulate(with_files(payload, {**files, WEIGHTS_PATH: weights[:200]}), {"x": np.zeros((1, 3, 8, 8), np.float32)})
    with pytest.raises(CompileError, match="not a zipped .mlpackage"):
        MLP.emulate(CompiledPartition(payload.backend, payload.format, b"garbage", payload.inputs, payload.outputs,
                                      payload.metadata), {})


def test_emulator_runs_packages_only(tmp_path):
    payload, _ = compile_whole(CONV, MLP)
    other = CompiledPartition("coreml", "nnapi-model/1", payload.data, payload.inputs, payload.outputs)
    with pytest.raises(CompileError, match="cannot run a 'nnapi-model/1' payload"):
        MLP.emulate(other, {})
    with pytest.raises(CompileError, match="missing inputs"):
        MLP.emulate(payload, {})


@pytest.mark.parametrize("fmt", ["MLProgram", "NeuralNetwork"])
def test_dynamic_dims_become_flexible_ranges(fmt, tmp_path):
    backend = coreml(model_format=fmt, max_dynamic_dim="8")
    payload, _ = compile_whole(RELU_CONV, backend)
    path = reload_package(payload, tmp_path)
    import coremltools as ct

    feature = ct.models.MLModel(str(path), skip_model_load=True).get_spec().description.input[0]
    ranges = feature.type.multiArrayType.shapeRange.sizeRanges
    assert [(r.lowerBound, r.upperBound) for r in ranges] == [(1, 8), (3, 3), (8, 8), (8, 8)]
    for batch in (1, 3):
        check_batch(backend, payload, batch)
    with pytest.raises(CompileError, match=r"has shape \[9, 3, 8, 8\]; the model takes \[1\.\.8, 3\.\.3"):
        backend.emulate(payload, {"x": np.zeros((9, 3, 8, 8), np.float32)})


def check_batch(backend, payload, batch):
    from coreml_compile_kit import onnxruntime_outputs

    feeds = {"x": RNG.uniform(-1, 1, (batch, 3, 8, 8)).astype(np.float32)}
    got = backend.emulate(payload, feeds)["y"]
    np.testing.assert_allclose(got, onnxruntime_outputs(RELU_CONV, feeds)["y"], rtol=1e-4, atol=1e-5)


def test_enumerated_dims_become_enumerated_shapes():
    backend = coreml(enumerated_dims="1,2")
    payload, _ = compile_whole(RELU_CONV, backend)
    feature = Package(read_package(payload.data)).model.description.input[0]
    shapes = [list(s.shape) for s in feature.type.multiArrayType.enumeratedShapes.shapes]
    assert shapes == [[1, 3, 8, 8], [2, 3, 8, 8]]
    check_batch(backend, payload, 2)
    with pytest.raises(CompileError, match=r"takes \[1, 3, 8, 8\] or \[2, 3, 8, 8\]"):
        backend.emulate(payload, {"x": np.zeros((3, 3, 8, 8), np.float32)})


def test_static_dims_stay_static():
    payload, _ = compile_whole(CONV, MLP)
    feature = Package(read_package(payload.data)).model.description.input[0]
    assert list(feature.type.multiArrayType.shape) == [1, 3, 8, 8]
    assert feature.type.multiArrayType.WhichOneof("ShapeFlexibility") is None


@pytest.mark.parametrize(("target", "version", "opset"), [("iOS15", 6, "CoreML5"), ("iOS16", 7, "CoreML6"),
                                                         ("iOS17", 8, "CoreML7"), ("iOS18", 9, "CoreML8")])
def test_deployment_targets(target, version, opset, tmp_path):
    proto = single("Gather", [x((5, 4)), x((3,), TensorProto.INT64, name="i")], axis=0)
    backend = coreml(deployment_target=target)
    payload = check_against_onnxruntime(proto, backend, tmp_path, ranges={"i": (-0.8, 0.8)})
    package = Package(read_package(payload.data))
    assert package.model.specificationVersion == version
    assert package.model.mlProgram.functions["main"].opset == opset
    assert payload.metadata["deployment_target"] == target


def test_iOS17_gathers_never_see_negative_indices():
    """Core ML 7 treats negative gather indices as out of bounds: the lowering makes them positive, and
    the emulator refuses what the device would not compute."""
    proto = single("Gather", [x((5, 4)), x((3,), TensorProto.INT64, name="i")], axis=0)
    backend = coreml(deployment_target="iOS17")
    payload, _ = compile_whole(proto, backend)
    got = backend.emulate(payload, {"x": np.arange(20, dtype=np.float32).reshape(5, 4),
                                    "i": np.array([-1, 0, -5], np.int64)})["y"]
    assert got[:, 0].tolist() == [16.0, 0.0, 0.0]


def test_int64_outside_int32_is_refused():
    proto = single("Add", [x((2,), TensorProto.INT64), x((2,), TensorProto.INT64, name="b")])
    payload, _ = compile_whole(proto, MLP)
    with pytest.raises(CompileError, match="outside the int32 range"):
        MLP.emulate(payload, {"x": np.array([2**40, 1]), "b": np.array([1, 1])})


def test_options_are_validated():
    with pytest.raises(UsageError, match="compute_precision"):
        CoreMLBackend().configure({"compute_precision": "float8"})
    with pytest.raises(UsageError, match="enumerated_dims"):
        CoreMLBackend().configure({"enumerated_dims": "1,x"})
    with pytest.raises(UsageError, match="max_dynamic_dim"):
        CoreMLBackend().configure({"max_dynamic_dim": "0"})


def test_compute_units_are_recorded_for_the_device(tmp_path):
    payload, _ = compile_whole(CONV, coreml(compute_units="CPUAndNeuralEngine"))
    user = Package(read_package(payload.data)).model.description.metadata.userDefined
    assert user["com.github.mobile-ep.compute_units"] == "CPUAndNeuralEngine"
    assert payload.metadata["compute_units"] == "CPUAndNeuralEngine"


def test_zip_keeps_empty_directories(tmp_path):
    (tmp_path / "p" / "a" / "empty").mkdir(parents=True)
    (tmp_path / "p" / "a" / "f.txt").write_text("x")
    names = zipfile.ZipFile(io.BytesIO(zip_package(tmp_path / "p"))).namelist()
    assert names == ["a/", "a/empty/", "a/f.txt"]


# --------------------------------------------------------------------------------------------------
# The Swift runtime adapter
# --------------------------------------------------------------------------------------------------
def test_runtime_adapter_ships_the_swift_package():
    files = MLP.runtime_adapter()
    assert {"Package.swift", "README.md", "Sources/MobileEPCoreML/CoreMLPartition.swift",
            "Sources/MobileEPCoreML/Tensor.swift", "Sources/MobileEPCoreML/CompiledModelRunner.swift",
            "Examples/RunCompiledModel.swift"} <= set(files)
    swift = {k: v.decode() for k, v in files.items() if k.endswith(".swift")}
    for name, source in swift.items():
        code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', re.sub(r"//[^\n]*", "", source))
        assert code.count("{") == code.count("}"), f"{name}: unbalanced braces"
        assert code.count("(") == code.count(")"), f"{name}: unbalanced parentheses"


def test_swift_adapter_agrees_with_the_python_side():
    """The metadata keys, plan format and element type names the adapter reads are the ones mobile-ep
    writes."""
    files = {k: v.decode() for k, v in MLP.runtime_adapter().items()}
    partition = files["Sources/MobileEPCoreML/CoreMLPartition.swift"]
    assert f'"{IO_METADATA_KEY}"' in partition
    assert '"com.github.mobile-ep.compute_units"' in partition
    from mobile_ep.passes.to_epcontext import BUNDLE_FORMAT

    assert f'"{BUNDLE_FORMAT}"' in files["Sources/MobileEPCoreML/CompiledModelRunner.swift"]
    for option in ("CPUOnly", "CPUAndGPU", "CPUAndNeuralEngine"):
        assert f'"{option}"' in partition
    tensor = files["Sources/MobileEPCoreML/Tensor.swift"]
    for dtype in ("FLOAT", "FLOAT16", "INT32", "INT64", "BOOL"):
        assert f'"{dtype}"' in tensor


# --------------------------------------------------------------------------------------------------
# Compiled-partition models (mobile_ep.passes.to_epcontext) with Core ML payloads
# --------------------------------------------------------------------------------------------------
def test_partitions_reading_each_others_outputs_and_their_bundle(tmp_path):
    """relu(x) -> Floor (CPU) -> Add(relu, floor): the Add's partition reads the first partition's output
    directly; the bundle holds both packages unpacked."""
    from mobile_ep import runtime
    from mobile_ep.passes import to_epcontext as compiled
    from mobile_ep.testing import as_model

    proto = model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                   helper.make_node("Floor", ["r"], ["f"], name="floor"),
                   helper.make_node("Add", ["r", "f"], ["y"], name="add")], [x((2, 3))])
    source = tmp_path / "m.onnx"
    source.write_bytes(proto.SerializeToString())
    ir_model = as_model(proto)
    nodes = {n.name: n for n in ir_model.graph}
    result = compiled.compile_partitions(ir_model, MLP, [[nodes["relu"]], [nodes["add"]]], strict=True)
    assert len(result.compiled) == 2
    target = compiled.save_compiled(ir_model, tmp_path / "m.coreml.compiled.onnx")
    feeds = {"x": np.array([[-1.5, 0.25, 2.75], [3.5, -0.5, 1.0]], np.float32)}
    np.testing.assert_allclose(runtime.run(target, feeds, backends={"coreml": MLP})["y"],
                               runtime.run(source, feeds)["y"])
    bundle = compiled.write_bundle(target)
    plan = json.loads((bundle / "plan.json").read_text())
    files = [step["file"] for step in plan["steps"]]
    assert files == ["coreml_0.mlpackage", "segment_0.onnx", "coreml_1.mlpackage"], files
    import coremltools as ct

    for name in ("coreml_0.mlpackage", "coreml_1.mlpackage"):
        assert (bundle / name / "Data" / "com.apple.CoreML" / "weights").is_dir()
        ct.models.MLModel(str(bundle / name), skip_model_load=True)


def test_a_gathernd_on_a_bool_mask_is_predicted_where_convert_compile_puts_it(tmp_path):
    """DistilBERT's dynamo export gathers from its bool attention mask: coremltools' gather_nd takes fp16, fp32
    and int32 data only, so the rule leaves it on the CPU and ``convert --compile --strict`` compiles every
    node it predicts (before, the partition failed to lower and the compiled model had fewer nodes)."""
    import onnx
    from click.testing import CliRunner
    from onnx import numpy_helper

    from mobile_ep.cli.main import main
    from mobile_ep.testing import registered

    index = np.stack([np.zeros(64, np.int64), np.arange(64)], -1).reshape(1, 1, 64, 2)
    nodes = [helper.make_node("Greater", ["x", "zero"], ["mask"], name="mask"),
             helper.make_node("GatherND", ["mask", "idx"], ["g"], name="gathernd"),
             helper.make_node("Cast", ["g"], ["gf"], to=TensorProto.FLOAT, name="cast"),
             helper.make_node("Mul", ["gf", "w"], ["y"], name="mul")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [1, 64]),
                                           helper.make_tensor_value_info("w", F, [1, 1, 64])],
                              [helper.make_tensor_value_info("y", F, [1, 1, 64])],
                              [numpy_helper.from_array(np.float32(0), "zero"), numpy_helper.from_array(index, "idx")])
    path = tmp_path / "mask.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    with registered(CoreMLBackend()) as plugins:
        result = CliRunner().invoke(main, ["--strict", "convert", str(path), "--ep", "coreml", "--compile",
                                           "--no-cost-model", "-o", str(tmp_path / "out")], obj=plugins)
    assert result.exit_code == 0, result.output
    assert "GatherND: data (input 0) is bool" in result.stdout
    assert "compiled: 1 partition(s), 2/4 nodes as coreml payloads\n" in result.stdout
    assert "mask.coreml.compiled.onnx matches the original" in result.stdout
