"""A simple cost model: is a partition worth the copies across its boundary?

Per node: an estimate of its arithmetic (multiply-adds counted as 2 FLOPs) from its static shapes.  Per
partition: the FLOPs it moves to the accelerator, and the bytes crossing its boundary (non-constant
inputs and outputs).  The time saved on the accelerator, ``flops / cpu_rate * (1 - 1 / speedup)``, must
exceed the time spent copying and dispatching, ``bytes / copy_rate + dispatch``.  The constants are
per backend (:meth:`Backend.cost_params`), deliberately round, and documented in the README: the model
ranks partitions and catches the hopeless ones (one Add between two copies), it does not predict
latency.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import operator
from collections.abc import Sequence

import onnx_ir as ir

from mobile_ep.contract import CostParams, RuleContext, attr
from mobile_ep.partitioning.context import ProposalContext
from mobile_ep.partitioning.propose import Partition, gc_paused

_node_outputs = operator.attrgetter("outputs")
_node_op_type = operator.attrgetter("op_type")
_node_inputs = operator.attrgetter("inputs")
_value_shape = operator.attrgetter("shape")
_value_type = operator.attrgetter("type")
_shape_dims = operator.attrgetter("dims")  # (only counted: a list will do)
_ONLY_INTS = frozenset({int})

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

    @property
    def net_us(self) -> float:
        return self.saving_us - self.overhead_us

    def as_dict(self) -> dict:
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


def _bytes(value: ir.Value, ctx: RuleContext) -> int:
    dtype = ctx.dtype(value)
    size = dtype.itemsize if dtype is not None else 4
    return int(_value_numel(value, ctx) * size)  # (itemsize is a float: 0.5 for 4-bit types)


def _value_numel(value: ir.Value, ctx: RuleContext) -> int:
    """``_numel(ctx.shape(value))``, without the tuple of the usual case (a shape of known ints)."""
    shape = _value_shape(value)
    dims = shape.dims if shape is not None else None
    if dims is not None and _ONLY_INTS.issuperset(map(type, dims)):
        return int(math.prod(dims))
    return _numel(ctx.shape(value))


_CONVS = frozenset({"Conv", "ConvTranspose"})
_MATMULS = frozenset({"Gemm", "MatMul"})
_POOLS = frozenset({"MaxPool", "AveragePool", "LpPool"})
_REDUCTIONS = frozenset({"GlobalAveragePool", "GlobalMaxPool", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"})
_TRANSCENDENTAL = frozenset({"Softmax", "LogSoftmax", "LayerNormalization", "InstanceNormalization", "LRN", "Erf",
                             "Exp", "Tanh", "Sigmoid", "Gelu"})
_DATA_MOVEMENT = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose", "Concat", "Slice",
                            "Split", "Gather", "Cast", "Shape"})
#: Ops whose estimate needs more than the output's size.
_SPECIAL = _CONVS | _MATMULS | _POOLS | _REDUCTIONS


def node_flops(node: ir.Node, ctx: RuleContext) -> float:
    """Estimated FLOPs of one node (0 where shapes are unknown)."""
    outputs = _node_outputs(node)
    out = _value_numel(outputs[0], ctx) if outputs else 0
    op = _node_op_type(node)
    if op not in _SPECIAL:  # (the element-wise ops decide here)
        if op in _TRANSCENDENTAL:
            return 5.0 * out
        if op in _DATA_MOVEMENT:
            return 0.25 * out  # data movement only
        return float(out)
    return _special_flops(node, op, out, ctx)


def _special_flops(node: ir.Node, op: str, out: int, ctx: RuleContext) -> float:
    """:func:`node_flops` of the ops in ``_SPECIAL``, given the output's element count *out*."""
    if op in _CONVS:
        w = ctx.shape(node.inputs[1]) if len(node.inputs) > 1 else None
        if w is None or None in w:
            return float(out)
        # weight [Cout, Cin/group, k...]: each output element is Cin/group * prod(k) multiply-adds.
        per_output = math.prod(w[1:])  # type: ignore[arg-type]
        if op == "ConvTranspose":
            return 2.0 * _numel(ctx.shape(node.inputs[0])) * w[0] * math.prod(w[2:])  # type: ignore[operator]
        return 2.0 * out * per_output
    if op in _MATMULS:
        a = ctx.shape(node.inputs[0])
        if a is None or not a or a[-1] is None:
            return float(out)
        k = a[0] if op == "Gemm" and attr(node, "transA", 0) else a[-1]
        return 2.0 * out * (k or 1)
    if op in _POOLS:
        kernel = attr(node, "kernel_shape", (1,))
        return float(out * math.prod(kernel))
    return float(_numel(ctx.shape(node.inputs[0])))  # a reduction


#: node_flops' factor on the first output's element count, for the ops outside _SPECIAL (1.0 for the others).
_FACTORS = {**dict.fromkeys(_DATA_MOVEMENT, 0.25), **dict.fromkeys(_TRANSCENDENTAL, 5.0)}
_ITEMSIZES: dict[ir.DataType, float] = {}
for _dtype in ir.DataType:
    try:
        _ITEMSIZES[_dtype] = _dtype.itemsize
    except TypeError:  # (no fixed size: STRING, UNDEFINED)
        pass
#: ctx.shape methods that answer from the value's own shape (ProposalContext's only remembers the answers).
_PLAIN_SHAPES = (RuleContext.shape, ProposalContext.shape)


def _nodes_flops(nodes: Sequence[ir.Node], ctx: RuleContext) -> list[float]:
    """``[node_flops(node, ctx) for node in nodes]``."""
    return list(map(node_flops, nodes, itertools.repeat(ctx)))


def _total_bytes(values: Sequence[ir.Value], ctx: RuleContext) -> int:
    """``sum(_bytes(value, ctx) for value in values)``."""
    return sum([_bytes(value, ctx) for value in values])


def partition_cost(partition: Partition, ctx: RuleContext, params: CostParams) -> PartitionCost:
    flops = sum(_nodes_flops(partition.nodes, ctx))
    boundary = _total_bytes(list(itertools.filterfalse(ctx.is_constant, partition.inputs)), ctx)
    boundary += _total_bytes(partition.outputs, ctx)
    saving = flops / (params.cpu_gflops * 1e3) * (1.0 - 1.0 / params.speedup)
    overhead = boundary / (params.copy_gbps * 1e3) + params.dispatch_us
    return PartitionCost(len(partition.nodes), flops, boundary, saving, overhead)


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
    with gc_paused():  # (one cost per partition, and nothing cyclic: see propose.gc_paused)
        costs = [partition_cost(p, ctx, params) for p in partitions]
    for cost in costs:
        if min_nodes is not None and cost.nodes < min_nodes:
            cost.kept, cost.reason = False, f"fewer than --min-nodes {min_nodes} nodes"
        elif use_cost and cost.net_us < 0:
            cost.kept = False
            cost.reason = (f"not worth its copies: saves ~{cost.saving_us:.1f} us of compute, costs "
                           f"~{cost.overhead_us:.1f} us moving {cost.boundary_bytes} bytes")
        else:
            cost.reason = f"saves ~{cost.net_us:.1f} us net"
    if max_partitions is not None:
        ranked = sorted((c for c in costs if c.kept), key=lambda c: (-c.net_us, -c.nodes))
        for cost in ranked[max_partitions:]:
            cost.kept, cost.reason = False, f"beyond --max-partitions {max_partitions} (ranked by estimated saving)"
    return costs
