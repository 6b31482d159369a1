"""check does not write the optimized model's weights: onnxruntime sends them to the null device, and any
that analysis reads come from a second session that writes them (mobile_ep.model_io.UnwrittenWeights)."""

from __future__ import annotations

import os
import pathlib

import numpy as np
import onnx_ir as ir
import pytest
from onnx import helper

import mobile_ep
from mepkit import LIGHT_DIR, ToyPlugin, const, make_model, tensor
from mobile_ep import model_io as mir
from mobile_ep import pipeline as api
from mobile_ep.contract.plugins import make_plugins
from mobile_ep.errors import ModelError
from mobile_ep.reports import text as report

SQUEEZENET = LIGHT_DIR / "light_squeezenet.onnx"


def _folder(path: pathlib.Path) -> pathlib.Path:
    path.mkdir()
    return path


def _files(folder: pathlib.Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*") if p.is_file()}


def _count_sessions(monkeypatch) -> list[pathlib.Path]:
    """Every model onnxruntime optimizes from now on (mir.ort_optimized, however it is reached)."""
    calls: list[pathlib.Path] = []
    real = mir.ort_optimized

    def counted(path, *args, **kwargs):
        calls.append(pathlib.Path(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(mir, "ort_optimized", counted)
    return calls


def test_the_weights_are_not_written(tmp_path):
    written = mir.ort_optimized(SQUEEZENET, _folder(tmp_path / "written"))
    out = mir.ort_optimized(SQUEEZENET, _folder(tmp_path / "unwritten"), weights=False)
    full = _files(tmp_path / "written")
    assert full[mir.OPTIMIZED_DATA] > 3_000_000  # squeezenet's weights, as the usual session writes them
    assert _files(tmp_path / "unwritten") == {"optimized.onnx": out.stat().st_size}
    assert out.stat().st_size == written.stat().st_size  # the same model, pointing at the same offsets
    assert not os.path.lexists(out.parent / mir.OPTIMIZED_DATA)  # no link to the null device is left


def test_unwritten_weights_are_read_on_demand_and_equal_the_written_ones(tmp_path, monkeypatch):
    reference = mir.load(mir.ort_optimized(SQUEEZENET, _folder(tmp_path / "written")), check=False)
    out = mir.ort_optimized(SQUEEZENET, _folder(tmp_path / "unwritten"), weights=False)
    sessions = _count_sessions(monkeypatch)
    model = mir.load(out, check=False)
    lazy = {name for name, value in model.graph.initializers.items() if isinstance(value.const_value, ir.LazyTensor)}
    # exactly the initializers that went to external data (1 KiB and more) stand in lazily
    assert lazy == {name for name, value in reference.graph.initializers.items()
                    if isinstance(value.const_value, ir.ExternalTensor)}
    assert lazy and len(lazy) < len(model.graph.initializers)
    for name in lazy:  # name, type and shape known without reading anything
        got, want = model.graph.initializers[name].const_value, reference.graph.initializers[name].const_value
        assert (got.name, got.dtype, got.shape, got.nbytes) == (want.name, want.dtype, want.shape, want.nbytes)
    assert sessions == [] and not (out.parent / "weights").exists()
    for name, value in model.graph.initializers.items():
        got, want = value.const_value.numpy(), reference.graph.initializers[name].const_value.numpy()
        assert got.dtype == want.dtype and np.array_equal(got, want), name
    assert sessions == [SQUEEZENET]  # one more session wrote them all, the first time one was read
    assert mir.OPTIMIZED_DATA in _files(out.parent / "weights")


def test_a_second_load_of_the_file_defers_too_and_a_changed_file_is_refused(tmp_path):
    out = mir.ort_optimized(SQUEEZENET, tmp_path, weights=False)
    first, second = mir.load(out, check=False), mir.load(out, check=False)
    for model in (first, second):
        assert any(isinstance(v.const_value, ir.LazyTensor) for v in model.graph.initializers.values())
    # read without knowing its weights were not written, the file is refused: loading it above did not
    # leave it in the inspection cache
    with pytest.raises(ModelError, match="'optimized.onnx.data' does not exist in the model's folder"):
        mir.read_proto(out)
    out.write_bytes(out.read_bytes())  # no longer the file onnxruntime wrote: its weights are nowhere
    with pytest.raises(ModelError, match="'optimized.onnx.data' does not exist in the model's folder"):
        mir.load(out, check=False)


def test_weights_are_written_where_no_link_can_be_made(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("symbolic links are not allowed here")

    monkeypatch.setattr(os, "symlink", refuse)
    out = mir.ort_optimized(SQUEEZENET, tmp_path, weights=False)
    assert _files(tmp_path)[mir.OPTIMIZED_DATA] > 3_000_000
    model = mir.load(out, check=False)
    assert not any(isinstance(v.const_value, ir.LazyTensor) for v in model.graph.initializers.values())
    assert any(isinstance(v.const_value, ir.ExternalTensor) for v in model.graph.initializers.values())


def test_a_weight_the_second_session_writes_otherwise_is_an_error(tmp_path):
    out = mir.ort_optimized(SQUEEZENET, tmp_path, weights=False)
    weights = mir._UNWRITTEN.get(out)
    model = mir.load(out, check=False)
    name, value = next((n, v) for n, v in model.graph.initializers.items() if isinstance(v.const_value, ir.LazyTensor))
    tensor_ = value.const_value
    assert weights.tensor(name, tensor_.dtype, tensor_.shape).numpy().shape == tuple(tensor_.shape)
    with pytest.raises(ModelError, match=f"wrote initializer '{name}' as FLOAT"):
        weights.tensor(name, ir.DataType.DOUBLE, tensor_.shape)
    with pytest.raises(ModelError, match="has no initializer 'no such weight'"):
        weights.tensor("no such weight", tensor_.dtype, tensor_.shape)


# --------------------------------------------------------------------------------------------------
# check, with and without the weights written
# --------------------------------------------------------------------------------------------------
def _check_json(path, monkeypatch, *, written: bool, **kwargs) -> str:
    with monkeypatch.context() as patch:
        if written:
            real = mir.ort_optimized
            patch.setattr(mir, "ort_optimized", lambda *a, **k: real(*a, **{**k, "weights": True}))
        return report.to_json(api.check(path, **kwargs), timings=False)


@pytest.mark.parametrize("name", ["light_squeezenet", "light_resnet50", "light_inception_v1", "light_shufflenet"])
def test_check_reports_the_same_without_the_weights(name, monkeypatch):
    plugins = make_plugins()
    if not plugins.backends():
        pytest.skip("no backend installed")
    path = LIGHT_DIR / f"{name}.onnx"
    assert (_check_json(path, monkeypatch, written=False, plugins=plugins)
            == _check_json(path, monkeypatch, written=True, plugins=plugins))


def test_check_with_fixed_shapes_reports_the_same_without_the_weights(tmp_path, monkeypatch, plugins):
    x = tensor("x", ["n", 3, 16, 16])
    w = const("w", np.linspace(-1, 1, 16 * 3 * 3 * 3, dtype=np.float32).reshape(16, 3, 3, 3))  # 1.7 KiB
    model = make_model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                        helper.make_node("Relu", ["c"], ["y"])], [x], [tensor("y", ["n", 16, 16, 16])], [w])
    path = tmp_path / "dynamic.onnx"
    path.write_bytes(model.SerializeToString())
    pipeline = api.PipelineOptions(dims={"n": 1})
    sessions = _count_sessions(monkeypatch)
    unwritten = _check_json(path, monkeypatch, written=False, plugins=plugins, pipeline=pipeline)
    assert len(sessions) == 2  # as is, and with the shapes fixed (the fixed model in check's own folder)
    assert unwritten == _check_json(path, monkeypatch, written=True, plugins=plugins, pipeline=pipeline)
    result = api.check(path, plugins=plugins, pipeline=pipeline)
    assert result.shape_changes and result.backends["toy"].supported_nodes == 0  # dynamic: the toy refuses
    assert result.after_convert["toy"].supported_nodes == 2


class _WeightSign(mobile_ep.OpRule):
    """Takes a Conv whose weights are all positive: reads the values of a large initializer."""

    op_types = ("Conv",)

    def check(self, unit, ctx):
        """weights all positive"""
        weights = ctx.constant(unit.inputs[1].value)
        if weights is None or not (np.asarray(weights) > 0).all():
            return mobile_ep.Support.no(f"weights not all positive (sum {float(np.asarray(weights).sum()):.6g})")
        return mobile_ep.SUPPORTED


class _SignBackend(mobile_ep.Backend):
    name = "sign"

    def build_rules(self):
        return mobile_ep.RuleRegistry([_WeightSign()])


@pytest.mark.parametrize("low", [-1.0, 0.5])
def test_check_reads_large_weights_a_rule_asks_for(tmp_path, monkeypatch, low):
    x = tensor("x", [1, 16, 8, 8])
    weights = [const(f"w{i}", np.linspace(low, 2, 16 * 16 * 3 * 3, dtype=np.float32).reshape(16, 16, 3, 3) * (i + 1))
               for i in range(2)]  # 9 KiB each: external data in the optimized model
    model = make_model([helper.make_node("Conv", ["x", "w0"], ["h"], pads=[1, 1, 1, 1]),
                        helper.make_node("Conv", ["h", "w1"], ["y"], pads=[1, 1, 1, 1])],
                       [x], [tensor("y", [1, 16, 8, 8])], weights)
    path = tmp_path / "conv.onnx"
    path.write_bytes(model.SerializeToString())
    plugins = make_plugins(entry_points=False)
    plugins.register(ToyPlugin(_SignBackend()), name="sign-plugin")
    sessions = _count_sessions(monkeypatch)
    unwritten = _check_json(path, monkeypatch, written=False, plugins=plugins)
    assert len(sessions) == 2  # the analysis read the weights: one more session wrote them
    assert unwritten == _check_json(path, monkeypatch, written=True, plugins=plugins)
    result = api.check(path, plugins=plugins)
    assert result.backends["sign"].supported_nodes == (0 if low < 0 else 2)
    reasons = [r.reason for r in result.backends["sign"].unsupported]
    # the sums are those of the weights in the model: the values read are onnxruntime's
    expected = [f"Conv: weights not all positive (sum {float(w.sum()):.6g})"
                for w in (np.linspace(low, 2, 16 * 16 * 3 * 3, dtype=np.float32) * (i + 1) for i in range(2))]
    assert reasons == (expected if low < 0 else [])


def test_convert_reads_back_the_written_model_without_writing_its_weights_again(tmp_path, monkeypatch):
    plugins = make_plugins()
    if not plugins.backends():
        pytest.skip("no backend installed")
    backend = sorted(plugins.backends())[0]
    calls: list[bool] = []
    real = mir.ort_optimized

    def recorded(*args, **kwargs):
        calls.append(kwargs.get("weights", True))
        return real(*args, **kwargs)

    def converted(out: str, **forced) -> dict:
        with monkeypatch.context() as patch:
            patch.setattr(mir, "ort_optimized", lambda *a, **k: recorded(*a, **{**k, **forced}))
            result = api.convert(SQUEEZENET, backend, tmp_path / out, plugins=plugins, verify=False)
        return {**result.as_dict(), "timings": None, "outputs": None}

    unwritten = converted("unwritten")
    assert calls[0] is True and False in calls  # the input's weights are needed (they are written out)
    assert unwritten == converted("written", weights=True)
    for suffix in ("onnx", "ort"):
        assert ((tmp_path / "unwritten" / f"light_squeezenet.{backend}.{suffix}").read_bytes()
                == (tmp_path / "written" / f"light_squeezenet.{backend}.{suffix}").read_bytes())


def test_an_input_changed_before_the_weights_are_read_is_an_error(tmp_path):
    source = tmp_path / "squeezenet.onnx"
    source.write_bytes(SQUEEZENET.read_bytes())
    out = mir.ort_optimized(source, _folder(tmp_path / "out"), weights=False)
    model = mir.load(out, check=False)
    lazy = next(v.const_value for v in model.graph.initializers.values() if isinstance(v.const_value, ir.LazyTensor))
    os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))  # touched since
    with pytest.raises(ModelError, match="the model changed while it was being analyzed"):
        lazy.numpy()


def test_check_writes_no_weights_to_disk(tmp_path, monkeypatch):
    """Bytes written to files while checking a model with 64 MiB of external weights (Linux's count of
    output blocks, which the null device does not add to)."""
    resource = pytest.importorskip("resource")
    from test_large import write_large_model

    plugins = make_plugins()
    if not plugins.backends():
        pytest.skip("no backend installed")
    path, size = write_large_model(tmp_path / "model", layers=4, k=2048)
    os.sync()

    def written_by_check(**forced) -> int:
        with monkeypatch.context() as patch:
            real = mir.ort_optimized
            patch.setattr(mir, "ort_optimized", lambda *a, **k: real(*a, **{**k, **forced}))
            before = resource.getrusage(resource.RUSAGE_SELF).ru_oublock
            api.check(path, plugins=plugins)
            return (resource.getrusage(resource.RUSAGE_SELF).ru_oublock - before) * 512

    baseline = written_by_check(weights=True)
    if baseline < size:
        pytest.skip(f"this file system does not count written blocks ({baseline:,} bytes counted)")
    assert written_by_check() < size / 16, (baseline, size)
