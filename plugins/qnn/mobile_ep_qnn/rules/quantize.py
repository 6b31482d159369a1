"""QuantizeLinear and DequantizeLinear on their own, outside a QDQ unit (``simple_op_builder.cc``).

With ``offload_graph_io_quantization`` (the EP's default) a QuantizeLinear of a graph input and a
DequantizeLinear producing a graph output stay on the CPU; and ORT's QNN EP drops any partition made of a
single QuantizeLinear or DequantizeLinear (the backend's ``accept_partition``).
"""

from __future__ import annotations

from ._base import FLOATS, QUANTIZED, SUPPORTED, DataType, QnnRule, Support, type_name


class QuantizeLinear(QnnRule):
    op_types = ("QuantizeLinear",)
    constant_inputs = {1: "scale", 2: "zero point"}

    def check(self, unit, ctx):
        """To 8- or 16-bit integers with constant scale and zero point, per tensor (per axis only inside a QDQ
        unit); not of a graph input (offloaded to the CPU)."""
        node = unit.target
        dtype = ctx.dtype(node.outputs[0])
        if dtype not in QUANTIZED:
            return Support.no(f"quantizes to {type_name(dtype)}: QNN quantizes to 8 or 16 bits")
        if ctx.options.offload_graph_io_quantization and node.inputs[0].is_graph_input():
            ctx.reads_graph()
            return Support.no("it quantizes a graph input: offload_graph_io_quantization leaves it to the CPU")
        if per_axis(node, ctx):
            return Support.no("a QuantizeLinear per axis outside a QDQ unit: the QNN EP takes a standalone "
                              "QuantizeLinear per tensor only")
        return SUPPORTED


class DequantizeLinear(QnnRule):
    op_types = ("DequantizeLinear",)
    input_types = {0: QUANTIZED | {DataType.INT32}}
    constant_inputs = {1: "scale", 2: "zero point"}

    def check(self, unit, ctx):
        """From 8-, 16- or 32-bit integers with constant scale and zero point; per tensor (a DequantizeLinear per
        axis only inside a QDQ unit); not to a graph output (offloaded), unless it reads, through ops the transpose
        optimizer moves a Transpose through, what an op the EP takes in NHWC layout makes."""
        node = unit.target
        if ctx.dtype(node.outputs[0]) not in FLOATS:
            return Support.no("dequantizes to a type other than float32/float16")
        if per_axis(node, ctx):
            return Support.no("a DequantizeLinear per axis outside a QDQ unit: the QNN EP takes a standalone "
                              "DequantizeLinear per tensor only")
        if ctx.options.offload_graph_io_quantization and ctx.is_graph_output(node.outputs[0]) and \
                not after_a_layout_op(node, ctx):
            return Support.no("it dequantizes a graph output: offload_graph_io_quantization leaves it to the CPU")
        return SUPPORTED


#: Ops onnxruntime's NHWC layout transform wraps in Transposes for the QNN EP.
LAYOUT_OPS = frozenset({"Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool",
                        "GlobalMaxPool", "Resize", "DepthToSpace", "SpaceToDepth", "InstanceNormalization",
                        "BatchNormalization", "GridSample", "LRN"})


#: Ops onnxruntime's transpose optimizer moves a Transpose through (its handlers for ops of one input, Clip,
#: CastLike, Q/DQ and the broadcasting ones): the Transpose back to NCHW after a layout op goes down a chain of them.
TRANSPOSABLE = frozenset({
    "Cast", "Exp", "Identity", "LeakyRelu", "Log", "Reciprocal", "Relu", "Sigmoid", "Sqrt", "Tanh", "Abs", "Not", "Ceil",
    "Floor", "Neg", "Erf", "HardSigmoid", "Round", "IsInf", "IsNaN", "Selu", "Shrink", "Sign", "Softplus", "Softsign",
    "ThresholdedRelu", "Celu", "HardSwish", "Sin", "Cos", "Tan", "Sinh", "Cosh", "Asin", "Acos", "Atan", "Asinh",
    "Acosh", "Atanh", "QuantizeLinear", "DequantizeLinear", "Clip", "CastLike"})
BROADCASTING = frozenset({
    "Add", "Max", "Min", "Mul", "Sub", "Div", "And", "Or", "Xor", "Mod", "PRelu", "BitShift", "Equal", "Greater",
    "Less", "GreaterOrEqual", "LessOrEqual", "Mean", "Sum", "Pow", "Where"})


def after_a_layout_op(node, ctx) -> bool:
    """Whether *node* reads, through a chain of ops the transpose optimizer moves a Transpose through
    (:data:`TRANSPOSABLE` by their first input, :data:`BROADCASTING` by any; a value of the chain may have other
    readers and be a graph output), what a node the EP takes in NHWC layout makes.  Seen with the real EP: the layout
    transform's Transpose back to NCHW goes down that chain to the graph output, so a node that writes a graph output
    in the model (a DequantizeLinear offloaded, a Cast to float64) writes the Transpose's input in the EP's graph, and
    is taken."""
    return any(_from_a_layout_op(value, ctx, 16) for value in _moved_inputs(node, ctx))


def _from_a_layout_op(value, ctx, depth: int) -> bool:
    made = ctx.producer(value)
    if made is None or made.domain not in ("", "ai.onnx") or depth == 0:
        return False
    if made.op_type in LAYOUT_OPS:
        return bool(ctx.claims(made))
    return any(_from_a_layout_op(v, ctx, depth - 1) for v in _moved_inputs(made, ctx))


def _moved_inputs(node, ctx) -> list:
    """The inputs of *node* a Transpose is moved through it from."""
    if node.op_type in TRANSPOSABLE:
        return node.inputs[:1]
    if node.op_type in BROADCASTING:
        return [v for v in node.inputs if v is not None and not ctx.is_constant(v)]
    return []


def per_axis(node, ctx) -> bool:
    """Whether the QuantizeLinear/DequantizeLinear *node* has a scale of more than one value (per axis or block)."""
    shape = ctx.shape(node.inputs[1]) if len(node.inputs) > 1 else None
    return shape is not None and any(d != 1 for d in shape)


#: The zero point a per-axis weight of each type must have everywhere (the HTP's per-channel quantization is
#: symmetric; onnxruntime-qnn shifts unsigned weights by half their range to signed ones).
SYMMETRIC_ZERO = {DataType.INT8: 0, DataType.INT16: 0, DataType.UINT8: 128, DataType.UINT16: 32768}


def asymmetric_per_axis(node, ctx) -> str | None:
    """Why the per-axis DequantizeLinear *node* of a QDQ unit is refused: a zero point that is not the symmetric
    one of its type (``None``: per tensor, or symmetric)."""
    if not per_axis(node, ctx):
        return None
    dtype = ctx.dtype(node.inputs[0])
    zero = node.inputs[2] if len(node.inputs) > 2 else None
    values = ctx.constant(zero) if zero is not None else None
    wanted = SYMMETRIC_ZERO.get(dtype, 0)
    if zero is None:
        return None if wanted == 0 else f"{type_name(dtype)} per axis without zero points (0, not {wanted})"
    if values is None or (values.astype("int64") != wanted).any():
        return f"{type_name(dtype)} per axis with zero points other than {wanted}"
    return None
