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
        """To 8- or 16-bit integers with constant scale and zero point; not of a graph input (offloaded to the CPU)."""
        node = unit.target
        dtype = ctx.dtype(node.outputs[0])
        if dtype not in QUANTIZED:
            return Support.no(f"quantizes to {type_name(dtype)}: QNN quantizes to 8 or 16 bits")
        if ctx.options.offload_graph_io_quantization and node.inputs[0].is_graph_input():
            ctx.reads_graph()
            return Support.no("it quantizes a graph input: offload_graph_io_quantization leaves it to the CPU")
        return SUPPORTED


class DequantizeLinear(QnnRule):
    op_types = ("DequantizeLinear",)
    input_types = {0: QUANTIZED | {DataType.INT32}}
    constant_inputs = {1: "scale", 2: "zero point"}

    def check(self, unit, ctx):
        """From 8-, 16- or 32-bit integers with constant scale and zero point; not to a graph output (offloaded)."""
        node = unit.target
        if ctx.dtype(node.outputs[0]) not in FLOATS:
            return Support.no("dequantizes to a type other than float32/float16")
        if ctx.options.offload_graph_io_quantization and ctx.is_graph_output(node.outputs[0]):
            return Support.no("it dequantizes a graph output: offload_graph_io_quantization leaves it to the CPU")
        return SUPPORTED
