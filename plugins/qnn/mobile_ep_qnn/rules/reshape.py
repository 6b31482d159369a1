"""Reshape, Flatten, Squeeze, Unsqueeze (``reshape_op_builder.cc``): QNN Reshape to the static output shape;
the EP's rank-6 to rank-5 fusion (``qnn_node_group/reshape_transpose_rank5.cc``)."""

from __future__ import annotations

import onnx_ir as ir

from ._base import FLOATS, INTS, MAX_RANK, SUPPORTED, DataType, QnnRule, Support, attr

#: The types the EP reshapes and slices outside QDQ units (no int8, uint16, int16 tensors there).
ANY_DATA = FLOATS | INTS | {DataType.UINT8, DataType.BOOL}
#: The types the EP gathers, concatenates, transposes, tiles and expands outside QDQ units (no 8- or 16-bit
#: integers there: a quantized tensor is moved only inside a QDQ unit, which reads it dequantized).
MOVED_DATA = FLOATS | INTS | {DataType.BOOL}


def quantized_in_the_ep(value, ctx) -> bool:
    """Whether *value* is a quantized tensor in the EP's graph: a QuantizeLinear the EP takes makes it."""
    made = ctx.producer(value)
    return made is not None and made.op_type == "QuantizeLinear" and made.domain in ("", "ai.onnx") and bool(
        ctx.claims(made))


def not_quantized_by_the_ep(unit, ctx) -> Support:
    """A uint8 input that is quantized in the EP's graph (:func:`quantized_in_the_ep`) the EP does not reshape or
    slice outside a QDQ unit (a plain uint8 tensor, a graph input's or the CPU's, it does)."""
    value = unit.target.inputs[0]
    if ctx.dtype(value) == DataType.UINT8 and unit.kind != "qdq" and quantized_in_the_ep(value, ctx):
        return Support.no("input 0 is a quantized uint8 tensor in the EP's graph (a QuantizeLinear makes it): the "
                          f"QNN EP does not {unit.target.op_type} it outside a QDQ unit")
    return SUPPORTED


def rank_limit(unit, ctx, limits: dict[DataType, int], index: int = 0) -> Support:
    """Input *index*'s type has a lower rank limit on the HTP than the op's (*limits*: type -> highest rank of the
    input and the output)."""
    value = unit.target.inputs[index]
    dtype = ctx.dtype(value)
    rank = max((ctx.rank(v) or 0 for v in (value, unit.target.outputs[0]) if v is not None), default=0)
    limit = limits.get(dtype)
    if limit is not None and rank is not None and rank > limit:
        return Support.no(f"a {dtype.name.lower()} tensor of rank {rank}: the HTP takes {unit.target.op_type} of "
                          f"{dtype.name.lower()} of rank {limit} at most")
    return SUPPORTED

#: The SpaceToDepth permutations, which the EP's rank-6 fusion leaves to its SpaceToDepth fusion.
_SPACE_TO_DEPTH_PERMS = ((0, 3, 5, 1, 2, 4), (0, 1, 3, 5, 2, 4))


def _only_consumer(value: ir.Value, op_type: str, ctx) -> ir.Node | None:
    users = ctx.consumers(value)
    if len(users) != 1 or ctx.is_graph_output(value) or users[0].op_type != op_type or users[0].domain not in ("", "ai.onnx"):
        return None
    return users[0]


def in_rank6_fusion(node: ir.Node, ctx) -> bool:
    """Whether *node* is part of the QNN EP's rank-6 to rank-5 fusion, which it builds with rank-5 tensors:
    Reshape (constant shape) -> Transpose -> Reshape (constant shape), the two middle tensors of rank 6 with a
    dimension of 1 at the same index, which the permutation keeps in place (not a SpaceToDepth permutation)."""
    ctx.reads_graph()
    first = node
    if node.op_type == "Transpose" or (node.op_type == "Reshape" and ctx.rank(node.inputs[0]) == MAX_RANK + 1):
        first = ctx.producer(node.inputs[0])
        if first is not None and first.op_type == "Transpose":
            first = ctx.producer(first.inputs[0])
    if first is None or first.op_type != "Reshape" or first.domain not in ("", "ai.onnx") or len(first.inputs) < 2:
        return False
    transpose = _only_consumer(first.outputs[0], "Transpose", ctx)
    last = _only_consumer(transpose.outputs[0], "Reshape", ctx) if transpose is not None else None
    if last is None or not (ctx.is_constant(first.inputs[1]) and ctx.is_constant(last.inputs[1])):
        return False
    t1, t2 = ctx.static_shape(first.outputs[0]), ctx.static_shape(transpose.outputs[0])
    if t1 is None or t2 is None or len(t1) != MAX_RANK + 1 or len(t2) != MAX_RANK + 1:
        return False
    perm = tuple(attr(transpose, "perm", ()) or ())
    unit_dim = next((i for i in range(len(t1)) if t1[i] == 1 and t2[i] == 1), None)
    return (unit_dim is not None and len(perm) == len(t1) and perm not in _SPACE_TO_DEPTH_PERMS
            and perm[unit_dim] == unit_dim)


class Reshape(QnnRule):
    op_types = ("Reshape",)
    input_types = {0: ANY_DATA}

    def builds_at_lower_rank(self, unit, ctx):
        return in_rank6_fusion(unit.target, ctx)

    def check(self, unit, ctx):
        """Rank 5 at most (rank 6 inside the EP's rank-6 to rank-5 fusion of Reshape -> Transpose -> Reshape);
        the output shape is static (the shape input may be computed); not of a quantized uint8 tensor the EP makes."""
        return not_quantized_by_the_ep(unit, ctx)


class Flatten(QnnRule):
    op_types = ("Flatten",)
    input_types = {0: ANY_DATA}

    def check(self, unit, ctx):
        """Any axis; not of a quantized uint8 tensor the EP makes."""
        return not_quantized_by_the_ep(unit, ctx)


class SqueezeUnsqueeze(QnnRule):
    op_types = ("Squeeze", "Unsqueeze")
    input_types = {0: ANY_DATA}

    def check(self, unit, ctx):
        """Any axes (the output shape is static); rank 5 at most; not of a quantized uint8 tensor the EP makes."""
        return not_quantized_by_the_ep(unit, ctx)
