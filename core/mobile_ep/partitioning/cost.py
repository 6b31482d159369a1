"""A simple cost model: is a partition worth the copies across its boundary?

Per node: an estimate of its arithmetic (multiply-adds counted as 2 FLOPs) from its static shapes.  Per
partition: the FLOPs it moves to the accelerator, and the bytes crossing its boundary (non-constant
inputs and outputs).  The time saved on the accelerator, ``flops / cpu_rate * (1 - 1 / speedup)``, must
exceed the time spent copying and dispatching, ``bytes / copy_rate + dispatch``.  The constants are
per backend (:meth:`Backend.cost_params`), deliberately round, and documented in the README: the model
ranks partitions and catches the hopeless ones (one Add between two copies), it does not predict
latency.  A partition with dynamic shapes (a node's output, or a value crossing its boundary) has an
unknown cost: it is shown as unknown and decides nothing (the partition is kept, ranked after the known).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import onnx_ir as ir

from mobile_ep.contract import CostParams, RuleContext, attr
from mobile_ep.partitioning.propose import Partition

__all__ = ["CostParams", "PartitionCost", "node_flops", "partition_cost", "select_partitions"]


@dataclasses.dataclass
class PartitionCost:
    nodes: int
    flops: float
    boundary_bytes: int
    saving_us: float
    overhead_us: float
    kept: bool = True
    reason: str = ""
    #: False when dynamic shapes leave the FLOPs or the bytes copied unknown: the numbers above are then
    #: meaningless (shown as unknown) and the cost decides nothing.
    known: bool = True

    @property
    def net_us(self) -> float:
        return self.saving_us - self.overhead_us

    def as_dict(self) -> dict:
        if not self.known:
            return {"nodes": self.nodes, "flops": None, "boundary_bytes": None, "estimated_saving_us": None,
                    "estimated_overhead_us": None, "kept": self.kept, "reason": self.reason, "known": False}
        return {
            "nodes": self.nodes,
            "flops": int(self.flops),
            "boundary_bytes": self.boundary_bytes,
            "estimated_saving_us": round(self.saving_us, 2),
            "estimated_overhead_us": round(self.overhead_us, 2),
            "kept": self.kept,
            "reason": self.reason,
        }


def _numel(shape: tuple[int | None, ...] | None) -> int:
    if shape is None or None in shape:
        return 0
    return int(math.prod(shape))  # type: ignore[arg-type]


def _static(value: ir.Value | None, ctx: RuleContext) -> bool:
    shape = ctx.shape(value) if value is not None else ()
    return shape is not None and None not in shape


def _bytes(value: ir.Value, ctx: RuleContext) -> int:
    dtype = ctx.dtype(value)
    size = dtype.itemsize if dtype is not None else 4
    return int(_numel(ctx.shape(value)) * size)  # (itemsize is a float: 0.5 for 4-bit types)


#: Convolutions, by the index of their weight input.
_CONVS = {"Conv": 1, "ConvTranspose": 1, "ConvInteger": 1, "QLinearConv": 3}
_MATMULS = frozenset({"Gemm", "MatMul", "MatMulInteger", "QLinearMatMul"})
_POOLS = frozenset({"MaxPool", "AveragePool", "LpPool"})
_REDUCTIONS = frozenset({"GlobalAveragePool", "GlobalMaxPool", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"})
_TRANSCENDENTAL = frozenset({"Softmax", "LogSoftmax", "LayerNormalization", "InstanceNormalization", "LRN", "Erf",
                             "Exp", "Tanh", "Sigmoid", "Gelu"})
_DATA_MOVEMENT = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose", "Concat", "Slice",
                            "Split", "Gather", "Cast", "Shape"})


def node_flops(node: ir.Node, ctx: RuleContext) -> float:
    """Estimated FLOPs of one node (0 where shapes are unknown).

    Convolutions and matrix products count a multiply-add per weight and output element, pools one
    operation per window element, reductions one per input element; other ops a few operations per output
    element (5 for transcendental ones, 1/4 for data movement).
    """
    op = node.op_type
    out = _numel(ctx.shape(node.outputs[0])) if node.outputs else 0
    if op in _CONVS:
        w = ctx.shape(node.inputs[_CONVS[op]]) if len(node.inputs) > _CONVS[op] else None
        if w is None or None in w:
            return float(out)
        # weight [Cout, Cin/group, k...]: each output element is Cin/group * prod(k) multiply-adds.
        if op == "ConvTranspose":
            return 2.0 * _numel(ctx.shape(node.inputs[0])) * w[0] * math.prod(w[2:])  # type: ignore[operator]
        return 2.0 * out * math.prod(w[1:])  # type: ignore[arg-type]
    if op in _MATMULS:
        a = ctx.shape(node.inputs[0])
        if a is None or not a or a[-1] is None:
            return float(out)
        k = a[0] if op == "Gemm" and attr(node, "transA", 0) else a[-1]
        return 2.0 * out * (k or 1)
    if op in _POOLS:
        kernel = attr(node, "kernel_shape", (1,))
        return float(out * math.prod(kernel))
    if op in _REDUCTIONS:
        return float(_numel(ctx.shape(node.inputs[0])))
    if op in _TRANSCENDENTAL:
        return 5.0 * out
    if op in _DATA_MOVEMENT:
        return 0.25 * out
    return float(out)


def partition_cost(partition: Partition, ctx: RuleContext, params: CostParams) -> PartitionCost:
    flops = sum(node_flops(node, ctx) for node in partition.nodes)
    boundary = sum(_bytes(value, ctx) for value in partition.inputs if not ctx.is_constant(value))
    boundary += sum(_bytes(value, ctx) for value in partition.outputs)
    saving = flops / (params.cpu_gflops * 1e3) * (1.0 - 1.0 / params.speedup)
    overhead = boundary / (params.copy_gbps * 1e3) + params.dispatch_us
    known = all(_static(node.outputs[0], ctx) for node in partition.nodes if node.outputs) and all(
        _static(v, ctx) for v in (*partition.inputs, *partition.outputs) if not ctx.is_constant(v))
    return PartitionCost(len(partition.nodes), flops, boundary, saving, overhead, known=known)


def select_partitions(
    partitions: Sequence[Partition],
    ctx: RuleContext,
    params: CostParams,
    *,
    max_partitions: int | None = None,
    min_nodes: int | None = None,
    use_cost: bool = True,
) -> list[PartitionCost]:
    """Decide which partitions are worth keeping; each answer carries its reason."""
    costs = [partition_cost(p, ctx, params) for p in partitions]
    for cost in costs:
        if min_nodes is not None and cost.nodes < min_nodes:
            cost.kept, cost.reason = False, f"fewer than --min-nodes {min_nodes} nodes"
        elif not cost.known:
            cost.reason = "cost unknown: dynamic shapes (give --shape to estimate it); kept"
        elif use_cost and cost.net_us < 0:
            cost.kept = False
            cost.reason = (f"not worth its copies: saves ~{cost.saving_us:.1f} us of compute, costs "
                           f"~{cost.overhead_us:.1f} us moving {cost.boundary_bytes} bytes")
        else:
            cost.reason = f"saves ~{cost.net_us:.1f} us net"
    if max_partitions is not None:
        ranked = sorted((c for c in costs if c.kept), key=lambda c: (not c.known, -c.net_us if c.known else 0,
                                                                      -c.nodes))
        for cost in ranked[max_partitions:]:
            cost.kept, cost.reason = False, f"beyond --max-partitions {max_partitions} (ranked by estimated saving)"
    return costs
