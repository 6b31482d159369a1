"""Pooling (``pool_op_builder.cc``): QNN PoolMax2d/PoolAvg2d/PoolAvg3d, global pooling as pooling over the
whole plane; 1-D pooling as 2-D."""

from __future__ import annotations

from ._base import SUPPORTED, DataType, QnnRule, Support, attr


def _no_dilation(node) -> Support:
    if any(d != 1 for d in attr(node, "dilations", ()) or ()):
        return Support.no("dilations other than 1: QNN pooling has no dilation")
    return SUPPORTED


class MaxPool(QnnRule):
    op_types = ("MaxPool",)

    def check_common(self, unit, ctx):
        node = unit.target
        dtype = ctx.dtype(node.inputs[0])
        if dtype in (DataType.UINT8, DataType.INT8) and ctx.rank(node.inputs[0]) in (3, 4):
            return Support.no(f"a plain {dtype.name.lower()} input: onnxruntime-qnn 2.7 takes MaxPool of it, then "
                              "refuses it in NHWC layout and fails the session")
        return super().check_common(unit, ctx)

    def check(self, unit, ctx):
        """1-D or 2-D, no dilation, no indices output."""
        node = unit.target
        if len(node.outputs) > 1 and node.outputs[1] is not None and node.outputs[1].name:
            return Support.no("the indices output: QNN's PoolMax2d has none")
        rank = ctx.rank(node.inputs[0])
        if rank not in (3, 4):
            return Support.no(f"rank-{rank} input: QNN max pooling is 1-D or 2-D")
        return _no_dilation(node)


class AveragePool(QnnRule):
    op_types = ("AveragePool",)

    def check(self, unit, ctx):
        """1-D, 2-D or 3-D, no dilation."""
        rank = ctx.rank(unit.target.inputs[0])
        if rank not in (3, 4, 5):
            return Support.no(f"rank-{rank} input: QNN average pooling is 1-D, 2-D or 3-D")
        return _no_dilation(unit.target)


class GlobalPool(QnnRule):
    op_types = ("GlobalAveragePool", "GlobalMaxPool")

    def check(self, unit, ctx):
        """1-D to 3-D planes (rank 3 to 5); GlobalMaxPool 1-D or 2-D."""
        rank = ctx.rank(unit.target.inputs[0])
        if rank not in (3, 4, 5):
            return Support.no(f"rank-{rank} input: QNN global pooling is over 1-D to 3-D planes")
        if rank == 5 and unit.target.op_type == "GlobalMaxPool":
            return Support.no("rank 5: the HTP takes GlobalMaxPool over 1-D or 2-D planes only")
        return SUPPORTED


class LpPool(QnnRule):
    op_types = ("LpPool",)

    def check(self, unit, ctx):
        """p=1 or 2, 1-D or 2-D, no dilation, ceil_mode=0."""
        node = unit.target
        if attr(node, "p", 2) not in (1, 2):
            return Support.no("p other than 1 or 2: the QNN EP pools with the L1 or L2 norm only")
        if attr(node, "ceil_mode", 0):
            return Support.no("ceil_mode=1: the QNN EP pools with the L1 or L2 norm with floor rounding only")
        rank = ctx.rank(node.inputs[0])
        if rank not in (3, 4):
            return Support.no(f"rank-{rank} input: QNN's L2 pooling is 1-D or 2-D")
        return _no_dilation(node)
