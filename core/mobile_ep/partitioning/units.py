"""QDQ node units: DequantizeLinear -> op [-> redundant Relu/Clip] -> QuantizeLinear groups a backend takes whole.

ONNX Runtime forms these groups for QDQ-aware execution providers (NNAPI, not Core ML) with the node-group
selectors of its QDQ transformer (``qdq_selectors.cc``, registered per op type in
``selectors_actions/shared/utils.cc``) and ``NodeGroup::CanCreateNodeGroup``; a partition never splits one.
:func:`build_node_units` follows them:

- the DequantizeLinear nodes are the target's producers of that type; each must feed only the target and
  not be a graph output.  The selector says how many of the target's inputs must come from one (all of
  them for Conv, Gemm, binary and variadic ops; the first for unary ops and ops that only move data);
- the QuantizeLinear nodes are the consumers of the target's outputs: one per output, the target's only
  consumers, and no output of the target is a graph output;
- a Relu or Clip between the target and its single QuantizeLinear joins the unit when the quantization
  makes it redundant (``IsClipMadeRedundantByQ``): a Relu when the zero point is the type's minimum, a Clip
  whose bounds, quantized, cover the type's whole range.  It must be the target's only consumer, with the
  QuantizeLinear its only consumer;
- each selector's type rules: the quantized input and output types equal (both inputs too for binary ops,
  all of them for variadic ones); a Conv with int8 activations needs an int8 weight and its bias must be
  int32; a Gemm's bias int32 with beta 1; ops that only move data need the DequantizeLinear and
  QuantizeLinear to have the same constant scalar scale (positive) and zero point.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

import numpy as np
import onnx_ir as ir

from mobile_ep.contract import NodeUnit

__all__ = ["build_node_units", "SELECTORS", "is_clip_made_redundant"]

_DQ = "DequantizeLinear"
_Q = "QuantizeLinear"
_DOMAINS = ("", "ai.onnx")

#: ORT's node-group selector of each op type (``RegisterSelector`` in ``shared/utils.cc``).
SELECTORS: dict[str, str] = {
    **dict.fromkeys(("Gather", "GatherElements", "Reshape", "Expand", "Flatten", "Transpose", "MaxPool", "Resize",
                     "Squeeze", "Unsqueeze", "Tile"), "drop_qdq"),
    **dict.fromkeys(("ArgMax", "ArgMin"), "drop_dq"),
    **dict.fromkeys(("AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LeakyRelu", "ReduceMean", "ReduceMin",
                     "ReduceMax", "ReduceProd", "ReduceSum", "Relu", "Gelu", "Elu", "HardSigmoid", "HardSwish",
                     "Sigmoid", "Slice", "LogSoftmax", "Softmax", "Sqrt", "Atan", "Asin", "Sin", "Cos", "Sign",
                     "Tanh", "Exp", "Log", "LRN", "Ceil", "Floor", "Round", "Abs", "Neg", "DepthToSpace",
                     "SpaceToDepth", "LpNormalization", "Erf"), "unary"),
    "Clip": "clip",
    **dict.fromkeys(("Add", "Div", "Mul", "Pow", "Sub", "PRelu", "GridSample"), "binary"),
    **dict.fromkeys(("Concat", "Max", "Min"), "variadic"),
    "Split": "split",
    "Conv": "conv",
    "ConvTranspose": "conv",
    "MatMul": "matmul",
    "Gemm": "gemm",
    **dict.fromkeys(("InstanceNormalization", "LayerNormalization", "RMSNormalization"), "norm"),
    "BatchNormalization": "batchnorm",
    "Where": "where",
    "Pad": "pad",
    "TopK": "topk",
    "CumSum": "cumsum",
    "ScatterElements": "where",
    **dict.fromkeys(("Einsum", "Reciprocal"), "all_dq_q_optional"),
    **dict.fromkeys(("Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"), "comparison"),
}

#: Model opsets where a selector applies: ORT registers MaxPool's only for the op's opset-12 definition,
#: which models of opset 12 to 21 use (MaxPool was redefined in opsets 12 and 22).
_OPSETS: dict[str, range] = {"MaxPool": range(12, 22)}

_TYPE_MIN_MAX = {
    ir.DataType.UINT8: (0, 255), ir.DataType.INT8: (-128, 127),
    ir.DataType.UINT16: (0, 65535), ir.DataType.INT16: (-32768, 32767),
}


def _uses(value: ir.Value) -> list[ir.Node]:
    return [use.node for use in value.uses()]


def _edge_count(node: ir.Node) -> int:
    """ORT's ``GetOutputEdgesCount``: uses of the node's outputs by nodes (graph outputs do not count)."""
    return sum(len(value.uses()) for value in node.outputs)


def _produces_graph_output(node: ir.Node, graph_outputs: Collection[ir.Value]) -> bool:
    return any(value in graph_outputs for value in node.outputs)


def _constant(value: ir.Value | None) -> np.ndarray | None:
    if value is None or value.const_value is None or value.is_graph_input():
        return None
    try:
        return value.const_value.numpy()
    except Exception:  # (a tensor whose data cannot be read is not a usable constant)
        return None


def _input(node: ir.Node, index: int) -> ir.Value | None:
    return node.inputs[index] if index < len(node.inputs) else None


def _q_dtype(q: ir.Node) -> ir.DataType | None:
    """The element type a QuantizeLinear produces (its output's, else its zero point's, else its attribute)."""
    dtype = q.outputs[0].dtype
    if dtype is not None:
        return dtype
    zero_point = _input(q, 2)
    if zero_point is not None and zero_point.dtype is not None:
        return zero_point.dtype
    attribute = q.attributes.get("output_dtype")
    return ir.DataType(attribute.value) if attribute is not None and attribute.value else ir.DataType.UINT8


def _dq_dtype(dq: ir.Node) -> ir.DataType | None:
    return dq.inputs[0].dtype if dq.inputs and dq.inputs[0] is not None else None


def _scalar_scale_zero_point(node: ir.Node) -> tuple[float, int, ir.DataType | None] | None:
    """A Q/DQ node's scalar constant float scale and zero point (0 when absent), or None."""
    scale = _constant(_input(node, 1))
    if scale is None or scale.ndim != 0 or scale.dtype != np.float32:
        return None
    zp_value = _input(node, 2)
    if zp_value is None:
        return float(scale), 0, _q_dtype(node) if node.op_type == _Q else _dq_dtype(node)
    zero_point = _constant(zp_value)
    if zero_point is None or zero_point.ndim != 0:
        return None
    return float(scale), int(zero_point), zp_value.dtype


def is_clip_made_redundant(clip: ir.Node, q: ir.Node) -> bool:
    """ORT's ``IsClipMadeRedundantByQ``: quantizing with *q* already clamps what the Relu/Clip would."""
    params = _scalar_scale_zero_point(q)
    if params is None:
        return False
    scale, zero_point, dtype = params
    if dtype not in _TYPE_MIN_MAX:
        return False
    low, high = _TYPE_MIN_MAX[dtype]
    if clip.op_type == "Relu":
        return zero_point == low
    if clip.op_type != "Clip":
        return False
    bounds = _clip_bounds(clip)
    if bounds is None:
        return False
    q_min = int(np.rint(np.float32(bounds[0]) / np.float32(scale))) + zero_point
    q_max = int(np.rint(np.float32(bounds[1]) / np.float32(scale))) + zero_point
    return q_min <= low and q_max >= high


def _clip_bounds(clip: ir.Node) -> tuple[float, float] | None:
    """A Clip's constant min and max (attributes before opset 11, inputs after); None if not constant."""
    if len(clip.inputs) <= 1 and ("min" in clip.attributes or "max" in clip.attributes or not clip.inputs):
        low = clip.attributes.get("min")
        high = clip.attributes.get("max")
        return (float(low.value) if low is not None else float(np.finfo(np.float32).min),
                float(high.value) if high is not None else float(np.finfo(np.float32).max))
    bounds = []
    for index, default in ((1, np.finfo(np.float32).min), (2, np.finfo(np.float32).max)):
        value = _input(clip, index)
        if value is None:
            bounds.append(float(default))
            continue
        array = _constant(value)
        if array is None or array.size != 1:
            return None
        bounds.append(float(array.reshape(())))
    return bounds[0], bounds[1]


class _Selection:
    """The candidate group around one target, checked as ORT's selectors check it."""

    def __init__(self, node: ir.Node, graph: ir.Graph, graph_outputs: Collection[ir.Value]) -> None:
        self.node = node
        self.graph = graph
        self.graph_outputs = graph_outputs
        self.dq_nodes: list[ir.Node] = []
        for value in node.inputs:
            producer = value.producer() if value is not None else None
            if producer is not None and producer.op_type == _DQ and producer.domain in _DOMAINS \
                    and producer.graph is graph:
                self.dq_nodes.append(producer)
        self.clip: ir.Node | None = None
        if _edge_count(node) == 1:
            (following,) = [n for v in node.outputs for n in _uses(v)]
            if following.op_type in ("Relu", "Clip") and following.graph is graph and _edge_count(following) == 1 \
                    and not _produces_graph_output(following, graph_outputs):
                self.clip = following
        producing = self.clip or node
        self.q_nodes = [n for v in producing.outputs for n in _uses(v)
                        if n.op_type == _Q and n.domain in _DOMAINS and n.graph is graph]

    def actual_inputs(self) -> int:
        return sum(1 for v in self.node.inputs if v is not None)

    def can_create_group(self, clip: ir.Node | None) -> bool:
        """``NodeGroup::CanCreateNodeGroup``."""
        node = self.node
        for dq in self.dq_nodes:
            uses = _uses(dq.outputs[0])
            if dq.outputs[0] in self.graph_outputs or len(uses) != 1 or uses[0] is not node:
                return False
        if clip is not None:
            if [n for v in node.outputs for n in _uses(v)] != [clip] or len(self.q_nodes) != 1:
                return False
            if [n for v in clip.outputs for n in _uses(v)] != [self.q_nodes[0]]:
                return False
        if self.q_nodes:
            producing = clip or node
            for value in producing.outputs:
                consumers = _uses(value)
                kinds = {n.op_type == _Q for n in consumers}
                if len(kinds) > 1:
                    return False  # an output read by a QuantizeLinear and by another node
                if kinds == {True} and value in self.graph_outputs:
                    return False
        return True

    def check_qdq_nodes(self, num_dq: int = -1, empty_q_allowed: bool = False) -> bool:
        """``NodeGroupSelector::CheckQDQNodes``."""
        if num_dq == -1:
            num_dq = self.actual_inputs()
        if num_dq != len(self.dq_nodes) or not self.can_create_group(self.clip):
            return False
        if not self.q_nodes:
            return empty_q_allowed
        node = self.node
        outputs = sum(1 for v in node.outputs if v is not None and v.name)  # (NumActualValues: outputs named)
        return (outputs == len(self.q_nodes) == _edge_count(node)
                and not _produces_graph_output(node, self.graph_outputs))

    # -- the selectors --------------------------------------------------------------------------------
    def check(self, kind: str) -> bool:
        dq, q = self.dq_nodes, self.q_nodes
        if kind in ("drop_qdq", "drop_dq", "split", "topk") and self.clip is not None:
            return False
        if kind == "drop_qdq":
            if not self.check_qdq_nodes(1):
                return False
            if _dq_dtype(dq[0]) != _q_dtype(q[0]):
                return False
            dq_params, q_params = _scalar_scale_zero_point(dq[0]), _scalar_scale_zero_point(q[0])
            return (dq_params is not None and q_params is not None and q_params[0] > 0
                    and dq_params[:2] == q_params[:2])
        if kind == "drop_dq":
            return len(dq) == 1 and self.can_create_group(None)
        if kind in ("unary", "cumsum"):
            return self.check_qdq_nodes(1) and _dq_dtype(dq[0]) == _q_dtype(q[0])
        if kind == "clip":
            return 1 <= len(dq) <= 3 and self.check_qdq_nodes(len(dq)) and _dq_dtype(dq[0]) == _q_dtype(q[0])
        if kind == "binary":
            return (self.check_qdq_nodes() and len(dq) >= 2
                    and _dq_dtype(dq[0]) == _dq_dtype(dq[1]) == _q_dtype(q[0]))
        if kind == "variadic":
            if not self.check_qdq_nodes():
                return False
            return len({_dq_dtype(n) for n in dq}) == 1 and {_q_dtype(n) for n in q} == {_dq_dtype(dq[0])}
        if kind == "split":
            return self.check_qdq_nodes(1) and all(_q_dtype(n) == _dq_dtype(dq[0]) for n in q)
        if kind == "topk":
            return len(dq) == 1 and self.can_create_group(None) and len(q) == 1 and \
                _dq_dtype(dq[0]) == _q_dtype(q[0]) and _scalar_scale_zero_point(dq[0]) is not None and \
                _scalar_scale_zero_point(dq[0])[:2] == (_scalar_scale_zero_point(q[0]) or (None, None))[:2]
        if kind == "conv":
            if not self.check_qdq_nodes() or len(dq) < 2:
                return False
            x, w, y = _dq_dtype(dq[0]), _dq_dtype(dq[1]), _q_dtype(q[0])
            if x != y or (x == ir.DataType.INT8 and w != x):
                return False
            return len(dq) < 3 or _dq_dtype(dq[2]) == ir.DataType.INT32
        if kind == "matmul":
            if len(dq) != 2 or not q:
                return False
            x, w = _dq_dtype(dq[0]), _dq_dtype(dq[1])
            if x == ir.DataType.INT8 and w != x:
                return False
            return self.check_qdq_nodes() and _q_dtype(q[0]) == x
        if kind == "gemm":
            if not self.check_qdq_nodes(empty_q_allowed=True) or len(dq) < 2:
                return False
            a, b = _dq_dtype(dq[0]), _dq_dtype(dq[1])
            if a == ir.DataType.INT8 and b != a:
                return False
            if q and _q_dtype(q[0]) != a:
                return False
            if len(dq) < 3:
                return True
            beta = self.node.attributes.get("beta")
            return (beta is None or beta.value == 1.0) and _dq_dtype(dq[2]) == ir.DataType.INT32
        if kind == "norm":
            if not self.check_qdq_nodes():
                return False
            return _dq_dtype(dq[0]) == _q_dtype(q[0]) and (len(dq) < 3 or _dq_dtype(dq[2]) == ir.DataType.INT32)
        if kind == "batchnorm":
            return (3 <= len(dq) <= 5 and self.check_qdq_nodes(len(dq)) and _dq_dtype(dq[0]) == _q_dtype(q[0])
                    and (_dq_dtype(dq[0]) != ir.DataType.INT8 or _dq_dtype(dq[1]) == ir.DataType.INT8))
        if kind == "where":
            return (self.check_qdq_nodes(2) and len(dq) == 2
                    and _dq_dtype(dq[0]) == _dq_dtype(dq[1]) == _q_dtype(q[0]))
        if kind == "pad":
            return (1 <= len(dq) <= 2 and self.check_qdq_nodes(len(dq))
                    and len({_dq_dtype(n) for n in dq} | {_q_dtype(q[0])}) == 1)
        if kind == "comparison":
            return self.check_qdq_nodes(empty_q_allowed=True) and len(dq) >= 2 and \
                _dq_dtype(dq[0]) == _dq_dtype(dq[1])
        if kind == "all_dq_q_optional":
            return self.check_qdq_nodes(empty_q_allowed=True) and \
                (not q or _dq_dtype(dq[0]) == _q_dtype(q[0]))
        return False


def _unit_for(node: ir.Node, graph: ir.Graph, graph_outputs: Collection[ir.Value]) -> NodeUnit | None:
    kind = SELECTORS.get(node.op_type)
    if kind is None:
        return None
    opsets = _OPSETS.get(node.op_type)
    if opsets is not None and graph.opset_imports.get("", graph.opset_imports.get("ai.onnx")) not in opsets:
        return None
    selection = _Selection(node, graph, graph_outputs)
    if selection.clip is not None and (len(selection.q_nodes) != 1
                                       or not is_clip_made_redundant(selection.clip, selection.q_nodes[0])):
        return None
    if not selection.dq_nodes or not selection.check(kind):
        return None
    return NodeUnit(node, "qdq", tuple(selection.dq_nodes), tuple(selection.q_nodes), selection.clip)


def build_node_units(graph: ir.Graph, qdq_ops: Collection[str], nodes: Iterable[ir.Node] | None = None) -> dict[ir.Node, NodeUnit]:
    """Map every node of *graph* to its unit.  Nodes a QDQ unit absorbs map to that unit.

    *qdq_ops*: the op types grouped (the backend's :meth:`~mobile_ep.contract.Backend.qdq_ops`); *nodes*: the
    graph's nodes in topological order, the order ORT selects groups in.
    """
    nodes = list(graph if nodes is None else nodes)
    units: dict[ir.Node, NodeUnit] = {}
    if qdq_ops:
        outputs = set(graph.outputs)
        for node in nodes:
            if node in units or node.op_type not in qdq_ops or node.domain not in _DOMAINS:
                continue
            unit = _unit_for(node, graph, outputs)
            if unit is None or any(member in units for member in unit.nodes):
                continue
            for member in unit.nodes:
                units[member] = unit
    for node in nodes:
        if node not in units:
            units[node] = NodeUnit(node)
    return units
