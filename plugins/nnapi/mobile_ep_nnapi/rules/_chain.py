"""Helpers for lowerings that are short chains of NNAPI operations on one tensor (the extended rules).

A :class:`Chain` starts from an input value in the layout it already has and appends operations whose
results have the same dims; :meth:`Chain.finish` writes the last one to the ONNX output.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from mobile_ep_nnapi.nnapi import FuseCode, OperandCode, OperationCode

__all__ = ["Chain"]


class Chain:
    def __init__(self, b, value: ir.Value, perm: str | tuple[int, ...] = "any") -> None:
        self.b = b
        ref = b.get(value, perm)
        self.perm = ref.perm
        self.current = ref.index
        self.dims = b.model.operands[ref.index].dims
        self.code = OperandCode(b.model.operands[ref.index].type)

    def scalar_tensor(self, value: float) -> int:
        """A [1] constant of the chain's type, for broadcasting."""
        if self.code == OperandCode.TENSOR_INT32:
            return self.b.constant(np.int32([value]), OperandCode.TENSOR_INT32)
        return self.b.constant(np.float32([value]), OperandCode.TENSOR_FLOAT32)

    def _next(self, code: OperationCode, inputs: list[int], out: int | None = None,
              out_code: OperandCode | None = None) -> int:
        target = out if out is not None else self.b.scratch(out_code or self.code, self.dims)
        self.b.op(code, inputs, [target])
        self.current = target
        if out_code is not None:
            self.code = out_code
        return target

    def unary(self, code: OperationCode, out: int | None = None) -> Chain:
        self._next(code, [self.current], out)
        return self

    def binary(self, code: OperationCode, other: int, *, first: bool = False, out: int | None = None) -> Chain:
        """``current <op> other`` (or ``other <op> current`` with *first*); ADD/SUB/MUL/DIV get FUSED_NONE."""
        operands = [other, self.current] if first else [self.current, other]
        if code in (OperationCode.ADD, OperationCode.SUB, OperationCode.MUL, OperationCode.DIV):
            operands.append(self.b.i32(FuseCode.NONE))
        self._next(code, operands, out)
        return self

    def with_scalar(self, code: OperationCode, value: float, *, first: bool = False, out: int | None = None) -> Chain:
        return self.binary(code, self.scalar_tensor(value), first=first, out=out)

    def op(self, code: OperationCode, extra: list[int], out: int | None = None,
           out_code: OperandCode | None = None) -> Chain:
        self._next(code, [self.current, *extra], out, out_code)
        return self

    def output(self, value: ir.Value) -> int:
        """The operand for the ONNX output *value* (bound in the chain's layout)."""
        return self.b.new(value, self.perm).index
