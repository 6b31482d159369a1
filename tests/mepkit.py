"""Builders shared by the core tests: models built in code and throwaway backends."""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import mobile_ep

LIGHT_DIR = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT_MODELS = sorted(LIGHT_DIR.glob("light_*.onnx"))
IR_VERSION = 10


def make_model(nodes, inputs, outputs, initializers=(), opset=13, extra_opsets=(), ir_version=IR_VERSION):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset), *[helper.make_opsetid(d, v) for d, v in extra_opsets]]
    return helper.make_model(graph, opset_imports=opsets, ir_version=ir_version)


def tensor(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


class ToyRule(mobile_ep.OpRule):
    """Takes a fixed set of float ops with static shapes (enough to test the core)."""

    op_types = ("Conv", "Relu", "Add", "Mul", "MaxPool", "AveragePool", "Gemm", "Softmax", "Reshape", "Sigmoid",
                "Identity", "Transpose", "Concat")

    def check(self, unit, ctx):
        """input 0 float32 with a static shape"""
        x = unit.inputs[0].value if unit.inputs and unit.inputs[0] else None
        if ctx.static_shape(x) is None:
            return mobile_ep.Support.no("input 0 has a dynamic shape")
        if ctx.dtype(x) not in (mobile_ep.DataType.FLOAT, mobile_ep.DataType.UINT8):
            return mobile_ep.Support.no("input 0 is not float32")
        return mobile_ep.SUPPORTED


class ToyBackend(mobile_ep.Backend):
    name = "toy"
    version = "1.0"
    description = "test backend"

    def build_rules(self):
        return mobile_ep.RuleRegistry([ToyRule()])

    def qdq_ops(self):
        return frozenset({"Conv", "Add"})


class OtherRule(mobile_ep.OpRule):
    op_types = ("Relu", "Sigmoid", "Add")


class OtherBackend(mobile_ep.Backend):
    name = "other"

    def build_rules(self):
        return mobile_ep.RuleRegistry([OtherRule()])


class ToyPlugin:
    """A test plugin (a class, since it is a throwaway)."""

    def __init__(self, *backends):
        self.backends = backends or (ToyBackend(),)

    @mobile_ep.hookimpl
    def mobile_ep_register_backends(self, register):
        for backend in self.backends:
            register(backend)


def has_backend(name: str) -> bool:
    from mobile_ep.contract.plugins import make_plugins

    return name in make_plugins().backends()
