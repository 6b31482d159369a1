"""Cast (ORT ``cast_op_builder.cc``)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, DataType, NodeUnit, RuleContext, Support, attr
from mobile_ep_coreml.mil import MILBuilder

from ._base import BOOL, FLOAT, FLOAT16, INT32, INT64, CoreMLRule, check_type, is_mlprogram

_MLP_TYPES = frozenset({INT32, INT64, FLOAT, FLOAT16, BOOL})


class Cast(CoreMLRule):
    op_types = ("Cast",)
    trivial = True

    def check_types(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """ML Program: input and output float32, float16, int32, int64 or bool. NeuralNetwork: int64 input."""
        node = unit.target
        if ctx.dtype(node.outputs[0]) is None:
            return Support.no("the output has no known element type")
        if is_mlprogram(ctx):
            result = check_type(ctx, node.inputs[0], _MLP_TYPES, "the input", "Core ML's cast")
            if result:
                result = check_type(ctx, node.outputs[0], _MLP_TYPES, "the output", "Core ML's cast")
            return result
        return check_type(
            ctx, node.inputs[0], {INT64}, "the input",
            "NeuralNetwork (only an ArgMax's int64 output, cast to int32)",
        )

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """NeuralNetwork: only a Cast to int32 right after a supported ArgMax (fused into it)."""
        if is_mlprogram(ctx):
            return SUPPORTED
        node = unit.target
        producer = ctx.producer(node.inputs[0])
        if producer is None or (producer.op_type == "Constant" and producer.domain in ("", "ai.onnx")):
            return Support.no(
                "NeuralNetwork: only right after an ArgMax (fused into it), and the input is a graph input "
                "or initializer (use model_format=MLProgram)"
            )
        if producer.op_type != "ArgMax":
            return Support.no(
                f"NeuralNetwork: only right after an ArgMax (fused into it), not after {producer.op_type} "
                "(use model_format=MLProgram)"
            )
        if not ctx.claims(producer):
            return Support.no("NeuralNetwork: the ArgMax producing the input is not supported itself")
        to = attr(node, "to")
        if to != DataType.INT32.value:
            to_name = _type_code_name(to)
            return Support.no(f"NeuralNetwork: only to int32 after an ArgMax, not to {to_name}")
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, b: MILBuilder) -> None:
        """int64 is int32 inside Core ML, so Cast(int64 -> int32) is an identity."""
        node = unit.target
        x, y = node.inputs[0], node.outputs[0]
        source, target = b.mil_dtype(b.dtype(x)), b.mil_dtype(b.dtype(y))
        if source == target:
            b.set(y, b.mb.identity(x=b.var(x), name=b.name(y)))
        else:
            b.set(y, b.mb.cast(x=b.var(x), dtype=target, name=b.name(y)))


def _type_code_name(code: object) -> str:
    try:
        return DataType(code).name.lower()  # type: ignore[arg-type]
    except ValueError:
        return str(code)
