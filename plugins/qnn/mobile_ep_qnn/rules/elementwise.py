"""Element-wise binary and variadic ops (``simple_op_builder.cc``, ``mean_op_builder.cc``, ``mod_op_builder.cc``):
QNN's ElementWise* ops with numpy broadcasting."""

from __future__ import annotations

from ._base import FLOATS, INTS, SUPPORTED, DataType, QnnRule, Support, attr, input_type

NUMERIC = FLOATS | INTS


def _same_types(unit, ctx, allowed, what="inputs") -> Support:
    for index, value in enumerate(unit.target.inputs):
        if value is not None:
            answer = input_type(value, index, allowed, ctx, what + " of {}")
            if not answer:
                return answer
    return SUPPORTED


class Arithmetic(QnnRule):
    op_types = ("Add", "Sub", "Div")
    input_types = {}

    def check(self, unit, ctx):
        """float32, float16, int32 or int64 (narrowed to int32); broadcasting."""
        return _same_types(unit, ctx, NUMERIC)


class Multiply(QnnRule):
    op_types = ("Mul",)
    input_types = {}

    def check(self, unit, ctx):
        """float32, float16, int32, int64 (narrowed to int32) or uint32; broadcasting."""
        return _same_types(unit, ctx, NUMERIC | {DataType.UINT32})


class Power(QnnRule):
    op_types = ("Pow",)
    input_types = {}

    def check(self, unit, ctx):
        """Base and exponent float32 or float16."""
        return _same_types(unit, ctx, FLOATS)


class Comparison(QnnRule):
    op_types = ("Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual")
    input_types = {}

    def check(self, unit, ctx):
        """float32, float16, int32 or int64 operands; a bool result."""
        return _same_types(unit, ctx, NUMERIC)


class Logical(QnnRule):
    op_types = ("And", "Or", "Xor")
    input_types = {0: frozenset({DataType.BOOL}), 1: frozenset({DataType.BOOL})}
    #: The HTP refuses these on rank-5 tensors.
    max_rank = 4

    def check(self, unit, ctx):
        """bool operands of rank 4 at most."""
        return SUPPORTED


class MaxMin(QnnRule):
    op_types = ("Max", "Min")
    input_types = {}

    def check_common(self, unit, ctx):
        node = unit.target
        if any(v is not None and ctx.dtype(v) in INTS and ctx.rank(v) == 6 for v in node.inputs):
            return Support.no(f"integer inputs of rank 6: onnxruntime-qnn 2.7 takes {node.op_type} and then fails the "
                              "session ('Failed to finalize QNN graph', or a segmentation fault)")
        return super().check_common(unit, ctx)

    def check(self, unit, ctx):
        """Two or more inputs of float32, float16, int32, int64 or uint32; float ones of rank 4 at most (the HTP's
        op validation refuses rank 5, error 3110), integer ones of rank 5."""
        if len([v for v in unit.target.inputs if v is not None]) < 2:
            return Support.no("one input: the QNN EP builds ElementWiseMaximum/Minimum of two or more")
        answer = _same_types(unit, ctx, NUMERIC | {DataType.UINT32})
        if not answer:
            return answer
        for index, value in enumerate(unit.target.inputs):
            if value is not None and ctx.dtype(value) in FLOATS | {DataType.DOUBLE} and (ctx.rank(value) or 0) > 4:
                return Support.no(f"input {index} is a float tensor of rank {ctx.rank(value)}: the HTP takes float "
                                  f"{unit.target.op_type} of rank 4 at most")
        return SUPPORTED


class MeanSum(QnnRule):
    op_types = ("Mean", "Sum")
    input_types = {}

    def check(self, unit, ctx):
        """Two or more float32, float16, int32 or int64 inputs (Mean of float16 fails the session: the EP's divisor
        is a float32 constant in a float16 graph)."""
        node = unit.target
        if len([v for v in node.inputs if v is not None]) < 2:
            return Support.no("one input: the QNN EP builds this from two or more")
        if node.op_type == "Mean" and ctx.dtype(node.inputs[0]) == DataType.FLOAT16:
            return Support.no("float16 inputs: onnxruntime-qnn 2.7 divides them by a float32 constant and fails the "
                              "session ('Failed to compose Qnn graph')")
        return _same_types(unit, ctx, FLOATS | INTS)


class Modulo(QnnRule):
    op_types = ("Mod",)
    input_types = {}
    #: The HTP refuses Mod of rank 5.
    max_rank = 4

    def check(self, unit, ctx):
        """fmod=0 (integer modulo semantics); 8- to 64-bit integers (not uint64), float32 or float16."""
        if attr(unit.target, "fmod", 0) != 0:
            return Support.no("fmod=1: the QNN EP builds Mod with fmod=0 only")
        allowed = FLOATS | INTS | {DataType.INT8, DataType.INT16, DataType.UINT8, DataType.UINT16, DataType.UINT32}
        return _same_types(unit, ctx, allowed)


class Where(QnnRule):
    op_types = ("Where",)
    input_types = {0: frozenset({DataType.BOOL})}

    def check(self, unit, ctx):
        """A bool condition; values float32, float16, int32 or int64."""
        for index in (1, 2):
            answer = input_type(unit.target.inputs[index], index, NUMERIC, ctx, "values of {}")
            if not answer:
                return answer
        return SUPPORTED


class PRelu(QnnRule):
    op_types = ("PRelu",)

    def check(self, unit, ctx):
        """float32 or float16 input; the slope broadcasts."""
        return SUPPORTED
