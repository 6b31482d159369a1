"""mobile_ep.testing and mobile_ep.contract.compile: the conformance kit catches what it promises to catch."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from onnx import helper

import mobile_ep
from mepkit import make_model, tensor
from mobile_ep import CompiledPartition, CompileError, RuleContext, Support, TensorSpec, errors
from mobile_ep.cli.main import main
from mobile_ep.contract.compile import (
    is_compiling,
    lower_units,
    missing_compile_methods,
    partition_view,
    runtime_inputs,
)
from mobile_ep.testing import (
    BackendConformance,
    as_model,
    conformance_suite,
    load_case,
    onnx_node_cases,
    registered,
    run_case,
    run_conformance,
)

CASES = {"test_relu", "test_add", "test_add_bcast", "test_add_uint8", "test_sigmoid"}


class Elementwise(mobile_ep.OpRule):
    op_types = ("Relu", "Add")

    def check(self, unit, ctx):
        """float32 inputs"""
        for io in unit.inputs:
            if ctx.dtype(io.value) != mobile_ep.DataType.FLOAT:
                return Support.no("not float32")
        return mobile_ep.SUPPORTED

    def lower(self, unit, ctx, steps):
        steps.append([unit.op_type, [io.value.name for io in unit.inputs], unit.outputs[0].value.name])


class Toy(mobile_ep.Backend):
    """Relu and Add, compiled to a JSON list of steps."""

    name = "kit-toy"
    version = "1.0"
    plugin_api = 1
    kernels = {"Relu": lambda x: np.maximum(x, np.float32(0)), "Add": np.add}

    def build_rules(self):
        return mobile_ep.RuleRegistry([Elementwise()])

    def compile(self, partition, ctx):
        steps: list = []
        lower_units(partition, ctx, steps)
        constants = {v.name: ctx.constant(v).tolist() for v in partition.inputs if ctx.is_constant(v)}
        return CompiledPartition(self.name, "toy/1", json.dumps({"steps": steps, "constants": constants}).encode(),
                                 tuple(TensorSpec.of(v, ctx) for v in runtime_inputs(partition, ctx)),
                                 tuple(TensorSpec.of(v, ctx) for v in partition.outputs))

    def emulate(self, payload, inputs):
        program = json.loads(payload.data)
        values = {name: np.array(v, np.float32) for name, v in program["constants"].items()}
        values.update(inputs)
        for op, args, out in program["steps"]:
            values[out] = self.kernels[op](*(values[a] for a in args))
        return {s.name: values[s.name] for s in payload.outputs}

    def runtime_adapter(self):
        return {"toy.c": b"/* toy */\n"}


@pytest.fixture(scope="module")
def cases():
    return {c.name: c for c in onnx_node_cases() if c.name in CASES}


def test_node_cases_are_loaded_and_cached(cases):
    assert set(cases) == CASES
    assert onnx_node_cases() is onnx_node_cases()
    relu = cases["test_relu"]
    assert relu.ops == frozenset({("", "Relu")}) and relu.model.graph.node[0].op_type == "Relu"


def test_a_correct_backend_passes_and_declines_with_its_reason(cases):
    toy = Toy()
    assert [(r.case, r.status) for r in (run_case(toy, cases[n]) for n in ("test_relu", "test_add_bcast"))] == [
        ("test_relu", "passed"), ("test_add_bcast", "passed")]
    declined = run_case(toy, cases["test_add_uint8"])
    assert (declined.status, declined.detail) == ("declined", "not float32")


def test_only_cases_with_a_rule_for_every_op_are_candidates(cases):
    report = run_conformance(Toy(), cases=cases.values())
    assert sorted(c.case for c in report.cases) == ["test_add", "test_add_bcast", "test_add_uint8", "test_relu"]
    assert report.ok and (report.claimed, report.count("passed"), report.count("declined")) == (3, 3, 1)
    assert report.summary() == ("kit-toy 1.0: 4 ONNX node cases with a rule for every op, 3 claimed, 3 passed, "
                                "0 failed, 1 declined")


@pytest.mark.parametrize(("patch", "detail"), [
    ({"kernels": {"Relu": np.abs, "Add": np.add}}, "output 'y': 28 of 60 values differ"),
    ({"kernels": {"Relu": lambda x: np.maximum(x, 0).astype(np.float64), "Add": np.add}},
     "output 'y' has dtype float64, expected float32"),
    ({"emulate": lambda self, payload, inputs: {}}, "emulate returned no output 'y'"),
    ({"compile": lambda self, partition, ctx: b"raw"}, "compile returned bytes, not a CompiledPartition"),
    ({"compile": lambda self, partition, ctx: CompiledPartition("kit-toy", "toy/1", b"[]", (), ())},
     "payload inputs [] are not the partition's run-time inputs ['x']"),
])
def test_a_wrong_backend_fails_with_the_reason(cases, patch, detail):
    broken = type("Broken", (Toy,), patch)()
    result = run_case(broken, cases["test_relu"])
    assert result.status == "failed" and detail in result.detail, result


def test_a_rule_that_raises_fails_the_case(cases):
    class Raising(Elementwise):
        def check(self, unit, ctx):
            raise RuntimeError("boom")

    backend = type("Raises", (Toy,), {"build_rules": lambda self: mobile_ep.RuleRegistry([Raising()])})()
    result = run_case(backend, cases["test_relu"])
    assert (result.status, result.detail) == ("failed", "claiming raised RuntimeError: boom")


def test_non_compiling_and_half_compiling_backends(cases):
    class ClaimsOnly(mobile_ep.Backend):
        name = "claims-only"

        def build_rules(self):
            return mobile_ep.RuleRegistry([Elementwise()])

    assert not is_compiling(ClaimsOnly())
    assert run_case(ClaimsOnly(), cases["test_relu"]).status == "claimed"
    half = type("Half", (ClaimsOnly,), {"compile": lambda self, p, c: None})()
    assert missing_compile_methods(half) == ["emulate", "runtime_adapter"]
    result = run_case(half, cases["test_relu"])
    assert (result.status, result.detail) == ("failed", "incomplete compile contract: no emulate, runtime_adapter")


def test_a_case_declined_for_non_constant_inputs_is_retried_with_constants(cases):
    class ConstantB(Elementwise):
        def check(self, unit, ctx):
            if len(unit.inputs) > 1 and not ctx.is_constant(unit.inputs[1].value):
                return Support.no("input 1 must be constant")
            return super().check(unit, ctx)

    backend = type("ConstB", (Toy,), {"build_rules": lambda self: mobile_ep.RuleRegistry([ConstantB()])})()
    result = run_case(backend, cases["test_add_bcast"])
    assert (result.status, result.variant) == ("passed", "constant inputs")


def test_compiled_partition_round_trips_and_refuses_garbage():
    spec = TensorSpec("x", mobile_ep.DataType.FLOAT, (1, None, 3))
    payload = CompiledPartition("b", "f/1", b"\x00\xff", (spec,), (spec,), {"k": "v"}).validate()
    assert CompiledPartition.from_bytes(payload.to_bytes()) == payload
    for blob in (b"", b"MEPPART1", payload.to_bytes()[:-1], b"x" + payload.to_bytes()[1:]):
        with pytest.raises(CompileError):
            CompiledPartition.from_bytes(blob)
    with pytest.raises(CompileError, match="data is str, not bytes; metadata is not a mapping of str to str"):
        CompiledPartition("b", "f/1", "text", (), (), {"k": 1}).validate()  # type: ignore[arg-type]


def test_partition_view_orders_units_topologically_and_finds_its_boundary():
    proto = make_model([helper.make_node("Relu", ["x"], ["a"], name="first"),
                        helper.make_node("Add", ["a", "x"], ["b"], name="second"),
                        helper.make_node("Relu", ["b"], ["y"], name="third")],
                       [tensor("x", [2])], [tensor("y", [2])])
    model = as_model(proto)
    ctx = RuleContext(model, Toy())
    nodes = list(model.graph)
    view = partition_view(ctx, [nodes[2], nodes[0], nodes[1]])
    assert [u.name for u in view.units] == ["first", "second", "third"]
    assert [v.name for v in view.inputs] == ["x"] and [v.name for v in view.outputs] == ["y"]
    partial = partition_view(ctx, nodes[:2])
    assert [v.name for v in partial.outputs] == ["b"]


def test_registered_unregisters_even_on_error():
    with pytest.raises(RuntimeError), registered(Toy()) as plugins:
        assert "kit-toy" in plugins.backends()
        raise RuntimeError
    assert plugins.plugin_names() == []


def test_suite_settings_are_checked():
    with pytest.raises(TypeError, match="unknown conformance settings: tolerance"):
        conformance_suite(Toy, tolerance=1)
    suite = conformance_suite(Toy, models=[])
    assert issubclass(suite, BackendConformance) and suite.make_backend().name == "kit-toy"

    class NoBackend(BackendConformance):
        pass

    with pytest.raises(TypeError, match="must set `backend`"):
        NoBackend.make_backend()


def test_conformance_command(plugins):
    plugins.register(type("P", (), {"mobile_ep_register_backends": mobile_ep.hookimpl(
        lambda self, register: register(Toy()))})(), name="kit")
    result = CliRunner().invoke(main, ["conformance", "--ep", "kit-toy"], obj=plugins)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("kit-toy 1.0: ") and " 0 failed" in result.stdout
    broken = type("Broken", (Toy,), {"name": "kit-broken", "kernels": {"Relu": np.abs, "Add": np.add}})
    with registered(broken(), plugins=plugins):
        result = CliRunner().invoke(main, ["conformance", "--ep", "kit-broken", "--json"], obj=plugins)
    assert result.exit_code == errors.EXIT_VERIFY
    assert result.stderr.startswith("mobile-ep: error: kit-broken: ") and "conformance case(s) failed" in result.stderr
    (report,) = json.loads(result.stdout)
    assert report["summary"]["failed"] >= 1


def test_the_kit_sits_below_the_command_line():
    """``mobile-ep conformance`` imports the kit; the kit (the pytest plugin every test session of a plugin author
    loads) imports no part of the command line: its ``mobile_ep_cli`` fixture runs the installed command."""
    import subprocess
    import sys

    code = ("import sys, mobile_ep.testing, mobile_ep.testing.fixtures; "
            "print(sorted(m for m in sys.modules if m == 'mobile_ep.cli' or m.startswith('mobile_ep.cli.')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_load_case_makes_inputs_but_the_first_constant(cases):
    case = cases["test_add"]
    plain, constant = load_case(case), load_case(case, constant_inputs=True)
    assert [v.name for v in plain.graph.inputs] == ["x", "y"]
    assert [v.name for v in constant.graph.inputs] == ["x"] and list(constant.graph.initializers) == ["y"]
