"""Reductions and ArgMax/ArgMin (``reduce_op_builder.cc``, ``argmax_argmin_op_builder.cc``)."""

from __future__ import annotations

from ._base import FLOATS, INTS, MAX_RANK, SUPPORTED, QnnRule, Support, attr, session_failure


def _axes(unit, ctx) -> list[int] | None:
    """The reduced axes (every axis when none are given), or ``None`` when not known."""
    node = unit.target
    rank = ctx.rank(node.inputs[0])
    if rank is None:
        return None
    axes = attr(node, "axes", None)
    if axes is None and len(node.inputs) > 1 and node.inputs[1] is not None:
        array = ctx.constant(node.inputs[1])
        axes = None if array is None else [int(a) for a in array.reshape(-1)]
    if not axes:
        return list(range(rank))
    return sorted({a % rank for a in axes})


class Reduce(QnnRule):
    op_types = ("ReduceMax", "ReduceMean", "ReduceMin", "ReduceSum", "ReduceL2", "ReduceLogSumExp")
    constant_inputs = {1: "axes"}
    input_types = {0: FLOATS | INTS}

    def check(self, unit, ctx):
        """float32/float16 or a QDQ unit; int32/int64 for ReduceSum, ReduceMax and ReduceMin (not of rank 5 for
        ReduceMax; ReduceMin of rank 5 the EP takes, computing a wrong result); constant axes; noop_with_empty_axes=0 unless axes are given.  float ReduceMax and ReduceMin
        of rank 5 over one axis only; ReduceLogSumExp of rank 4 at most, ReduceL2 of rank 5 with keepdims=0 only (the HTP's
        op validation refuses the rest); no axes input named ''."""
        node = unit.target
        op = node.op_type
        given = attr(node, "axes", None) or (len(node.inputs) > 1 and node.inputs[1] is not None
                                              and ctx.static_shape(node.inputs[1]) != (0,))
        if attr(node, "noop_with_empty_axes", 0) and not given:
            return Support.no("noop_with_empty_axes=1 without axes: the QNN EP reduces every axis then (it takes a rank-1 "
                              "one with keepdims=0 and computes a sum, not the identity: left to the CPU)")
        if len(node.inputs) > 1 and node.inputs[1] is None:
            return Support.no("an axes input named '' (as the body of a function op onnxruntime inlines writes it): "
                              "onnxruntime-qnn 2.7 cannot get its shape and leaves the node")
        dtype = ctx.dtype(node.inputs[0])
        rank = ctx.rank(node.inputs[0])
        if dtype in INTS and op not in ("ReduceSum", "ReduceMax", "ReduceMin"):
            return Support.no(f"input 0 is {dtype.name.lower()}: QNN takes {op} of float32 or float16")
        if rank == MAX_RANK:
            if op == "ReduceLogSumExp":
                return Support.no(f"rank 5: the HTP takes {op} of rank 4 at most")
            if op == "ReduceL2" and attr(node, "keepdims", 1):
                return Support.no("rank 5 with keepdims=1: the HTP takes ReduceL2 of rank 5 with keepdims=0 only")
            if op in ("ReduceMax", "ReduceMin"):
                if dtype in INTS:
                    if op == "ReduceMax":
                        return Support.no("an integer input of rank 5: the HTP takes integer ReduceMax of rank 4 at "
                                          "most")
                    failing = session_failure(unit, ctx)
                    return failing if not failing else Support.no(
                        "an integer input of rank 5: onnxruntime-qnn 2.7 takes integer ReduceMin of rank 5 but computes "
                        "a wrong result on the HTP: left to the CPU")
                axes = _axes(unit, ctx)
                if axes is not None and len(axes) > 1:
                    return Support.no(f"{len(axes)} axes of a rank-5 tensor: the HTP takes {op} of rank 5 over one "
                                      "axis only")
        return SUPPORTED


class ArgMaxMin(QnnRule):
    op_types = ("ArgMax", "ArgMin")
    input_types = {0: FLOATS | INTS}
    #: The HTP refuses these on rank-5 tensors (error 3110 from its op validation).
    max_rank = 4

    def check(self, unit, ctx):
        """select_last_index=0; ArgMax of float32, float16, int32 or int64, ArgMin of float32 or float16."""
        node = unit.target
        if attr(node, "select_last_index", 0):
            return Support.no("select_last_index=1: QNN's Argmax/Argmin return the first index")
        dtype = ctx.dtype(node.inputs[0])
        if node.op_type == "ArgMin" and dtype in INTS:
            return Support.no(f"input 0 is {dtype.name.lower()}: QNN takes ArgMin of float32 or float16")
        return SUPPORTED
