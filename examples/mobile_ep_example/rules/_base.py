"""What every example-NPU rule checks first, and helpers shared by the lowerings."""

from __future__ import annotations

from typing import ClassVar

from mobile_ep import SUPPORTED, DataType, NodeUnit, OpRule, RuleContext, Support, attr
from mobile_ep_example.builder import ProgramBuilder


class ExampleRule(OpRule):
    """Base rule: float32 tensors with static shapes of rank <= 4 (the NPU's only data type and layout)."""

    max_rank: ClassVar[int] = 4

    def check_common(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        result = super().check_common(unit, ctx)
        if not result:
            return result
        values = [(f"input {i}", io.value) for i, io in enumerate(unit.inputs) if io is not None]
        values.append(("output 0", unit.outputs[0].value))
        for label, value in values:
            dtype = ctx.dtype(value)
            if dtype != DataType.FLOAT:
                return Support.no(f"{label} is {dtype.name if dtype is not None else 'of unknown type'}, not float32")
            shape = ctx.static_shape(value)
            if shape is None:
                return Support.no(f"{label} has a dynamic or unknown shape")
            if len(shape) > self.max_rank:
                return Support.no(f"{label} has rank {len(shape)}; the NPU handles rank <= {self.max_rank}")
        return SUPPORTED

    def lower(self, unit: NodeUnit, ctx: RuleContext, builder: ProgramBuilder) -> None:
        raise NotImplementedError(type(self).__name__)


AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


def explicit_pads(unit: NodeUnit, ctx: RuleContext, kernel: tuple[int, int], strides: tuple[int, int],
                  dilations: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) for a 2-D window op, resolving ``auto_pad`` with the static shapes."""
    node = unit.target
    auto_pad = attr(node, "auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        pads = attr(node, "pads", (0, 0, 0, 0))
        return int(pads[0]), int(pads[1]), int(pads[2]), int(pads[3])
    if auto_pad == "VALID":
        return 0, 0, 0, 0
    in_shape = ctx.static_shape(unit.inputs[0].value)  # type: ignore[union-attr]
    out_shape = ctx.static_shape(unit.outputs[0].value)
    assert in_shape is not None and out_shape is not None
    begin, end = [], []
    for axis in range(2):
        total = max((out_shape[2 + axis] - 1) * strides[axis] + (kernel[axis] - 1) * dilations[axis] + 1
                    - in_shape[2 + axis], 0)
        first = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        begin.append(first)
        end.append(total - first)
    return begin[0], begin[1], end[0], end[1]


def pair(node_attr: object, default: tuple[int, int] = (1, 1)) -> tuple[int, int]:
    if node_attr is None:
        return default
    values = tuple(int(v) for v in node_attr)  # type: ignore[attr-defined]
    return values[0], values[1]
