"""Small ONNX models built in code for the NNAPI rule tests, and shortcuts to ask the backend about them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from mobile_ep.testing import node_support
from mobile_ep_nnapi import NnapiBackend, NnapiOptions

F = TensorProto.FLOAT
F16 = TensorProto.FLOAT16
U8 = TensorProto.UINT8
I8 = TensorProto.INT8
I32 = TensorProto.INT32
I64 = TensorProto.INT64
BOOL = TensorProto.BOOL

IR_VERSION = 10  # onnxruntime 1.31 refuses the IR 14 that onnx 1.23 writes by default

Shape = Sequence[int | str | None] | None


def model(
    nodes,
    inputs: Mapping[str, Shape | tuple[Shape, int]],
    outputs: Sequence[str] | Mapping[str, int] = ("y",),
    inits: Mapping[str, object] | None = None,
    opset: int = 13,
    ms_opset: bool = False,
):
    """A model of *nodes*; graph inputs as ``name: shape`` or ``name: (shape, elem_type)`` (float32 by default)."""
    if not isinstance(nodes, (list, tuple)):
        nodes = [nodes]
    graph_inputs = []
    for name, spec in inputs.items():
        if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], int) and not isinstance(spec[0], int):
            shape, dtype = spec
        else:
            shape, dtype = spec, F
        graph_inputs.append(helper.make_tensor_value_info(name, dtype, shape))
    out_types = outputs if isinstance(outputs, Mapping) else dict.fromkeys(outputs, F)
    graph_outputs = [helper.make_tensor_value_info(name, dtype, None) for name, dtype in out_types.items()]
    initializers = [numpy_helper.from_array(np.asarray(v), name) for name, v in (inits or {}).items()]
    graph = helper.make_graph(list(nodes), "g", graph_inputs, graph_outputs, initializer=initializers)
    opsets = [helper.make_opsetid("", opset)]
    if ms_opset:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    return helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION)


def node(op_type, inputs, outputs=("y",), name=None, domain=None, **attrs):
    return helper.make_node(op_type, list(inputs), list(outputs), name=name or f"{op_type.lower()}_0",
                            domain=domain, **attrs)


def backend(**options) -> NnapiBackend:
    return NnapiBackend(NnapiOptions(**options)) if options else NnapiBackend()


def at_api(level: int, **options) -> NnapiBackend:
    """The backend configured as the CLI does it, from strings."""
    values = {"api_level": str(level), **{k: str(v) for k, v in options.items()}}
    return NnapiBackend().configure(values)  # type: ignore[return-value]


def support(m, node_ref: int | str = 0, be: NnapiBackend | None = None, **options):
    """The NNAPI answer for one node of *m* (by position or name)."""
    return node_support(m, be or backend(**options), node_ref)


def scalar(value, dtype):
    return np.array(value, dtype=dtype)


# --------------------------------------------------------------------------------------------------
# QDQ models
# --------------------------------------------------------------------------------------------------
def qdq_inits(prefix: str, scale=0.02, zero_point=128, zp_dtype=np.uint8) -> dict[str, np.ndarray]:
    return {f"{prefix}_scale": np.array(scale, dtype=np.float32),
            f"{prefix}_zp": np.array(zero_point, dtype=zp_dtype)}


def qdq_conv(act=np.uint8, weight=np.int8, w_scale=None, w_zp=None, out_scale=0.05, bias=True, group=1):
    """x(q) -> DQ -> Conv(DQ(w), DQ(b)) -> Q -> y: a whole QDQ Conv unit."""
    act_type = U8 if act == np.uint8 else I8
    w_scale = np.array(0.01, dtype=np.float32) if w_scale is None else np.asarray(w_scale, dtype=np.float32)
    w_zp = np.array(0, dtype=weight) if w_zp is None else np.asarray(w_zp, dtype=weight)
    inits = {
        **qdq_inits("x", zero_point=128 if act == np.uint8 else 0, zp_dtype=act),
        "w_q": np.ones((4, 3 // group, 3, 3), dtype=weight),
        "w_scale": w_scale,
        "w_zp": w_zp,
        **qdq_inits("y", scale=out_scale, zero_point=128 if act == np.uint8 else 0, zp_dtype=act),
    }
    nodes = [
        node("DequantizeLinear", ["x", "x_scale", "x_zp"], ["x_dq"], name="dq_x"),
        node("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["w_dq"], name="dq_w",
             **({"axis": 0} if w_scale.ndim else {})),
    ]
    conv_inputs = ["x_dq", "w_dq"]
    if bias:
        b_scale = np.float32(0.02) * w_scale  # input scale × weight scale, per channel too
        inits.update({"b_q": np.zeros(4, dtype=np.int32), "b_scale": b_scale.astype(np.float32),
                      "b_zp": np.zeros(b_scale.shape, dtype=np.int32)})
        nodes.append(node("DequantizeLinear", ["b_q", "b_scale", "b_zp"], ["b_dq"], name="dq_b",
                          **({"axis": 0} if b_scale.ndim else {})))
        conv_inputs.append("b_dq")
    nodes += [
        node("Conv", conv_inputs, ["conv_out"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=group),
        node("QuantizeLinear", ["conv_out", "y_scale", "y_zp"], ["y"], name="q_y"),
    ]
    return model(nodes, {"x": ([1, 3, 8, 8], act_type)}, {"y": act_type}, inits)


def qdq_unary(op_type, shape=(1, 3, 8, 8), in_scale=0.02, in_zp=128, out_scale=0.02, out_zp=128, opset=13,
              extra_inputs=(), extra_inits=None, **attrs):
    """x(u8) -> DQ -> op -> Q -> y."""
    inits = {"x_scale": np.array(in_scale, np.float32), "x_zp": np.array(in_zp, np.uint8),
             "y_scale": np.array(out_scale, np.float32), "y_zp": np.array(out_zp, np.uint8), **(extra_inits or {})}
    nodes = [
        node("DequantizeLinear", ["x", "x_scale", "x_zp"], ["x_dq"], name="dq_x"),
        node(op_type, ["x_dq", *extra_inputs], ["op_out"], name="target", **attrs),
        node("QuantizeLinear", ["op_out", "y_scale", "y_zp"], ["y"], name="q_y"),
    ]
    return model(nodes, {"x": (list(shape), U8)}, {"y": U8}, inits, opset=opset)


def qdq_binary(op_type, a_type=U8, b_type=U8, a_shape=(1, 4), b_shape=(1, 4), b_const=False, b_scale=0.02, b_zp=0,
               out_scale=0.04, **attrs):
    """a(q), b(q) -> DQ, DQ -> op -> Q -> y."""
    a_np = np.uint8 if a_type == U8 else np.int8
    b_np = np.uint8 if b_type == U8 else np.int8
    inits = {"a_scale": np.array(0.02, np.float32), "a_zp": np.array(0, a_np),
             "b_scale": np.asarray(b_scale, np.float32), "b_zp": np.asarray(b_zp, b_np),
             "y_scale": np.array(out_scale, np.float32), "y_zp": np.array(0, np.uint8)}
    inputs = {"a": (list(a_shape), a_type)}
    if b_const:
        inits["b"] = np.ones(b_shape, dtype=b_np)
    else:
        inputs["b"] = (list(b_shape), b_type)
    dq_b_attrs = {"axis": 1} if np.ndim(b_scale) else {}
    nodes = [
        node("DequantizeLinear", ["a", "a_scale", "a_zp"], ["a_dq"], name="dq_a"),
        node("DequantizeLinear", ["b", "b_scale", "b_zp"], ["b_dq"], name="dq_b", **dq_b_attrs),
        node(op_type, ["a_dq", "b_dq"], ["op_out"], name="target", **attrs),
        node("QuantizeLinear", ["op_out", "y_scale", "y_zp"], ["y"], name="q_y"),
    ]
    return model(nodes, inputs, {"y": U8}, inits)
