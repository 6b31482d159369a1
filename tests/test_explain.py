"""``mobile-ep explain``: why a node is where it is, and changes that would move it — computed, not guessed."""

from __future__ import annotations

import dataclasses
import json
from typing import Literal

import pytest
from click.testing import CliRunner
from onnx import helper

import mobile_ep
from mepkit import ToyPlugin, has_backend, make_model, tensor
from mobile_ep.cli.main import main
from mobile_ep.contract.plugins import make_plugins
from mobile_ep.errors import EXIT_USAGE, UsageError
from mobile_ep.options import Options
from mobile_ep.reports.explain import explain


@dataclasses.dataclass(frozen=True)
class LevelOptions:
    level: int = dataclasses.field(default=1, metadata={"help": "feature level 1-5"})
    fast: bool = False
    mode: Literal["plain", "fancy"] = "plain"

    def __post_init__(self):
        if not 1 <= self.level <= 5:
            raise ValueError("level must be 1-5")


class Erf(mobile_ep.OpRule):
    op_types = ("Erf",)

    def check(self, unit, ctx):
        return mobile_ep.Support.check(ctx.options.level >= 3, f"needs level 3, target is {ctx.options.level}")


class Cos(mobile_ep.OpRule):
    op_types = ("Cos",)

    def check(self, unit, ctx):
        return mobile_ep.Support.check(ctx.options.fast and ctx.options.mode == "fancy", "needs fast and fancy")


class Plain(mobile_ep.OpRule):
    op_types = ("Relu", "Sigmoid", "Neg")

    def check(self, unit, ctx):
        x = unit.inputs[0].value
        return mobile_ep.Support.check(ctx.static_shape(x) is not None, "input 0 has a dynamic shape")


class LevelBackend(mobile_ep.Backend):
    name = "level"
    version = "1.0"
    Options = LevelOptions

    def build_rules(self):
        return mobile_ep.RuleRegistry([Erf(), Cos(), Plain()])


class CosOnly(mobile_ep.Backend):
    name = "cosonly"

    def build_rules(self):
        class AnyCos(mobile_ep.OpRule):
            op_types = ("Cos",)

        return mobile_ep.RuleRegistry([AnyCos()])


@pytest.fixture
def level_plugins():
    pm = make_plugins(entry_points=False)
    plugin = ToyPlugin(LevelBackend(), CosOnly())
    pm.register(plugin, name="level-plugin")
    try:
        yield pm
    finally:
        pm.unregister(plugin)


def _chain(tmp_path, ops, shape=(1, 4), name="m.onnx"):
    nodes, h = [], "x"
    for i, op in enumerate(ops):
        nodes.append(helper.make_node(op, [h], [f"v{i}"], name=f"{op.lower()}{i}"))
        h = f"v{i}"
    nodes.append(helper.make_node("Relu", [h], ["y"], name="last"))
    path = tmp_path / name
    path.write_bytes(make_model(nodes, [tensor("x", list(shape))], [tensor("y", list(shape))]).SerializeToString())
    return path


def test_a_higher_level_is_found_and_shown_as_a_range(tmp_path, level_plugins):
    path = _chain(tmp_path, ["Relu", "Erf", "Sigmoid"])
    report = explain(path, "erf1", ["level"], plugins=level_plugins)
    (b,) = report.backends
    assert not b.claimed
    assert b.why == "needs level 3, target is 1"
    options = [a for a in b.alternatives if a.kind == "option"]
    assert [a.change for a in options] == ["-O level.level=3 (any of 3..5)"]
    assert options[0].runs_on == "level"
    assert "partition 1 of 1 (4 nodes)" in options[0].outcome  # with Erf claimed, one partition again


def test_a_claimed_node_says_what_would_push_it_off(tmp_path, level_plugins):
    path = _chain(tmp_path, ["Relu", "Erf"])
    report = explain(path, "erf1", ["level"], options={"level": {"level": "4"}}, plugins=level_plugins)
    (b,) = report.backends
    assert b.claimed and b.partition["size"] == 3
    assert b.why.startswith("partition 1 of 1 (3 nodes")
    options = {a.change: a for a in b.alternatives if a.kind == "option"}
    assert list(options) == ["-O level.level=1 (any of 1..2)"]
    assert options["-O level.level=1 (any of 1..2)"].runs_on is None


def test_pairs_of_options_when_no_single_change_is_enough(tmp_path, level_plugins):
    path = _chain(tmp_path, ["Relu", "Cos"])
    report = explain(path, "cos1", ["level"], plugins=level_plugins)
    (b,) = report.backends
    assert [(a.kind, a.change) for a in b.alternatives if a.kind.startswith("option")] == [
        ("options", "-O level.fast=true -O level.mode=fancy")]
    backends = [a for a in b.alternatives if a.kind == "backend"]
    assert [(a.change, a.runs_on) for a in backends] == [("--ep cosonly", "cosonly")]


def test_fixing_a_dynamic_shape_is_tried(tmp_path, level_plugins):
    path = _chain(tmp_path, ["Relu", "Sigmoid"], shape=("N", 4))
    report = explain(path, "sigmoid1", ["level"], plugins=level_plugins)
    (b,) = report.backends
    assert b.why == "input 0 has a dynamic shape"
    shape = next(a for a in b.alternatives if a.kind == "shape")
    assert shape.change == "--shape x=1,4 (a guess: give your real sizes)"
    assert shape.runs_on == "level"
    # With --shape/--dim given, the fixed model is the one explained.
    given = explain(path, "sigmoid1", ["level"], plugins=level_plugins,
                    options=Options(dims={"N": 8}))
    assert given.note == "the model with its input shapes fixed (--dim N=8)"
    assert given.inputs[0][1] == "float[8,4]"
    assert given.backends[0].claimed and given.backends[0].why.startswith("partition 1 of 1")
    assert not [a for a in given.backends[0].alternatives if a.kind == "shape"]


def test_node_by_value_name_and_unknown_names(tmp_path, level_plugins):
    path = _chain(tmp_path, ["Relu", "Erf"])
    report = explain(path, "v1", ["level"], plugins=level_plugins)
    assert report.node == "erf1" and "is a value" in report.note
    with pytest.raises(UsageError, match="did you mean erf1"):
        explain(path, "erf2", ["level"], plugins=level_plugins)


def test_cli_explain_text_and_json(tmp_path, level_plugins):
    path = _chain(tmp_path, ["Relu", "Erf"])
    result = CliRunner().invoke(main, ["explain", str(path), "erf1", "--ep", "level"], obj=level_plugins,
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "level: CPU" in result.stdout and "why: needs level 3" in result.stdout
    assert "-O level.level=3 (any of 3..5): runs on level" in result.stdout
    result = CliRunner().invoke(main, ["explain", str(path), "erf1", "--ep", "level", "--json"], obj=level_plugins)
    data = json.loads(result.stdout)
    assert data["node"] == "erf1" and data["backends"][0]["claimed"] is False
    result = CliRunner().invoke(main, ["explain", str(path), "nope", "--ep", "level"], obj=level_plugins)
    assert result.exit_code == EXIT_USAGE and "no node or value named 'nope'" in result.stderr


@pytest.mark.skipif(not has_backend("nnapi"), reason="needs the NNAPI backend")
def test_the_rewrite_that_would_apply_is_named(tmp_path):
    x, y = tensor("x", [1, 8]), tensor("y", [1, 8])
    model = make_model([helper.make_node("Relu", ["x"], ["a"], name="r"), helper.make_node("Sigmoid", ["x"], ["b"], name="s"),
                        helper.make_node("Sum", ["a", "b"], ["c"], name="sum"),
                        helper.make_node("Relu", ["c"], ["y"], name="out")], [x], [y])
    path = tmp_path / "sum.onnx"
    path.write_bytes(model.SerializeToString())
    report = mobile_ep.explain(path, "sum", ep="nnapi")
    (b,) = report.backends
    assert not b.claimed and "no rule for Sum" in b.why
    rewrite = next(a for a in b.alternatives if a.kind == "convert")
    assert rewrite.change == "mobile-ep convert (rewrite sum-to-add)" and rewrite.runs_on == "nnapi"
    assert rewrite.outcome.startswith("becomes Add, which runs on nnapi")


@pytest.mark.skipif(not has_backend("nnapi"), reason="needs the NNAPI backend")
def test_api_level_of_the_real_nnapi_backend(tmp_path):
    """A real rule re-evaluated under another option: Conv needs NNAPI feature level 2 (API 28)."""
    from mepkit import LIGHT_DIR

    report = mobile_ep.explain(LIGHT_DIR / "light_squeezenet.onnx", "n0", ep="nnapi")
    (b,) = report.backends
    assert b.claimed
    assert any(a.change.startswith("-O nnapi.api_level=27") and a.runs_on is None for a in b.alternatives)
