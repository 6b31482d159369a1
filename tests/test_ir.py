"""Loading and saving: external data, subgraphs, IR versions, atomic writes, shape information."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from mepkit import const, make_model, tensor
from mobile_ep import model_io as mir
from mobile_ep.errors import ModelError


def model_with_external_weights(tmp_path):
    w = np.arange(4096, dtype=np.float32).reshape(64, 64) / 4096
    proto = make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                       [tensor("x", [1, 64])], [tensor("y", [1, 64])], [const("w", w)])
    onnx.save(proto, tmp_path / "m.onnx", save_as_external_data=True, location="m.weights", size_threshold=0)
    return tmp_path / "m.onnx", w


def test_external_weights_stay_external_until_saved(tmp_path):
    path, w = model_with_external_weights(tmp_path)
    model = mir.load(path)
    value = list(model.graph)[0].inputs[1]
    assert value.const_value.__class__.__name__ == "ExternalTensor"  # memory-mapped, not copied
    np.testing.assert_array_equal(value.const_value.numpy(), w)
    out = mir.save(model, tmp_path / "out" / "copy.onnx")
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    x = np.ones((1, 64), np.float32)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], x @ w, rtol=1e-5)


def test_saved_models_get_an_ir_version_onnxruntime_accepts(tmp_path):
    proto = make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [1])], [tensor("y", [1])],
                       ir_version=14)
    model = mir.from_proto(proto)
    path = mir.save(model, tmp_path / "m.onnx")
    assert onnx.load(path).ir_version <= mir.MAX_IR_VERSION
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_ir3_initializer_inputs_are_dropped_when_upgrading(tmp_path):
    proto = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [tensor("x", [2]), tensor("w", [2])],
                       [tensor("y", [2])], [const("w", np.ones(2, np.float32))], opset=9, ir_version=3)
    path = mir.save(mir.from_proto(proto), tmp_path / "m.onnx")
    saved = onnx.load(path)
    assert saved.ir_version >= 4
    assert [i.name for i in saved.graph.input] == ["x"]  # w stays a constant, not an overridable input


def test_subgraphs_are_visible_with_shapes():
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="inner_relu")], "then", [],
                               [tensor("t", [2, 3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="inner_neg")], "else", [],
                               [tensor("e", [2, 3])])
    proto = make_model([helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g)],
                       [tensor("c", [], TensorProto.BOOL), tensor("x", [2, 3])], [tensor("y", None)])
    model = mir.from_proto(proto)
    names = sorted(n.name for n in model.graph.all_nodes())
    assert names == ["if", "inner_neg", "inner_relu"]
    (if_node,) = list(model.graph)
    assert list(if_node.outputs[0].shape) == [2, 3]


def test_save_is_atomic_and_leaves_no_temporary_files(tmp_path, monkeypatch):
    model = mir.from_proto(make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [1])],
                                      [tensor("y", [1])]))
    target = tmp_path / "m.onnx"
    target.write_bytes(b"previous content")

    def explode(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(mir.ir, "save", explode)
    with pytest.raises(OSError):
        mir.save(model, target)
    assert target.read_bytes() == b"previous content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_invalid_models_give_one_line_errors(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07\x12\x04abcd\xff\xff\xff")
    with pytest.raises(ModelError) as info:
        mir.load(bad)
    assert "\n" not in str(info.value) and str(bad) in str(info.value)


def test_model_from_load_for_analysis_outlives_its_work_folder(tmp_path):
    """load_for_analysis reads weights under 1 MB into memory: a caller may delete the folder and still
    read them (onnxruntime writes the optimized model's weights to a side file there)."""
    import tempfile

    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from mobile_ep import pipeline as api

    weight = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)  # 4 KB: written to the side file
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
        [numpy_helper.from_array(weight, "w")])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    with tempfile.TemporaryDirectory() as work:
        model = api.load_for_analysis(path, work)
    np.testing.assert_array_equal(model.graph.initializers["w"].const_value.numpy(), weight)


def _copied_skeleton(proto):
    """What :func:`mobile_ep.model_io._skeleton` copied for every model before it learnt to return the model itself."""
    skeleton = onnx.ModelProto(ir_version=proto.ir_version)
    skeleton.opset_import.extend(proto.opset_import)
    skeleton.functions.extend(proto.functions)
    skeleton.graph.name = proto.graph.name
    for field in ("node", "input", "output", "value_info", "initializer"):
        getattr(skeleton.graph, field).extend(getattr(proto.graph, field))
    return skeleton


def test_shape_check_infers_on_the_model_itself_when_nothing_is_left_out():
    """check_inferred_shapes infers on the model itself (no copy) when it has no large or external weights
    to leave out: the inferred types and shapes are those of the copy it made before, dynamic dims too."""
    from mepkit import LIGHT_MODELS

    dynamic = make_model([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                          helper.make_node("ConstantOfShape", ["s"], ["z"], name="zeros"),
                          helper.make_node("Add", ["x", "b"], ["y"], name="add")],
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", None, 4])],
                         [tensor("y", ["N", None, 4]), tensor("z", None)],
                         [const("b", np.ones(4, np.float32))])
    dynamic.graph.value_info.append(helper.make_tensor_value_info("s", TensorProto.INT64, [3]))
    protos = [mir.read_proto(path) for path in LIGHT_MODELS] + [dynamic]
    for proto in protos:
        assert mir._skeleton(proto) is proto
        infer = lambda m: onnx.shape_inference.infer_shapes(m, check_type=False, strict_mode=False,  # noqa: E731
                                                            data_prop=True)
        mine, copied = infer(proto).graph, infer(_copied_skeleton(proto)).graph
        assert list(mine.value_info) == list(copied.value_info)
        assert list(mine.output) == list(copied.output)
        mir.check_inferred_shapes(proto)


def test_shape_check_gives_the_same_answers_without_the_compiled_read_or_onnxs_cpp_entry_point(monkeypatch):
    """Without mobile_ep._speedups every model is parsed and inspected in Python, and where onnx has no
    onnx_cpp2py_export.shape_inference its public infer_shapes gives the same bytes to read: a plain model
    passes and a value of 2^40 elements is refused, either way."""
    plain = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [tensor("x", [2, 3])],
                       [tensor("y", [2, 3])])
    absurd = make_model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")], [],
                        [tensor("y", None)], [const("s", np.array([2**20, 2**20], np.int64))])
    expected = mir._inferred_bytes(absurd)

    def answers():
        mir.check_inferred_shapes(plain)
        with pytest.raises(ModelError, match="absurd shape: value 'y' would have 1,099,511,627,776 elements"):
            mir.check_inferred_shapes(absurd)

    answers()
    with monkeypatch.context() as patch:
        patch.setattr(mir._accel, "speedups", None)
        answers()
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "onnx.onnx_cpp2py_export", None)  # (the import raises ImportError)
        public = []
        real = onnx.shape_inference.infer_shapes
        patch.setattr(onnx.shape_inference, "infer_shapes", lambda *a, **k: public.append(k) or real(*a, **k))
        assert onnx.ModelProto.FromString(mir._inferred_bytes(absurd)) == onnx.ModelProto.FromString(expected)
        assert public == [{"check_type": False, "strict_mode": False, "data_prop": True}]
        answers()


def test_shape_check_copies_the_model_without_large_or_external_weights(tmp_path):
    big = const("w", np.ones((128, 256), np.float32))  # 128 KB: over the skeleton's 64 KB
    proto = make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                       [tensor("x", [1, 128])], [tensor("y", [1, 256])], [big])
    skeleton = mir._skeleton(proto)
    assert skeleton is not proto and not skeleton.graph.initializer[0].raw_data
    path, _ = model_with_external_weights(tmp_path)
    external = onnx.load(str(path), load_external_data=False)
    skeleton = mir._skeleton(external)
    assert skeleton is not external and not skeleton.graph.initializer[0].external_data
    sparse = onnx.ModelProto()
    sparse.CopyFrom(proto)
    del sparse.graph.initializer[:]
    sparse.graph.initializer.append(const("w", np.ones((4, 4), np.float32)))
    sparse.graph.sparse_initializer.add().values.name = "unused"
    assert mir._skeleton(sparse) is not sparse  # the copy leaves sparse initializers out, as before


@pytest.mark.parametrize(("entries", "message"), [
    ({"location": "../m.weights"}, "contains '..'"),
    ({"location": "m.weights", "offset": "16384"}, "past the end"),
    ({"location": "m.weights", "length": "12"}, "does not match its shape"),
])
def test_every_external_tensor_is_inspected_though_locations_are_judged_once(tmp_path, entries, message):
    """The inspection judges each external-data location once per model (tensors share a few files), but
    every tensor's own entries still are: a second tensor on an accepted file, or on another, is refused."""
    path, _ = model_with_external_weights(tmp_path)
    proto = onnx.load(str(path), load_external_data=False)
    second = proto.graph.initializer.add()
    second.CopyFrom(proto.graph.initializer[0])
    second.name = "w2"
    del second.external_data[:]
    for key, value in {"location": "m.weights", "offset": "0", "length": "16384", **entries}.items():
        second.external_data.add(key=key, value=value)
    proto.graph.node[0].input[1] = "w2"
    proto.graph.node.add().CopyFrom(helper.make_node("MatMul", ["x", "w"], ["y2"], name="mm2"))
    proto.graph.output.append(tensor("y2", [1, 64]))
    bad = tmp_path / "two.onnx"
    bad.write_bytes(proto.SerializeToString())
    mir.read_proto(path)  # the first tensor alone is fine
    with pytest.raises(ModelError, match=f"initializer 'w2' refused: .*{message}"):
        mir.read_proto(bad)


def _inference_input_field_by_field(proto):
    """What :func:`mobile_ep.model_io._inference_input` built, field by field, before it copied models whole."""
    import math

    skeleton = onnx.ModelProto(ir_version=proto.ir_version)
    skeleton.opset_import.extend(proto.opset_import)
    skeleton.functions.extend(proto.functions)
    graph, source = skeleton.graph, proto.graph
    graph.name = source.name
    for field in ("node", "input", "output", "value_info"):
        getattr(graph, field).extend(getattr(source, field))
    listed = {value.name for value in source.input}
    for t in source.initializer:
        if t.name not in listed:
            listed.add(t.name)
            graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, t.dims))
        size = (sum(len(s) for s in t.string_data) if t.data_type == TensorProto.STRING
                else mir._nbytes(t.data_type, math.prod(t.dims)))
        if t.data_location != TensorProto.EXTERNAL and size is not None and size <= 1000:
            graph.initializer.append(t)
    return skeleton


def test_shape_inference_input_is_the_same_however_it_is_built(tmp_path):
    """from_proto's inference input (weights over 1000 bytes left out, initializers as inputs) is built by
    copying the model whole when little is left out: it equals the field-by-field copy, byte for byte, on
    onnxruntime's optimized light_* models, the originals, external and large embedded weights, scalars,
    strings, functions, and models with sparse initializers or training graphs (which take the other way)."""
    from mepkit import LIGHT_MODELS

    protos = [mir.read_proto(path) for path in LIGHT_MODELS]
    for name in ("squeezenet", "inception_v1", "shufflenet"):  # optimized: weights external (small ones kept)
        work = tmp_path / name
        work.mkdir()
        protos.append(mir.read_proto(mir.ort_optimized(LIGHT_MODELS[0].parent / f"light_{name}.onnx", work)))
    path, _ = model_with_external_weights(tmp_path)
    protos.append(onnx.load(str(path), load_external_data=False))
    mixed = make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
                        helper.make_node("Add", ["y", "s"], ["z"], name="add"),
                        helper.make_node("Identity", ["names"], ["n"], name="id")],
                       [tensor("x", [1, 128])], [tensor("z", [1, 256]), tensor("n", [2], TensorProto.STRING)],
                       [const("w", np.ones((128, 256), np.float32)), const("s", np.float32(2)),
                        helper.make_tensor("names", TensorProto.STRING, [2], [b"a", b"b"])])
    mixed.doc_string, mixed.producer_name, mixed.graph.doc_string = "doc", "test", "graph doc"
    mixed.functions.add().CopyFrom(helper.make_function("local", "f", ["a"], ["b"],
                                                        [helper.make_node("Identity", ["a"], ["b"])],
                                                        [helper.make_opsetid("", 13)]))
    protos.append(mixed)
    small = onnx.ModelProto()
    small.CopyFrom(mixed)
    small.graph.initializer[0].CopyFrom(const("w", np.ones((128, 2), np.float32)))  # 1 KB: left out, copied whole
    protos.append(small)
    for extra in ("sparse_initializer", "training_info"):
        other = onnx.ModelProto()
        other.CopyFrom(small)
        if extra == "sparse_initializer":
            other.graph.sparse_initializer.add().values.name = "unused"
        else:
            other.training_info.add().algorithm.name = "training"
        protos.append(other)
    for proto in protos:
        before = proto.SerializeToString()
        built = mir._inference_input(proto)
        assert built.SerializeToString() == _inference_input_field_by_field(proto).SerializeToString()
        assert proto.SerializeToString() == before


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def _glibc_with_mallinfo2():
    """glibc as release_memory loads it; the test skips where it is not glibc 2.33 or later."""
    try:
        libc = mir._libc()
    except (OSError, AttributeError):
        pytest.skip("not glibc")
    if getattr(libc, "mallinfo2", None) is None:
        pytest.skip("glibc before 2.33 (always trims)")
    return libc


@pytest.mark.skipif(not pathlib.Path("/proc/self/statm").exists(), reason="needs Linux")
def test_release_memory_gives_a_large_free_heap_back():
    """After a session, release_memory trims glibc's heap when much of it is free (as after a large model's
    session); less than RELEASE_MIN_FREE_BYTES free is kept for the next allocations (a few ms saved)."""
    libc = _glibc_with_mallinfo2()
    large = [bytearray(1000) for _ in range(300_000)]  # 300 MB of heap chunks, freed below
    pin = bytearray(1000)  # above them: freeing them does not shrink the heap by itself
    del large
    assert mir._free_heap_bytes(libc) >= mir.RELEASE_MIN_FREE_BYTES
    before = _rss_bytes()
    mir.release_memory()
    assert before - _rss_bytes() > 100 * 2**20
    del pin


@pytest.mark.skipif(not pathlib.Path("/proc/self/statm").exists(), reason="needs Linux")
def test_release_memory_keeps_what_a_light_models_session_frees():
    """The 100-200 MB a light_resnet50 or light_shufflenet session leaves free stay for the next allocations
    (trimming them took about 10 ms); RELEASE_MIN_FREE_BYTES is 256 MB."""
    libc = _glibc_with_mallinfo2()
    libc.malloc_trim(0)
    large = [bytearray(1000) for _ in range(150_000)]  # 150 MB of heap chunks, freed below
    pin = bytearray(1000)
    del large
    free = mir._free_heap_bytes(libc)
    assert 100 * 2**20 < free < mir.RELEASE_MIN_FREE_BYTES
    before = _rss_bytes()
    mir.release_memory()
    assert before - _rss_bytes() < 50 * 2**20  # kept
    del pin


def test_whether_a_skeleton_is_needed_is_read_off_the_bytes_as_python_decides_it(tmp_path, monkeypatch):
    """_speedups.needs_skeleton answers what `_skeleton(proto) is not proto` answers: on every ONNX node test,
    the light models, and models with large, external or sparse weights or training information.  With the
    file size given, check_inferred_shapes then infers on the model's own bytes (no _skeleton call) and
    answers as before."""
    from mepkit import LIGHT_MODELS
    from mobile_ep.testing import onnx_node_cases

    speedups = mir._accel.speedups
    if speedups is None:
        pytest.skip("the C extension is not built")
    big = make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [tensor("x", [1, 128])],
                     [tensor("y", [1, 256])], [const("w", np.ones((128, 256), np.float32))])
    path, _ = model_with_external_weights(tmp_path)
    sparse = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [tensor("x", [2])], [tensor("y", [2])])
    sparse.graph.sparse_initializer.add().values.CopyFrom(const("v", np.ones(1, np.float32)))
    training = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [tensor("x", [2])], [tensor("y", [2])])
    training.training_info.add()
    protos = [onnx.ModelProto.FromString(case.model_bytes) for case in onnx_node_cases()]
    protos += [mir.read_proto(p) for p in LIGHT_MODELS] + [big, onnx.load(str(path), load_external_data=False),
                                                            sparse, training]
    for proto in protos:
        needs = speedups.needs_skeleton(proto.SerializeToString(), mir._ELEMENT_BITS, mir._SKELETON_DATA_MAX_BYTES)
        assert needs is (mir._skeleton(proto) is not proto)
    assert speedups.needs_skeleton(big.SerializeToString()[:-5], mir._ELEMENT_BITS, 1 << 16) is None  # truncated

    skeletons = []
    real = mir._skeleton
    monkeypatch.setattr(mir, "_skeleton", lambda proto, *a: skeletons.append(proto) or real(proto, *a))
    plain = mir.read_proto(LIGHT_MODELS[0])
    mir.check_inferred_shapes(plain, size=LIGHT_MODELS[0].stat().st_size)
    mir.check_inferred_shapes(big, size=big.ByteSize())
    assert skeletons == [big]  # (only the model with weights to leave out was copied)
    absurd = make_model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")], [],
                        [tensor("y", None)], [const("s", np.array([2**20, 2**20], np.int64))])
    with pytest.raises(ModelError, match="absurd shape: value 'y' would have 1,099,511,627,776 elements"):
        mir.check_inferred_shapes(absurd, size=absurd.ByteSize())
