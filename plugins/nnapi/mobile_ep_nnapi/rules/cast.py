"""Cast (ORT ``cast_op_builder.cc``): CAST."""

from __future__ import annotations

from mobile_ep import SUPPORTED, DataType, NodeUnit, RuleContext, Support, attr
from mobile_ep_nnapi.nnapi import OperationCode

from ._base import NnapiRule
from ._quant import dtype_name


class CastRule(NnapiRule):
    op_types = ("Cast",)
    min_feature_level = 3
    # Cast-1 names the target type with a string
    min_opset = 6

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """`to` float32 or int32."""
        to = attr(unit.target, "to", 0)
        if to not in (DataType.FLOAT.value, DataType.INT32.value):
            try:
                name = dtype_name(DataType(to))
            except ValueError:
                name = str(to)
            return Support.no(f"cast to {name} is not supported (float32 or int32 only)")
        return SUPPORTED

    def emit(self, unit: NodeUnit, ctx: RuleContext, b) -> None:
        x = b.get(unit.target.inputs[0], "any")
        y = b.new(unit.target.outputs[0], x.perm)
        b.op(OperationCode.CAST, [x.index], [y.index])
