"""Elementwise binary ops (ORT ``binary_op_builder.cc``): Add, Sub, Mul, Div, Pow, Max."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support

from ._base import CoreMLRule, type_name


class Binary(CoreMLRule):
    """Base checks only. ML Program lowers an int64 Div to floor_div (rounds toward -inf, where ONNX
    truncates)."""

    op_types = ("Add", "Sub", "Mul", "Div")
    min_opset = 7


class Pow(CoreMLRule):
    op_types = ("Pow",)
    min_opset = 7

    def check_types(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Both inputs of the same element type; input 0 float32 (ML Program: float32, float16, int64)."""
        node = unit.target
        base, exponent = ctx.dtype(node.inputs[0]), ctx.dtype(node.inputs[1])
        if base is None or exponent is None:
            return Support.no("an input has no known element type")
        if base != exponent:
            return Support.no(
                f"base is {type_name(base)} and exponent {type_name(exponent)}; Core ML's pow needs one type"
            )
        return super().check_types(unit, ctx)


class Max(CoreMLRule):
    # ORT checks the op's since-version against 7; Max has versions 6 and 8, so in an opset-7 model it
    # is Max-6 and rejected.  In model-opset terms the minimum is 8.
    op_types = ("Max",)
    min_opset = 8
    neuralnetwork = False

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """At least 2 inputs (more are chained into several maximum ops)."""
        if len(unit.target.inputs) < 2:
            return Support.no(
                "a single input; ORT's builder reads a second input, so the build would fail (use Identity)"
            )
        return SUPPORTED
