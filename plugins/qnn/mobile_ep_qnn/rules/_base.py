"""The base of every QNN rule: the checks the QNN EP's ``BaseOpBuilder`` and model wrapper make for every op.

``QnnRule.check_common`` runs, in this order:

1. the opset range, and the model's ai.onnx opset: the EP takes nothing of a model importing opset 6 or older;
2. tensors of static shapes: every input and output the unit has is a tensor (not a sequence or optional)
   with a fully known shape (the EP reads each tensor's shape into a QNN tensor; a symbolic or unknown
   dimension fails); the first input and the outputs have no dimension of size 0; no tensor has a rank above
   :attr:`QnnRule.max_rank` (the HTP's op validation refuses every op on a rank-6 tensor, and some ops, such
   as Neg, Sqrt or Tanh, on a rank-5 one: error 3110 from ``backendValidateOpConfig``, found with the oracle)
   unless the EP builds the node at a lower rank (:meth:`QnnRule.builds_at_lower_rank`);
3. the element types of the inputs (:attr:`QnnRule.input_types`, by position; float32 and float16 by
   default). Where float32 is taken, so is float64 inside the graph (the EP computes it as float32), but not a
   float64 graph input or output: the EP has no float64 at its graphs' inputs and outputs, and takes such a
   node, then fails the session ("Failed to compose Qnn graph", "Unsupported FP64 data type in graph IO").
   In a QDQ unit the quantized tensors of its DequantizeLinear/QuantizeLinear nodes must be 8- or
   16-bit integers (int32 for a bias);
4. the inputs that must be constant initializers (:attr:`QnnRule.constant_inputs`: axes, pads, sizes... the
   EP reads them when it builds the graph; a DequantizeLinear of a constant counts as one, an empty input,
   shape ``[0]``, as omitted);

then the op's own ``check`` (the builder's ``IsOpSupported``).
"""

from __future__ import annotations

from typing import ClassVar

import onnx_ir as ir

from mobile_ep import SUPPORTED, DataType, NodeUnit, OpRule, RuleContext, Support, attr

__all__ = ["QnnRule", "FLOATS", "INTS", "QUANTIZED", "type_name", "input_type", "attr", "Support", "SUPPORTED",
           "DataType", "NHWC_REFUSED_INTS", "nhwc_plain_integer"]

FLOATS = frozenset({DataType.FLOAT, DataType.FLOAT16})
#: Integer types the EP maps onto QNN integers (64-bit ones are narrowed to 32 bits).
INTS = frozenset({DataType.INT32, DataType.INT64})
#: The QNN EP takes nothing of a model whose ai.onnx opset import is older (seen with the real EP).
MIN_MODEL_OPSET = 7
#: The highest tensor rank of any op on the HTP.
MAX_RANK = 5
#: The quantized types of QDQ tensors the HTP takes.
QUANTIZED = frozenset({DataType.UINT8, DataType.INT8, DataType.UINT16, DataType.INT16})


def type_name(dtype: DataType | None) -> str:
    return "unknown" if dtype is None else dtype.name.lower()


class QnnRule(OpRule):
    """A QNN op rule: common checks first (see the module), then :meth:`check`."""

    signature_memo = True
    #: The EP reads ops of every opset onnxruntime runs (its builders check attributes, not opset numbers).
    max_opset = 10_000
    #: Accepted element types per input position; positions not listed accept any type.
    input_types: ClassVar[dict[int, frozenset[DataType]]] = {0: FLOATS}
    #: Input positions that must be constant initializers, with what they hold (for the reason).
    constant_inputs: ClassVar[dict[int, str]] = {}
    #: Whether the outputs need static shapes too (not for ops whose output size depends on the data).
    static_outputs: ClassVar[bool] = True
    #: The highest rank of the tensors the HTP takes for this op (its op validation refuses more).
    max_rank: ClassVar[int] = MAX_RANK

    def builds_at_lower_rank(self, unit: NodeUnit, ctx: RuleContext) -> bool:
        """Whether the EP builds this node with tensors of lower rank than the graph's (a fusion of its own)."""
        return False

    def check_common(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        answer = super().check_common(unit, ctx)
        if not answer:
            return answer
        model_opset = ctx.opset("")
        if model_opset is not None and model_opset < MIN_MODEL_OPSET:
            return Support.no(f"the model imports ai.onnx opset {model_opset}: the QNN EP takes nothing of a model "
                              f"below opset {MIN_MODEL_OPSET} (convert it to a newer opset)")
        node = unit.target
        for role, values in (("input", node.inputs), ("output", node.outputs)):
            if role == "output" and not self.static_outputs:
                continue
            for index, value in enumerate(values):
                if value is None:
                    continue
                if value.type is not None and not isinstance(value.type, ir.TensorType):
                    return Support.no(f"{role} {index} is not a tensor (a sequence or optional): QNN has tensors only")
                shape = ctx.static_shape(value)
                if shape is None:
                    return Support.no(f"{role} {index} has a dynamic shape: the QNN EP compiles static shapes "
                                      f"only (give the model fixed input shapes)")
                if 0 in shape and (role == "output" or index == 0):
                    return Support.no(f"{role} {index} is empty (a dimension is 0): QNN has no empty tensors")
                if len(shape) > self.max_rank and not self.builds_at_lower_rank(unit, ctx):
                    return Support.no(f"{role} {index} has rank {len(shape)}: the HTP takes {node.op_type} on tensors "
                                      f"of rank {self.max_rank} at most")
        for index, allowed in self.input_types.items():
            if index < len(node.inputs) and node.inputs[index] is not None:
                answer = input_type(node.inputs[index], index, allowed, ctx)
                if not answer:
                    return answer
        for index, value in enumerate(node.outputs):
            if ctx.dtype(value) == DataType.DOUBLE and ctx.is_graph_output(value) and node.op_type not in (
                    "Cast", "CastLike"):  # (a Cast to a float64 graph output builds)
                return Support.no(f"output {index} is a float64 graph output: the QNN EP takes float64 only inside "
                                  "its graphs (computed as float32); here it fails the session")
        if unit.kind == "qdq":
            for dq in unit.dq_nodes:
                dtype = ctx.dtype(dq.inputs[0])
                if dtype not in QUANTIZED and dtype != DataType.INT32:
                    return Support.no(f"a DequantizeLinear of the QDQ unit reads {type_name(dtype)}: QNN "
                                      "quantizes to 8 or 16 bits")
                from .quantize import asymmetric_per_axis

                why = asymmetric_per_axis(dq, ctx)
                if why is not None:
                    if node.op_type in ("Conv", "ConvTranspose"):
                        return Support.no(f"a weight {why}: onnxruntime-qnn 2.7 takes the unit, then refuses it in "
                                          "NHWC layout and fails the session")
                    return Support.no(f"a DequantizeLinear of the unit reads {why}: the HTP quantizes per channel "
                                      "symmetrically (the QNN EP leaves the unit)")
            for q in unit.q_nodes:
                dtype = ctx.dtype(q.outputs[0])
                if dtype not in QUANTIZED:
                    return Support.no(f"a QuantizeLinear of the QDQ unit writes {type_name(dtype)}: QNN "
                                      "quantizes to 8 or 16 bits")
        for index, what in self.constant_inputs.items():
            value = node.inputs[index] if index < len(node.inputs) else None
            if value is not None and not constant_or_dequantized(value, ctx) and ctx.static_shape(value) != (0,):
                return Support.no(f"the {what} (input {index}) is not a constant initializer: the QNN EP "
                                  "needs it when it builds the graph")
        return SUPPORTED

    def supports(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        answer = super().supports(unit, ctx)
        if answer is not SUPPORTED and not answer:
            return answer
        return session_failure(unit, ctx)

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        return SUPPORTED

    def conditions(self, op_type: str) -> list[str]:
        """The op's conditions for ``mobile-ep ops`` (every opset: no opset range to show)."""
        items = [item for item in super().conditions(op_type) if not item.startswith("opset 1–")]
        if self.max_rank < MAX_RANK:
            items.append(f"Tensors of rank {self.max_rank} at most.")
        return items


def session_failure(unit: NodeUnit, ctx: RuleContext) -> Support:
    """Nodes the EP takes and then fails the session on (onnxruntime-qnn 2.7, seen with the real EP): one reading an
    int64 graph input of rank 5 ("Failed to finalize QNN graph", MEM_ALLOC on the HTP) or writing an int64 graph
    output of rank 5 (a segmentation fault; int64 tensors of rank 5 inside the graph are fine).  Refused, the reason saying so: the
    model as written does not load with the QNN EP (worse than running on the CPU)."""
    node = unit.target
    for index, value in enumerate(node.inputs):
        if value is not None and ctx.dtype(value) == DataType.INT64 and ctx.rank(value) == MAX_RANK:
            ctx.reads_graph()
            if value.is_graph_input():
                return Support.no(f"input {index} is an int64 graph input of rank 5: onnxruntime-qnn 2.7 takes the node "
                                  "and then fails the session ('Failed to finalize QNN graph', MEM_ALLOC on the HTP)")
    for index, value in enumerate(node.outputs):
        if ctx.dtype(value) == DataType.INT64 and ctx.rank(value) == MAX_RANK and ctx.is_graph_output(value):
            return Support.no(f"output {index} is an int64 graph output of rank 5: onnxruntime-qnn 2.7 takes the node "
                              "and then crashes creating the session (segmentation fault)")
    return SUPPORTED


#: Plain (not quantized) integer tensors onnxruntime-qnn 2.7 takes for ops it lays out in NHWC (Resize,
#: DepthToSpace, SpaceToDepth) and then refuses in that layout, failing the session.
NHWC_REFUSED_INTS = frozenset({DataType.INT32, DataType.INT8, DataType.UINT8})


def nhwc_plain_integer(unit: NodeUnit, ctx: RuleContext) -> Support:
    """A node the EP lays out in NHWC reading a plain integer tensor (outside a QDQ unit): refused, the reason
    saying the session fails (onnxruntime-qnn 2.7 takes it, then refuses the NHWC node: "was inserted using the
    NHWC format ... but was not selected by that EP")."""
    dtype = ctx.dtype(unit.target.inputs[0])
    if unit.kind != "qdq" and dtype in NHWC_REFUSED_INTS:
        return Support.no(f"input 0 is {type_name(dtype)} (not quantized): onnxruntime-qnn 2.7 takes the node, then "
                          "refuses it in NHWC layout and fails the session")
    return SUPPORTED


def input_type(value: ir.Value, index: int, allowed: frozenset[DataType], ctx: RuleContext,
               phrase: str = "{} here") -> Support:
    """Whether input *index* (*value*) has a type of *allowed* (the reason says QNN takes *phrase*, the names of
    the types in its ``{}``); float64 counts as float32 inside the graph (the EP computes it as float32), not
    as a graph input (the EP fails the session, or leaves the node)."""
    dtype = ctx.dtype(value)
    if dtype == DataType.DOUBLE and DataType.FLOAT in allowed:
        ctx.reads_graph()  # (whether it is a graph input: not in the node's signature)
        if value.is_graph_input():
            return Support.no(f"input {index} is a float64 graph input: the QNN EP takes float64 only inside its "
                              "graphs (computed as float32); here it fails the session")
        return SUPPORTED
    if dtype not in allowed:
        names = ", ".join(sorted(type_name(t) for t in allowed))
        return Support.no(f"input {index} is {type_name(dtype)}: QNN takes {phrase.format(names)}")
    return SUPPORTED


def constant_or_dequantized(value: ir.Value, ctx: RuleContext) -> bool:
    """A constant initializer, or the DequantizeLinear of one (a quantized weight in a QDQ model)."""
    if ctx.is_constant(value):
        return True
    producer = ctx.producer(value)
    return (producer is not None and producer.op_type == "DequantizeLinear" and producer.domain in ("", "ai.onnx")
            and ctx.is_constant(producer.inputs[0]))


def all_types(node: ir.Node, ctx: RuleContext) -> list[DataType | None]:
    return [ctx.dtype(v) if v is not None else None for v in node.inputs]
