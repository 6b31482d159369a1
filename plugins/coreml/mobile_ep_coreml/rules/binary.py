"""Elementwise binary ops (ORT ``binary_op_builder.cc``): Add, Sub, Mul, Div, Pow, Max."""

from __future__ import annotations

import numpy as np

from mobile_ep import SUPPORTED, CompileError, DataType, NodeUnit, RuleContext, Support
from mobile_ep_coreml.mil import MILBuilder

from ._base import CoreMLRule, type_name

_FLOATS = (DataType.FLOAT, DataType.FLOAT16)


class Binary(CoreMLRule):
    """Base checks only. ML Program lowers an int64 Div to floor_div (rounds toward -inf, where ONNX
    truncates)."""

    op_types = ("Add", "Sub", "Mul", "Div")
    min_opset = 7

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        a, c, y = b.var(node.inputs[0]), b.var(node.inputs[1]), node.outputs[0]
        mb = b.mb
        if node.op_type == "Div" and b.dtype(node.inputs[0]) not in _FLOATS:
            # ONNX truncates integer quotients; Core ML's floor_div floors: |a| // |b| * sign(a) * sign(b)
            quotient = mb.floor_div(x=mb.abs(x=a, name=b.tmp(f"{y.name}_absa")),
                                    y=mb.abs(x=c, name=b.tmp(f"{y.name}_absb")), name=b.tmp(f"{y.name}_q"))
            sign = mb.mul(x=mb.sign(x=a, name=b.tmp(f"{y.name}_sa")), y=mb.sign(x=c, name=b.tmp(f"{y.name}_sb")),
                          name=b.tmp(f"{y.name}_sign"))
            b.set(y, mb.mul(x=quotient, y=sign, name=b.name(y)))
            return
        fn = {"Add": mb.add, "Sub": mb.sub, "Mul": mb.mul, "Div": mb.real_div}[node.op_type]
        b.set(y, fn(x=a, y=c, name=b.name(y)))


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

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        a, c, y = b.var(node.inputs[0]), b.var(node.inputs[1]), node.outputs[0]
        mb = b.mb
        if not b.mlprogram and isinstance(c, np.ndarray) and c.size > 1 and not (c == c.reshape(-1)[0]).all():
            raise CompileError("NeuralNetwork: Core ML's power layer takes a single constant exponent "
                               "(use model_format=MLProgram, or a run-time exponent)")
        if b.dtype(node.inputs[0]) in _FLOATS:
            if isinstance(c, np.ndarray) and not b.mlprogram:  # the NN power layer takes a Python float
                c = float(c.reshape(-1)[0])
            b.set(y, mb.pow(x=a, y=c, name=b.name(y)))
            return
        # integer powers in float32, rounded back (exact while the result fits float32's 24-bit mantissa)
        fa = mb.cast(x=a, dtype="fp32", name=b.tmp(f"{y.name}_fa"))
        fc = mb.cast(x=c, dtype="fp32", name=b.tmp(f"{y.name}_fc"))
        rounded = mb.round(x=mb.pow(x=fa, y=fc, name=b.tmp(f"{y.name}_pow")), name=b.tmp(f"{y.name}_round"))
        b.set(y, mb.cast(x=rounded, dtype="int32", name=b.name(y)))


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

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        node = unit.target
        y = node.outputs[0]
        values = [b.var(v) for v in node.inputs if v is not None]
        result = values[0]
        for index, value in enumerate(values[1:], start=1):
            last = index == len(values) - 1
            result = b.mb.maximum(x=result, y=value, name=b.name(y) if last else b.tmp(f"{y.name}_max{index}"))
        b.set(y, result)
