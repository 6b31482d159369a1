"""LSTM and GRU with a static sequence length unrolled into per-step Gemm, Slice, Sigmoid, Tanh, Mul and Add.

Part of the rewrite library :mod:`mobile_ep.passes.rewrites` (which exports these classes).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from mobile_ep.contract import RuleContext, Support, attr
from mobile_ep.contract.rewrite import Builder, Rewrite

__all__ = ["LSTMToSteps", "GRUToSteps"]

_DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"]}


def _input(node: ir.Node, index: int) -> ir.Value | None:
    return node.inputs[index] if len(node.inputs) > index else None


class _Unrolled(Rewrite):
    """Shared checks and plumbing of the unrolled recurrences."""

    gates = 4

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        x = node.inputs[0]
        shape = ctx.static_shape(x)
        if shape is None or len(shape) != 3:
            return Support.no("X has no static 3-D shape")
        if ctx.dtype(x) != ir.DataType.FLOAT:
            return Support.no("X is not float32")
        if int(attr(node, "layout", 0)) != 0:
            return Support.no("layout=1")
        if attr(node, "clip") is not None:
            return Support.no("clip is set")
        directions = 2 if attr(node, "direction", "forward") == "bidirectional" else 1
        activations = attr(node, "activations")
        if activations is not None and list(activations) != _DEFAULT_ACTIVATIONS[node.op_type] * directions:
            return Support.no("activations other than the defaults")
        for index, what in ((1, "W"), (2, "R"), (3, "B")):
            value = _input(node, index)
            if value is not None and not ctx.is_constant(value):
                return Support.no(f"{what} is not constant")
        lens = _input(node, 4)
        if lens is not None:
            lengths = ctx.constant(lens)
            if lengths is None or np.any(lengths != shape[0]):
                return Support.no("sequence_lens is not constant and equal to the sequence length")
        for index in range(5, len(node.inputs)):
            if node.inputs[index] is not None and ctx.static_shape(node.inputs[index]) is None:
                return Support.no(f"input {index} has no static shape")
        if shape[0] * directions > 256:
            return Support.no("more than 256 steps to unroll")
        return Support.yes()

    def _setup(self, node: ir.Node, ctx: RuleContext, b: Builder):
        x = node.inputs[0]
        steps, batch, _ = ctx.static_shape(x)  # type: ignore[misc]
        w = ctx.constant(node.inputs[1])
        r = ctx.constant(node.inputs[2])
        assert w is not None and r is not None
        hidden = r.shape[-1]
        bias_value = _input(node, 3)
        bias = ctx.constant(bias_value) if bias_value is not None else None
        if bias is None:
            bias = np.zeros((w.shape[0], 2 * self.gates * hidden), np.float32)
        flat = b.op("Reshape", [x, b.const(np.array([steps * batch, w.shape[2]], np.int64), "shape")],
                    shape=(steps * batch, w.shape[2]), dtype=ir.DataType.FLOAT)
        return steps, batch, hidden, w, r, bias.astype(np.float32), flat

    @staticmethod
    def _state(b: Builder, ctx: RuleContext, node: ir.Node, index: int, direction: int, batch: int, hidden: int
               ) -> ir.Value | None:
        """Input *index* ([D, B, H]) for *direction*, as [B, H] (None: zeros)."""
        value = _input(node, index)
        if value is None:
            return None
        return b.op("Gather", [value, b.const(np.array(direction, np.int64), "direction")], shape=(batch, hidden),
                    dtype=ir.DataType.FLOAT, axis=0)

    @staticmethod
    def _outputs(b: Builder, node: ir.Node, per_direction: list[tuple[list[ir.Value], list[ir.Value]]],
                 steps: int, batch: int, hidden: int) -> list[ir.Value | None]:
        """Y [T, D, B, H] from every step's h (in time order) and the last states [D, B, H]."""
        f32 = ir.DataType.FLOAT
        dirs = len(per_direction)
        results: list[ir.Value | None] = []

        def reshape(v: ir.Value, shape: tuple[int, ...]) -> ir.Value:
            return b.op("Reshape", [v, b.const(np.array(shape, np.int64), "shape")], shape=shape, dtype=f32)

        def concat(values: list[ir.Value], axis: int, shape: tuple[int, ...]) -> ir.Value:
            return values[0] if len(values) == 1 else b.op("Concat", values, shape=shape, dtype=f32, axis=axis)

        def used(i: int) -> bool:
            return len(node.outputs) > i and bool(node.outputs[i].uses() or node.outputs[i].is_graph_output())

        if used(0):
            lanes = [concat([reshape(h, (1, 1, batch, hidden)) for h in hs], 0, (steps, 1, batch, hidden))
                     for hs, _ in per_direction]
            results.append(concat(lanes, 1, (steps, dirs, batch, hidden)))
        else:
            results.append(None)
        for k in range(1, len(node.outputs)):
            if used(k):
                finals = [reshape(states[k - 1], (1, batch, hidden)) for _, states in per_direction]
                results.append(concat(finals, 0, (dirs, batch, hidden)))
            else:
                results.append(None)
        return results


def _gemm(b: Builder, a: ir.Value, weight: np.ndarray, bias: np.ndarray | None, rows: int) -> ir.Value:
    inputs = [a, b.const(np.ascontiguousarray(weight), "weight")]
    if bias is not None:
        inputs.append(b.const(np.ascontiguousarray(bias), "bias"))
    return b.op("Gemm", inputs, shape=(rows, weight.shape[0]), dtype=ir.DataType.FLOAT, transB=1)


def _columns(b: Builder, v: ir.Value, start: int, stop: int, rows: int) -> ir.Value:
    return b.op("Slice", [v, *(b.const(np.array([i], np.int64), "slice") for i in (start, stop, 1))],
                shape=(rows, stop - start), dtype=ir.DataType.FLOAT)


def _rows(b: Builder, v: ir.Value, start: int, stop: int, width: int) -> ir.Value:
    return b.op("Slice", [v, *(b.const(np.array([i], np.int64), "slice") for i in (start, stop, 0))],
                shape=(stop - start, width), dtype=ir.DataType.FLOAT)


def _directions(node: ir.Node, steps: int) -> list[tuple[int, list[int]]]:
    direction = attr(node, "direction", "forward")
    forward, backward = list(range(steps)), list(range(steps - 1, -1, -1))
    if direction == "bidirectional":
        return [(0, forward), (1, backward)]
    return [(0, backward if direction == "reverse" else forward)]


class LSTMToSteps(_Unrolled):
    """LSTM (static sequence length, default activations, no peepholes or clip) -> per step and direction a
    Gemm of h by R, Add to the input projection (one Gemm for all steps), Slices of the i, o, f, c gates,
    Sigmoid, Tanh, Mul, Add; Y, Y_h and Y_c assembled by Reshape and Concat (equal within rounding)."""

    name = "lstm-to-steps"
    op_types = ("LSTM",)
    gates = 4

    def match(self, node: ir.Node, ctx: RuleContext) -> Support:
        ok = super().match(node, ctx)
        if not ok:
            return ok
        if int(attr(node, "input_forget", 0)):
            return Support.no("input_forget=1")
        return Support.check(_input(node, 7) is None, "peepholes (P) are given")

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        steps, batch, hidden, w, r, bias, flat = self._setup(node, ctx, b)
        f32 = ir.DataType.FLOAT
        per_direction = []
        for d, order in _directions(node, steps):
            projected = _gemm(b, flat, w[d], bias[d, :4 * hidden] + bias[d, 4 * hidden:], steps * batch)
            h = self._state(b, ctx, node, 5, d, batch, hidden)
            c = self._state(b, ctx, node, 6, d, batch, hidden)
            hs: dict[int, ir.Value] = {}
            for t in order:
                gates = _rows(b, projected, t * batch, (t + 1) * batch, 4 * hidden)
                if h is not None:
                    gates = b.op("Add", [gates, _gemm(b, h, r[d], None, batch)], shape=(batch, 4 * hidden), dtype=f32)
                i, o, f, g = (b.op(op, [_columns(b, gates, k * hidden, (k + 1) * hidden, batch)], shape=(batch, hidden),
                                   dtype=f32) for k, op in enumerate(("Sigmoid", "Sigmoid", "Sigmoid", "Tanh")))
                ig = b.op("Mul", [i, g], shape=(batch, hidden), dtype=f32)
                c = ig if c is None else b.op("Add", [b.op("Mul", [f, c], shape=(batch, hidden), dtype=f32), ig],
                                              shape=(batch, hidden), dtype=f32)
                h = b.op("Mul", [o, b.op("Tanh", [c], shape=(batch, hidden), dtype=f32)], shape=(batch, hidden),
                         dtype=f32)
                hs[t] = h
            assert h is not None and c is not None
            per_direction.append(([hs[t] for t in range(steps)], [h, c]))
        return self._outputs(b, node, per_direction, steps, batch, hidden)


class GRUToSteps(_Unrolled):
    """GRU (static sequence length, default activations, no clip; either linear_before_reset) -> per step and
    direction Gemms, Slices of the z, r, h gates, Sigmoid, Tanh, Mul, Add, Sub; Y and Y_h assembled by
    Reshape and Concat (equal within rounding)."""

    name = "gru-to-steps"
    op_types = ("GRU",)
    gates = 3

    def replace(self, node: ir.Node, ctx: RuleContext, b: Builder) -> Sequence[ir.Value]:
        steps, batch, hidden, w, r, bias, flat = self._setup(node, ctx, b)
        f32 = ir.DataType.FLOAT
        shape = (batch, hidden)
        before_reset = int(attr(node, "linear_before_reset", 0))
        one = b.const(np.array(1.0, np.float32), "one")

        def op(op_type: str, *inputs: ir.Value) -> ir.Value:
            return b.op(op_type, list(inputs), shape=shape, dtype=f32)

        per_direction = []
        for d, order in _directions(node, steps):
            wb, rb = bias[d, :3 * hidden], bias[d, 3 * hidden:]
            # z and r take both biases at once; the candidate's recurrent bias stays with its recurrent term
            input_bias = np.concatenate([wb[:2 * hidden] + rb[:2 * hidden], wb[2 * hidden:]])
            projected = _gemm(b, flat, w[d], input_bias, steps * batch)
            h = self._state(b, ctx, node, 5, d, batch, hidden)
            hs: dict[int, ir.Value] = {}
            for t in order:
                x_all = _rows(b, projected, t * batch, (t + 1) * batch, 3 * hidden)
                xz, xr, xh = (_columns(b, x_all, k * hidden, (k + 1) * hidden, batch) for k in range(3))
                if h is None:
                    z, reset = op("Sigmoid", xz), op("Sigmoid", xr)
                    recurrent = b.const(rb[2 * hidden:].reshape(1, hidden).copy(), "bias")  # h R_h^T is 0
                    candidate = op("Tanh", op("Add", xh, op("Mul", reset, recurrent) if before_reset else recurrent))
                    h = op("Mul", op("Sub", one, z), candidate)
                else:
                    hr = _gemm(b, h, r[d][:2 * hidden], None, batch)
                    z = op("Sigmoid", op("Add", xz, _columns(b, hr, 0, hidden, batch)))
                    reset = op("Sigmoid", op("Add", xr, _columns(b, hr, hidden, 2 * hidden, batch)))
                    if before_reset:
                        hh = _gemm(b, h, r[d][2 * hidden:], rb[2 * hidden:], batch)
                        candidate = op("Tanh", op("Add", xh, op("Mul", reset, hh)))
                    else:
                        hh = _gemm(b, op("Mul", reset, h), r[d][2 * hidden:], rb[2 * hidden:], batch)
                        candidate = op("Tanh", op("Add", xh, hh))
                    h = op("Add", op("Mul", op("Sub", one, z), candidate), op("Mul", z, h))
                hs[t] = h
            assert h is not None
            per_direction.append(([hs[t] for t in range(steps)], [h]))
        return self._outputs(b, node, per_direction, steps, batch, hidden)
