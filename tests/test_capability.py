"""The capability contract: Support answers, rule registry, options parsing, rule context facts."""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np
import pytest
from onnx import helper

import mobile_ep
from mepkit import ToyBackend, const, make_model, tensor
from mobile_ep import DuplicateRuleError, OpRule, RuleContext, RuleRegistry, Support
from mobile_ep.errors import UsageError
from mobile_ep.testing import as_model, node_support


def test_support_is_falsy_with_reason():
    no = Support.no("weight is not constant")
    assert not no and no.reason == "weight is not constant"
    assert Support.yes() and Support.check(True, "x") and not Support.check(0, "zero")
    with pytest.raises(ValueError):
        Support.no("")


class A(OpRule):
    op_types = ("Foo",)
    opsets = (1, 12)


class B(OpRule):
    op_types = ("Foo",)
    opsets = (13, 10_000)


class C(OpRule):
    op_types = ("Foo", "Bar")
    opsets = (10, 14)


def test_registry_refuses_overlapping_duplicates_unless_overriding():
    registry = RuleRegistry([A(), B()])
    assert isinstance(registry.lookup("", "Foo", 11), A)
    assert isinstance(registry.lookup("ai.onnx", "Foo", 13), B)
    with pytest.raises(DuplicateRuleError, match="both register ai.onnx:Foo"):
        registry.add(C())
    registry.add(C(), override=True)
    assert isinstance(registry.lookup("", "Foo", 11), C)
    assert isinstance(registry.lookup("", "Bar", 14), C)
    assert registry.lookup("", "Bar", 15) is None


def test_opset_outside_registered_rules_is_reported():
    class Only13(OpRule):
        op_types = ("Relu",)
        opsets = (13, 10_000)

    class Backend(ToyBackend):
        name = "only13"

        def build_rules(self):
            return RuleRegistry([Only13()])

    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [1])], [tensor("y", [1])], opset=11)
    answer = node_support(model, Backend())
    assert not answer and answer.reason == "opset 11 is not covered by any only13 rule"


def test_rule_min_and_max_opset_are_checked():
    class R(OpRule):
        op_types = ("Relu",)
        min_opset = 6
        max_opset = 13

    class Backend(ToyBackend):
        name = "ranged"

        def build_rules(self):
            return RuleRegistry([R()])

    make = lambda opset: make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [1])],  # noqa: E731
                                    [tensor("y", [1])], opset=opset)
    assert node_support(make(13), Backend())
    assert node_support(make(14), Backend()).reason == "opset 14 is above the maximum 13"
    assert node_support(make(5), Backend()).reason == "opset 5 is below the minimum 6"


def test_conditions_come_from_the_check_docstring():
    class R(OpRule):
        op_types = ("Relu",)
        min_opset = 6

        def check(self, unit, ctx):
            """input must be rank 4

            More details not shown.
            """
            return Support.yes()

    assert R().conditions("Relu") == ["opset 6–27", "input must be rank 4"]


@dataclasses.dataclass(frozen=True)
class Opts:
    level: int = 3
    fast: bool = False
    mode: Literal["A", "B"] = "A"
    stops: tuple[str, ...] = ("NMS",)

    def __post_init__(self):
        if not 1 <= self.level <= 5:
            raise ValueError(f"level must be 1..5, got {self.level}")


class OptBackend(ToyBackend):
    name = "opt"
    Options = Opts


def test_options_are_parsed_from_strings():
    backend = OptBackend().configure({"level": "4", "fast": "yes", "mode": "b", "stops": "A, B"})
    assert backend.options == Opts(4, True, "B", ("A", "B"))
    assert OptBackend().describe_options()[0] == ("level", "3", "")


@pytest.mark.parametrize("values, message", [
    ({"nope": "1"}, "opt: unknown option 'nope' (options: fast, level, mode, stops)"),
    ({"level": "x"}, "opt: option level='x': expected an integer"),
    ({"fast": "maybe"}, "opt: option fast='maybe': expected true or false"),
    ({"mode": "C"}, "opt: option mode='C': expected one of A, B"),
    ({"level": "9"}, "opt: level must be 1..5, got 9"),
])
def test_bad_options_are_one_line_usage_errors(values, message):
    with pytest.raises(UsageError) as info:
        OptBackend().configure(values)
    assert str(info.value) == message


def test_rule_context_facts():
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")]
    model = as_model(make_model(nodes, [tensor("x", ["N", 3, 8, 8])], [tensor("y", None)],
                                [const("w", np.ones((2, 3, 1, 1), np.float32))]))
    ctx = RuleContext(model, ToyBackend())
    (conv,) = list(model.graph)
    x, w = conv.inputs
    assert ctx.shape(x) == (None, 3, 8, 8) and ctx.static_shape(x) is None and ctx.rank(x) == 4
    assert ctx.static_shape(w) == (2, 3, 1, 1)
    assert ctx.is_constant(w) and not ctx.is_constant(x)
    assert ctx.constant(w).shape == (2, 3, 1, 1)
    assert ctx.dtype(x) == mobile_ep.DataType.FLOAT
    assert ctx.opset() == 13 and ctx.opset("com.microsoft") == 0
    assert ctx.shape(conv.outputs[0]) == (None, 2, 8, 8)  # inferred


def test_initializer_that_is_also_an_input_is_constant_only_before_ir4():
    nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
    for ir_version, constant in ((3, True), (4, False), (10, False)):
        proto = make_model(nodes, [tensor("x", [2]), tensor("w", [2])], [tensor("y", [2])],
                           [const("w", np.ones(2, np.float32))], opset=9, ir_version=ir_version)
        model = as_model(proto)
        w = list(model.graph)[0].inputs[1]
        assert RuleContext(model, ToyBackend()).is_constant(w) is constant, ir_version


def test_attr_returns_plain_values():
    node = helper.make_node("Conv", ["x"], ["y"], pads=[1, 1, 1, 1], auto_pad="SAME_UPPER", group=2)
    model = as_model(make_model([node], [tensor("x", [1, 1, 4, 4])], [tensor("y", None)],
                                [], opset=13))
    (n,) = list(model.graph)
    assert mobile_ep.attr(n, "pads") == (1, 1, 1, 1)
    assert mobile_ep.attr(n, "auto_pad") == "SAME_UPPER"
    assert mobile_ep.attr(n, "group") == 2
    assert mobile_ep.attr(n, "dilations", (1, 1)) == (1, 1)
