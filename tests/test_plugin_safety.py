"""Plugins cannot end, hang or fool the run: a rule that raises SystemExit, answers None or a dict, or never
returns breaks the plugin contract; the backend is dropped for the model with one warning naming the plugin
and the rule (``--strict``: exit 5)."""

from __future__ import annotations

import json
import logging
import time

import onnx
import pytest
from click.testing import CliRunner
from onnx import helper

import mobile_ep
from mepkit import ToyBackend, ToyPlugin, ToyRule, make_model, tensor
from mobile_ep.cli.main import main
from mobile_ep.contract.plugins import RULE_BUDGET_ENV, make_plugins


class BrokenRule(ToyRule):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode

    def check(self, unit, ctx):
        """breaks the contract as its mode says"""
        if unit.target.op_type != "Sigmoid":
            return mobile_ep.SUPPORTED
        if self.mode == "exit":
            raise SystemExit(0)
        if self.mode == "none":
            return None
        if self.mode == "dict":
            return {"ok": True}
        if self.mode == "sleep":
            time.sleep(3600)
        return mobile_ep.SUPPORTED


def broken_plugins(mode):
    class BrokenBackend(ToyBackend):
        name = "broken"

        def build_rules(self):
            return mobile_ep.RuleRegistry([BrokenRule(mode)])

    pm = make_plugins(entry_points=False)
    pm.register(ToyPlugin(BrokenBackend()), name="broken-plugin")
    return pm


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Sigmoid", ["t"], ["y"])],
                         [tensor("x", [1, 4])], [tensor("y", [1, 4])]), path)
    return path


MODES = {"exit": "raised SystemExit", "none": "returned NoneType, not a mobile_ep.Support",
         "dict": "returned dict, not a mobile_ep.Support"}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_contract_violation_drops_the_backend_with_one_warning(model, tmp_path, caplog, mode):
    out = tmp_path / "out"
    for args in (["check", str(model), "--json"], ["convert", str(model), "-o", str(out)]):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            result = CliRunner().invoke(main, [*args, "--ep", "broken"], obj=broken_plugins(mode),
                                        catch_exceptions=False)
        assert result.exit_code == 0, result.output
        warnings = [r.getMessage() for r in caplog.records if "the backend is dropped" in r.getMessage()]
        assert len(warnings) == 1, warnings
        assert "plugin 'broken-plugin'" in warnings[0] and "rule BrokenRule (Sigmoid node" in warnings[0]
        assert MODES[mode] in warnings[0]
    report = json.loads((out / "report.json").read_text())
    # nothing is claimed: not the Sigmoid, not the Relu asked before it
    assert report["partitioning"]["supported_nodes"] == 0
    written = onnx.load(out / "m.broken.onnx")
    assert [n.op_type for n in written.graph.node] == ["Relu", "Sigmoid"]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_strict_makes_a_contract_violation_exit_5(model, mode):
    result = CliRunner().invoke(main, ["--strict", "check", str(model), "--ep", "broken"], obj=broken_plugins(mode),
                                catch_exceptions=False)
    assert result.exit_code == 5, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "plugin 'broken-plugin'" in lines[0] and MODES[mode] in lines[0]


def test_a_rule_that_never_returns_is_stopped_by_the_time_budget(model, caplog, monkeypatch):
    with caplog.at_level(logging.WARNING):  # (the rule sleeps an hour: the run ends only if it is stopped)
        result = CliRunner().invoke(main, ["--rule-budget", "0.5", "check", str(model), "--ep", "broken"],
                                    obj=broken_plugins("sleep"), catch_exceptions=False)
    monkeypatch.delenv(RULE_BUDGET_ENV, raising=False)  # (the option sets it for the process)
    assert result.exit_code == 0, result.output
    warnings = [r.getMessage() for r in caplog.records if "the backend is dropped" in r.getMessage()]
    assert len(warnings) == 1 and "ran past the backend's time budget (0.5 s per model" in warnings[0]
    assert "0/2 nodes" in result.stdout


def test_the_time_budget_comes_from_the_environment(model, caplog, monkeypatch):
    monkeypatch.setenv(RULE_BUDGET_ENV, "0.3")
    with caplog.at_level(logging.WARNING):
        result = CliRunner().invoke(main, ["--strict", "check", str(model), "--ep", "broken"],
                                    obj=broken_plugins("sleep"), catch_exceptions=False)
    assert result.exit_code == 5 and "time budget (0.3 s per model" in result.stderr


def test_a_well_behaved_backend_is_untouched(model, plugins):
    result = CliRunner().invoke(main, ["--strict", "check", str(model), "--ep", "toy", "--json"], obj=plugins,
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "dropped" not in result.output
