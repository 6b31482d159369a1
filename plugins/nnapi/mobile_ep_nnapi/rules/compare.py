"""Comparisons and logical ops (compile_ops=extended only): Equal, Greater, GreaterOrEqual, Less, LessOrEqual
(EQUAL, GREATER, ... on float32 or int32), And, Or, Xor, Not (LOGICAL_*, NOT_EQUAL) on bool, Where (SELECT);
all feature level 3, results TENSOR_BOOL8."""

from __future__ import annotations

from mobile_ep import SUPPORTED, DataType, NodeUnit, RuleContext, Support
from mobile_ep_nnapi.nnapi import OperationCode as Op

from ._base import NnapiRule, input_value, rank_between
from ._quant import dtype_name

COMPILE_ONLY = True

_CODES = {"Equal": Op.EQUAL, "Greater": Op.GREATER, "GreaterOrEqual": Op.GREATER_EQUAL, "Less": Op.LESS,
          "LessOrEqual": Op.LESS_EQUAL, "And": Op.LOGICAL_AND, "Or": Op.LOGICAL_OR, "Xor": Op.NOT_EQUAL,
          "Not": Op.LOGICAL_NOT, "Where": Op.SELECT}
_LOGICAL = frozenset({"And", "Or", "Xor", "Not"})


class CompareRule(NnapiRule):
    op_types = tuple(_CODES)
    min_feature_level = 3
    min_opsets = {"Equal": 7, "Greater": 7, "Less": 7, "And": 7, "Or": 7, "Xor": 7, "Where": 9}
    dtype_doc = "float32 or int32 inputs (bool for And/Or/Xor/Not/Equal; Where: bool condition)"

    def check_io(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        values = list(unit.target.inputs)
        if unit.op_type == "Where":
            allowed: tuple = (DataType.FLOAT, DataType.INT32)
            values = values[1:]
            if ctx.dtype(input_value(unit, 0)) != DataType.BOOL:
                return Support.no("the condition (input 0) is not bool")
        elif unit.op_type in _LOGICAL:
            allowed = (DataType.BOOL,)
        else:
            allowed = (DataType.FLOAT, DataType.INT32) + ((DataType.BOOL,) if unit.op_type == "Equal" else ())
        dtypes = {ctx.dtype(v) for v in values}
        if len(dtypes) != 1 or not dtypes <= set(allowed):
            names = ", ".join(sorted(dtype_name(d) for d in dtypes))
            return Support.no(f"inputs are {names}; needs {' or '.join(dtype_name(d) for d in allowed)}, all the same")
        return SUPPORTED

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Inputs rank ≤4; Where: condition, X and Y of one shape (NNAPI's SELECT does not broadcast)."""
        for index in range(len(unit.target.inputs)):
            result = rank_between(ctx, unit, 0, 4, index)
            if not result:
                return result
        if unit.op_type == "Where":
            shapes = {ctx.static_shape(v) for v in unit.target.inputs}
            if len(shapes) != 1:
                return Support.no(f"condition, X and Y have different shapes {sorted(map(str, shapes))}")
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        node = unit.target
        code = _CODES[unit.op_type]
        out = node.outputs[0]
        perm = b.elementwise_layout(list(node.inputs), out)
        inputs = [b.broadcast(v, perm).index for v in node.inputs]
        y = b.new(out, perm)
        b.op(code, inputs, [y.index])
