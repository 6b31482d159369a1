"""Element-wise unary ops and activations (``simple_op_builder.cc``, ``reciprocal_op_builder.cc``,
``tan_op_builder.cc``, ``isnan_op_builder.cc``, ``thresholdedrelu_op_builder.cc``): QNN ElementWise* and
activation ops."""

from __future__ import annotations

from ._base import FLOATS, INTS, SUPPORTED, DataType, QnnRule, Support


class FloatUnary(QnnRule):
    op_types = ("Exp", "Sigmoid", "Reciprocal", "Gelu", "LeakyRelu", "Relu", "ThresholdedRelu", "IsNaN")

    def check(self, unit, ctx):
        """float32 or float16 input."""
        return SUPPORTED

    def check_common(self, unit, ctx):
        failure = _fails_at_rank5(unit, ctx, ("IsNaN",), lowest=6)
        return failure if failure is not None else super().check_common(unit, ctx)


class FloatUnaryRank4(QnnRule):
    op_types = ("Ceil", "Cos", "Floor", "Log", "Round", "Sin", "Sqrt", "Tanh", "Atan", "Elu", "HardSigmoid", "Selu",
                "Softplus", "Tan", "HardSwish")
    #: The HTP refuses these on rank-5 tensors (error 3110 from its op validation).
    max_rank = 4

    def check(self, unit, ctx):
        """float32 or float16 input."""
        return SUPPORTED

    def check_common(self, unit, ctx):
        failure = _fails_at_rank5(unit, ctx, ("Tan",))
        return failure if failure is not None else super().check_common(unit, ctx)


def _fails_at_rank5(unit, ctx, ops, lowest: int = 5) -> Support | None:
    """The refusal of a node of *ops* of rank *lowest* or more, which onnxruntime-qnn 2.7 takes and then fails the
    session on."""
    node = unit.target
    rank = ctx.rank(node.inputs[0])
    if node.op_type in ops and rank is not None and rank >= lowest and ctx.dtype(node.inputs[0]) in FLOATS:
        return Support.no(f"rank {rank}: onnxruntime-qnn 2.7 takes {node.op_type} of rank {rank} and then fails the "
                          "session ('Failed to finalize QNN graph')")
    return None


class Abs(QnnRule):
    op_types = ("Abs",)
    input_types = {0: FLOATS | INTS}

    def check(self, unit, ctx):
        """float32, float16, int32 or int64 input."""
        return SUPPORTED


class NegSign(QnnRule):
    op_types = ("Neg", "Sign")
    input_types = {0: FLOATS}
    #: The HTP refuses these on rank-5 tensors (error 3110 from its op validation).
    max_rank = 4

    def check(self, unit, ctx):
        """float32 or float16 input (the HTP refuses integer ones)."""
        return SUPPORTED

    def check_common(self, unit, ctx):
        failure = _fails_at_rank5(unit, ctx, ("Sign",))
        return failure if failure is not None else super().check_common(unit, ctx)


class Not(QnnRule):
    op_types = ("Not",)
    input_types = {0: frozenset({DataType.BOOL})}
    #: The HTP refuses Not of rank 5.
    max_rank = 4

    def check(self, unit, ctx):
        """A bool input."""
        return SUPPORTED


class Erf(QnnRule):
    op_types = ("Erf",)

    def check(self, unit, ctx):
        """Only inside a GELU pattern, which the EP fuses into QNN's Gelu: Div (or Mul) by a constant -> Erf ->
        Add of a constant -> Mul."""
        node = unit.target
        producer = ctx.producer(node.inputs[0])
        users = ctx.consumers(node.outputs[0])
        ok = (producer is not None and producer.op_type in ("Div", "Mul")
              and any(ctx.is_constant(v) for v in producer.inputs[1:])
              and len(users) == 1 and users[0].op_type == "Add"
              and any(ctx.is_constant(v) for v in users[0].inputs)
              and any(u.op_type == "Mul" for u in ctx.consumers(users[0].outputs[0])))
        if not ok:
            return Support.no("Erf on its own: the QNN EP takes Erf only inside a GELU pattern (x/sqrt(2) -> Erf -> "
                              "+1 -> *x), fused into QNN's Gelu")
        return SUPPORTED


class QuickGelu(QnnRule):
    """onnxruntime's ``com.microsoft:QuickGelu`` (``x * sigmoid(alpha * x)``, which onnxruntime's basic level fuses
    from a Sigmoid and a Mul: ``quick_gelu_op_builder.cc``)."""

    domain = "com.microsoft"
    op_types = ("QuickGelu",)

    def check(self, unit, ctx):
        """float32 or float16 input."""
        return SUPPORTED
