"""Compiled-partition models (mobile_ep.passes.to_epcontext) and their host execution (mobile_ep.runtime), with a toy
compiling backend: EPContext nodes, payload round trips, CPU segments + emulated partitions, fallbacks,
the app bundle, and ``convert --compile`` end to end."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import mobile_ep
from mepkit import const, make_model, tensor
from mobile_ep import model_io as mir
from mobile_ep import pipeline as api
from mobile_ep import runtime
from mobile_ep.cli.main import main
from mobile_ep.contract.compile import CompiledPartition, TensorSpec, lower_units, runtime_inputs
from mobile_ep.contract.plugins import make_plugins
from mobile_ep.options import Options
from mobile_ep.passes import to_epcontext as compiled

_NUMPY = {"Relu": lambda a: np.maximum(a, 0), "Sigmoid": lambda a: 1 / (1 + np.exp(-a)),
          "Add": np.add, "Mul": np.multiply}


class _Program:
    """What the toy rules lower into: numpy-evaluable steps over named tensors, constants inline."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.steps: list[dict] = []
        self.constants: dict[str, list] = {}

    def name(self, value):
        array = self.ctx.constant(value)
        if array is not None:
            self.constants[value.name] = np.asarray(array).tolist()
        return value.name


class ToyCompileRule(mobile_ep.OpRule):
    op_types = ("Relu", "Sigmoid", "Add", "Mul")

    def check(self, unit, ctx):
        """float32 input 0 with a static shape"""
        x = unit.target.inputs[0]
        if ctx.static_shape(x) is None or ctx.dtype(x) != mobile_ep.DataType.FLOAT:
            return mobile_ep.Support.no("input 0 is not a static float32 tensor")
        return mobile_ep.SUPPORTED

    def lower(self, unit, ctx, builder):
        node = unit.target
        if node.name.startswith("refuse"):
            raise mobile_ep.CompileError(f"{node.name}: this toy cannot lower it")
        builder.steps.append({"op": node.op_type, "inputs": [builder.name(v) for v in node.inputs],
                              "output": node.outputs[0].name})


class ToyCompiler(mobile_ep.Backend):
    name = "toycc"
    version = "2.0"

    def build_rules(self):
        return mobile_ep.RuleRegistry([ToyCompileRule()])

    def compile(self, partition, ctx):
        program = _Program(ctx)
        lower_units(partition, ctx, program)
        inputs = runtime_inputs(partition, ctx)
        return CompiledPartition(
            self.name, "toy/1", json.dumps({"steps": program.steps, "constants": program.constants}).encode(),
            tuple(TensorSpec.of(v, ctx) for v in inputs), tuple(TensorSpec.of(v, ctx) for v in partition.outputs),
            {"steps": str(len(program.steps))})

    def emulate(self, payload, inputs):
        program = json.loads(payload.data)
        env = {k: np.asarray(v, dtype=np.float32) for k, v in program["constants"].items()}
        env.update(inputs)
        for step in program["steps"]:
            env[step["output"]] = _NUMPY[step["op"]](*(env[i] for i in step["inputs"])).astype(np.float32)
        return {s.name: env[s.name] for s in payload.outputs}

    def runtime_adapter(self):
        return {"toy_runtime.c": b"/* runs toy/1 payloads */\n", "glue/Toy.kt": b"// glue\n"}


class ToyPlugin:
    def __init__(self, *backends):
        self.backends = backends

    @mobile_ep.hookimpl
    def mobile_ep_register_backends(self, register):
        for backend in self.backends:
            register(backend)


def _model(path: pathlib.Path, refuse: bool = False) -> pathlib.Path:
    """x -> Relu -> Add(bias) -> [Softsign on CPU] -> Mul(y) -> Sigmoid -> out, plus a second output."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "bias"], ["a"], name="add"),
        helper.make_node("Softsign", ["a"], ["s"], name="cpu_softsign"),
        helper.make_node("Mul", ["s", "y"], ["m"], name="refuse_mul" if refuse else "mul"),
        helper.make_node("Sigmoid", ["m"], ["out"], name="sigmoid"),
    ]
    model = make_model(nodes, [tensor("x", [2, 3]), tensor("y", [2, 3])],
                       [tensor("out", [2, 3]), tensor("a", [2, 3])],
                       [const("bias", np.array([0.5, -1.0, 2.0], np.float32))])
    path.write_bytes(model.SerializeToString())
    return path


def _feeds():
    rng = np.random.default_rng(1)
    return {"x": rng.standard_normal((2, 3)).astype(np.float32), "y": rng.standard_normal((2, 3)).astype(np.float32)}


def _compile(tmp_path, refuse=False, strict=False):
    source = _model(tmp_path / "m.onnx", refuse)
    target = tmp_path / "m.toycc.compiled.onnx"
    result = compiled.compile_model(source, ToyCompiler(), target, tmp_path / "work", strict=strict, use_cost=False)
    return source, target, result


def test_partitions_become_ep_context_nodes(tmp_path):
    _, target, result = _compile(tmp_path)
    assert [len(c.nodes) for c in result.compiled] == [2, 2] and not result.failures
    proto = onnx.load(str(target))
    contexts = [n for n in proto.graph.node if n.op_type == "EPContext"]
    assert len(contexts) == 2 and all(n.domain == "com.microsoft" for n in contexts)
    assert {o.domain: o.version for o in proto.opset_import}["com.microsoft"] == 1
    assert proto.ir_version <= mir.MAX_IR_VERSION
    attrs = {a.name: a for a in contexts[0].attribute}
    assert attrs["embed_mode"].i == 1 and attrs["main_context"].i == 1
    assert attrs["source"].s == b"toycc" and attrs["partition_name"].s == b"toycc_0"
    assert attrs["notes"].s == b"toy/1" and attrs["ep_sdk_version"].s == b"toycc 2.0"
    payload = CompiledPartition.from_bytes(attrs["ep_cache_context"].s)
    assert payload.backend == "toycc" and [s.name for s in payload.inputs] == ["x"]
    assert {s.name for s in payload.outputs} == {"a"}
    # weights went into the payload: the bias initializer is gone from the model
    assert "bias" not in {t.name for t in proto.graph.initializer}
    assert [n.op_type for n in proto.graph.node].count("Softsign") == 1
    # the IR view reads the payload back
    model = mir.load(target, check=False, shapes=False)
    ctx_nodes = [n for n in model.graph if compiled.is_context_node(n)]
    assert compiled.payload_of(ctx_nodes[0]).to_bytes() == payload.to_bytes()


def test_runtime_splits_and_runs_a_compiled_model(tmp_path):
    source, target, _ = _compile(tmp_path)
    assert runtime.is_compiled_model(target) and not runtime.is_compiled_model(source)
    steps = runtime.plan_compiled(target)
    assert [s.kind for s in steps] == ["partition", "onnx", "partition"]
    assert steps[1].inputs == ["a"] and steps[1].outputs == ["s"]
    feeds = _feeds()
    expected = runtime.run(source, feeds)
    got = runtime.run(target, feeds, backends={"toycc": ToyCompiler()})
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-6, atol=1e-6)
    [check] = runtime.verify(source, [target], backends={"toycc": ToyCompiler()})
    assert check.ok, check.as_dict()


def test_a_partition_that_fails_to_compile_stays_on_the_cpu(tmp_path):
    source, target, result = _compile(tmp_path, refuse=True)
    assert len(result.compiled) == 1 and len(result.failures) == 1
    assert "cannot lower" in result.failures[0].reason and result.failures[0].nodes == ["refuse_mul", "sigmoid"]
    proto = onnx.load(str(target))
    assert {"Mul", "Sigmoid", "EPContext"} <= {n.op_type for n in proto.graph.node}
    [check] = runtime.verify(source, [target], backends={"toycc": ToyCompiler()})
    assert check.ok
    (tmp_path / "strict").mkdir()
    with pytest.raises(mobile_ep.CompileError, match="cannot lower"):
        _compile(tmp_path / "strict", refuse=True, strict=True)


def test_a_backend_raising_while_compiling_is_isolated_unless_strict(tmp_path):
    class Broken(ToyCompiler):
        def compile(self, partition, ctx):
            raise RuntimeError("boom")

    source = _model(tmp_path / "m.onnx")
    result = compiled.compile_model(source, Broken(), tmp_path / "c.onnx", tmp_path / "w", use_cost=False)
    assert not result.compiled and all("RuntimeError: boom" in f.reason for f in result.failures)
    with pytest.raises(mobile_ep.BackendError, match="boom"):
        compiled.compile_model(source, Broken(), tmp_path / "c2.onnx", tmp_path / "w2", use_cost=False, strict=True)


def test_bundle_holds_the_steps_an_app_runs(tmp_path):
    _, target, _ = _compile(tmp_path)
    folder = compiled.write_bundle(target)
    assert folder == tmp_path / "m.toycc.compiled"
    plan = json.loads((folder / "plan.json").read_text())
    assert plan["format"] == compiled.BUNDLE_FORMAT and plan["model"] == target.name
    assert [s["kind"] for s in plan["steps"]] == ["partition", "onnx", "partition"]
    assert [i["name"] for i in plan["inputs"]] == ["x", "y"] and plan["inputs"][0]["dtype"] == "FLOAT"
    first = plan["steps"][0]
    assert first["backend"] == "toycc" and first["format"] == "toy/1"
    payload = json.loads((folder / first["file"]).read_bytes())
    assert [s["op"] for s in payload["steps"]] == ["Relu", "Add"]
    segment = onnx.load(str(folder / plan["steps"][1]["file"]))
    assert [n.op_type for n in segment.graph.node] == ["Softsign"]


def test_payload_files_next_to_the_model_stay_inside_its_folder(tmp_path):
    (tmp_path / "p.bin").write_bytes(b"x")
    assert runtime.read_context_file("p.bin", tmp_path) == b"x"
    for bad in ("../p.bin", "/etc/passwd"):
        with pytest.raises(mobile_ep.CompileError, match="not inside"):
            runtime.read_context_file(bad, tmp_path / "sub")


def test_convert_compile_writes_and_verifies_everything(tmp_path):
    plugins = make_plugins(entry_points=False)
    plugins.register(ToyPlugin(ToyCompiler()), name="toycc-plugin")
    source = _model(tmp_path / "m.onnx")
    report = api.convert(source, "toycc", tmp_path / "out", plugins=plugins, compile=True,
                         options=Options(cost_model=False))
    out = tmp_path / "out"
    assert pathlib.Path(report.outputs["compiled"]) == out / "m.toycc.compiled.onnx"
    assert (out / "adapter" / "toy_runtime.c").read_bytes() == b"/* runs toy/1 payloads */\n"
    assert (out / "adapter" / "glue" / "Toy.kt").exists()
    assert (out / "m.toycc.compiled" / "plan.json").exists()
    assert [pathlib.Path(v.candidate).name for v in report.verification][-1] == "m.toycc.compiled.onnx"
    assert all(v.ok for v in report.verification)
    written = json.loads((out / "report.json").read_text())
    assert written["compiled"]["compiled_nodes"] == 4 and len(written["compiled"]["partitions"]) == 2


class _EpCompilesSometimes(ToyCompiler):
    """A compiling backend whose EP writes its own artifact only for models named ``ep_*``: for the others its
    ``compile_with_ep`` answers None, the contract's default, and ``--compile`` is the backend's own."""

    def compile_with_ep(self, source, target, workdir, options=None):
        return None if not source.name.startswith("ep_") else super().compile_with_ep(source, target, workdir, options)


def test_compile_with_ep_answering_none_leaves_compiling_to_the_backend(tmp_path):
    assert mobile_ep.Backend.compile_with_ep(ToyCompiler(), None, None, None) is None  # (declared: the default)
    plugins = make_plugins(entry_points=False)
    plugins.register(ToyPlugin(_EpCompilesSometimes()), name="toycc-plugin")
    report = api.convert(_model(tmp_path / "m.onnx"), "toycc", tmp_path / "out", plugins=plugins, compile=True,
                         options=Options(cost_model=False))
    assert pathlib.Path(report.outputs["compiled"]) == tmp_path / "out" / "m.toycc.compiled.onnx"
    assert json.loads((tmp_path / "out" / "report.json").read_text())["compiled"]["compiled_nodes"] == 4


def test_cli_compile_needs_a_compiling_backend(tmp_path):
    from click.testing import CliRunner

    from mepkit import ToyBackend

    plugins = make_plugins(entry_points=False)
    plugins.register(ToyPlugin(ToyBackend(), ToyCompiler()), name="p")
    source = _model(tmp_path / "m.onnx")
    result = CliRunner().invoke(main, ["convert", str(source), "--ep", "toy", "--compile", "-o", str(tmp_path / "o")],
                                obj=plugins)
    assert result.exit_code == 2 and "does not compile partitions" in result.stderr
    result = CliRunner().invoke(main, ["convert", str(source), "--ep", "toycc", "--compile", "--no-cost-model",
                                       "-o", str(tmp_path / "o2")], obj=plugins)
    assert result.exit_code == 0, result.output
    assert "compiled: 2 partition(s), 4/5 nodes as toycc payloads" in result.stdout
    assert "m.toycc.compiled.onnx matches the original" in result.stdout


def test_cli_compile_of_fewer_nodes_than_predicted_says_so_and_strict_refuses_it(tmp_path):
    """The toy claims ``refuse_mul`` (its rule says yes) but cannot lower it: one partition of two compiles.
    The report and a warning say the compiled model differs from the prediction; ``--strict`` makes it an
    error (exit 5)."""
    from click.testing import CliRunner

    plugins = make_plugins(entry_points=False)
    plugins.register(ToyPlugin(ToyCompiler()), name="p")
    source = _model(tmp_path / "m.onnx", refuse=True)
    args = ["convert", str(source), "--ep", "toycc", "--compile", "--no-cost-model"]
    result = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "o")], obj=plugins)
    assert result.exit_code == 0, result.output
    assert "compiled: 1 partition(s), 2/5 nodes as toycc payloads, 2 fewer than predicted" in result.stdout
    warning = [line for line in result.stderr.splitlines() if line.startswith("mobile-ep: warning: --compile")]
    assert warning == ["mobile-ep: warning: --compile compiled 2 of the 4 nodes toycc claims: the compiled model "
                       "differs from the prediction (partition 1: refuse_mul: this toy cannot lower it)"], result.stderr
    result = CliRunner().invoke(main, ["--strict", *args, "-o", str(tmp_path / "o2")], obj=plugins)
    assert result.exit_code == 5 and "cannot lower" in result.stderr, result.output


def test_compiled_models_with_graph_input_defaults_and_passthrough(tmp_path):
    """A graph input with an initializer default (IR >= 4) is fed or defaulted; an input that is also an
    output passes through."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Add", ["r", "w"], ["o"], name="add")]
    graph = helper.make_graph(nodes, "g", [tensor("x", [3]), tensor("w", [3])], [tensor("o", [3]), tensor("x", [3])],
                              initializer=[const("w", np.float32([1, 2, 3]))])
    source = tmp_path / "d.onnx"
    source.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
                       .SerializeToString())
    target = tmp_path / "d.c.onnx"
    compiled.compile_model(source, ToyCompiler(), target, tmp_path / "w", use_cost=False)
    feeds = {"x": np.float32([-1, 0, 2])}
    got = runtime.run(target, feeds, backends={"toycc": ToyCompiler()})
    np.testing.assert_allclose(got["o"], [1, 2, 5])
    np.testing.assert_allclose(got["x"], feeds["x"])
    got = runtime.run(target, {**feeds, "w": np.float32([0, 0, 0])}, backends={"toycc": ToyCompiler()})
    np.testing.assert_allclose(got["o"], [0, 0, 2])


def test_unknown_backend_in_a_compiled_model_is_a_model_error(tmp_path, monkeypatch):
    _, target, _ = _compile(tmp_path)
    monkeypatch.setenv("MOBILE_EP_DISABLE_PLUGINS", "1")
    with pytest.raises(mobile_ep.ModelError, match="toycc"):
        runtime.run(target, _feeds())


def test_int_typed_boundaries_keep_their_types(tmp_path):
    """Segments get their input/output types from the compiled model (EPContext outputs included)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Cast", ["r"], ["i"], name="cast", to=TensorProto.INT32),
             helper.make_node("Cast", ["i"], ["f"], name="back", to=TensorProto.FLOAT),
             helper.make_node("Sigmoid", ["f"], ["o"], name="sig")]
    source = tmp_path / "c.onnx"
    source.write_bytes(make_model(nodes, [tensor("x", [4])], [tensor("o", [4])]).SerializeToString())
    target = tmp_path / "c.compiled.onnx"
    compiled.compile_model(source, ToyCompiler(), target, tmp_path / "w", use_cost=False)
    assert [s.kind for s in runtime.plan_compiled(target)] == ["partition", "onnx", "partition"]
    [check] = runtime.verify(source, [target], backends={"toycc": ToyCompiler()})
    assert check.ok
