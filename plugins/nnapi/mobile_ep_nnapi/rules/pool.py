"""Pooling (ORT ``pool_op_builder.cc``): AVERAGE_POOL_2D, MAX_POOL_2D (and their global forms)."""

from __future__ import annotations

from mobile_ep import SUPPORTED, NodeUnit, RuleContext, Support, attr

from ._base import FLOAT_OR_UINT8, NnapiRule, rank_between
from ._quant import check_quantized_io, quantized_op_type, scale_and_zero_point, unit_inputs, unit_outputs


def is_quantized_average_pool(unit: NodeUnit) -> bool:
    return quantized_op_type(unit) in ("QLinearAveragePool", "QDQAveragePool")


def check_pool_io(rule: NnapiRule, unit: NodeUnit, ctx: RuleContext) -> Support:
    """Quantized average pool: uint8 per-tensor input and output; MaxPool: float32 or uint8 input."""
    quantized = is_quantized_average_pool(unit)
    if not quantized and unit.op_type != "MaxPool":
        return rule.check_input_dtype(unit, ctx, 0, rule.input_dtypes)
    if quantized:
        result = check_quantized_io(unit, ctx, (0,))
        if result:
            result = check_quantized_io(unit, ctx, (0,), output=True)
        if not result:
            return result
    return rule.check_input_dtype(unit, ctx, 0, FLOAT_OR_UINT8)


def check_pool(unit: NodeUnit, ctx: RuleContext) -> Support:
    """The checks of ORT's PoolOpBuilder::IsOpSupportedImpl."""
    result = rank_between(ctx, unit, 4, 4)
    if not result:
        return result
    node = unit.target
    if unit.op_type in ("AveragePool", "MaxPool", "QLinearAveragePool"):
        if attr(node, "count_include_pad", 0) == 1:
            return Support.no("count_include_pad=1 is not supported")
        if attr(node, "storage_order", 0) == 1:
            return Support.no("storage_order=1 is not supported")
        kernel = attr(node, "kernel_shape", (1, 1))
        if len(kernel) != 2:
            return Support.no(f"kernel_shape has {len(kernel)} dims; only 2-D pooling is supported")
        if attr(node, "ceil_mode", 0) == 1:
            return Support.no("ceil_mode=1 is not supported")
        if tuple(attr(node, "dilations", (1, 1))) != (1, 1):
            return Support.no("dilations ≠1 are not supported")
        if len(node.outputs) != 1:
            return Support.no("the Indices output (output 1) is not supported")
    if is_quantized_average_pool(unit):
        # NNAPI's quantized average pool keeps the input's scale and zero point
        x = scale_and_zero_point(unit_inputs(unit)[0], ctx)
        y = scale_and_zero_point(unit_outputs(unit)[0], ctx)
        if x is None or y is None:
            return Support.no("input/output scale and zero point are not constant initializers")
        if x[0] != y[0]:
            return Support.no(f"output scale {y[0]:g} differs from input scale {x[0]:g}; they must be equal")
        if x[1] != y[1]:
            return Support.no(f"output zero point {y[1]} differs from input zero point {x[1]}; they must be equal")
    return SUPPORTED


class PoolRule(NnapiRule):
    op_types = ("AveragePool", "MaxPool", "GlobalAveragePool", "GlobalMaxPool")
    qdq_op_types = frozenset({"AveragePool"})
    min_feature_level = 2
    nchw_feature_level = True
    internal_uint8 = frozenset({"MaxPool"})
    dtype_doc = "input 0 float32 (MaxPool: or uint8)"

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        return check_pool_io(self, unit, ctx)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """4-D input; AveragePool/MaxPool: 2-D kernel, count_include_pad=0,
        storage_order=0, ceil_mode=0, dilations 1, no Indices output; QDQ AveragePool: uint8 per-tensor, output
        scale and zero point equal to the input's."""
        return check_pool(unit, ctx)
