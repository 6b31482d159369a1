"""What rules lower into: an ENPU program under construction, indexed by the ONNX values it holds."""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir

from mobile_ep import RuleContext

from .enpu import Op, Program

__all__ = ["ProgramBuilder"]


class ProgramBuilder:
    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx
        self.program = Program()
        self._index: dict[ir.Value, int] = {}

    def tensor(self, value: ir.Value) -> int:
        """The program's tensor for *value*: a constant (weights copied in) or an activation."""
        if value not in self._index:
            data = self.ctx.constant(value)
            shape = self.ctx.static_shape(value) if data is None else data.shape
            if shape is None:
                raise ValueError(f"value {value.name!r} has no static shape")
            self._index[value] = self.program.add_tensor(tuple(shape), data)
        return self._index[value]

    def op(self, op: Op, inputs: Sequence[ir.Value | None], outputs: Sequence[ir.Value],
           params: Sequence[int] = ()) -> None:
        self.program.add_op(op, tuple(self.tensor(v) for v in inputs if v is not None),
                            tuple(self.tensor(v) for v in outputs), tuple(params))
