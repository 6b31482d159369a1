"""mobile_ep._fields: slot reads stand in for onnx_ir's accessors only where those are plain returns."""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from mobile_ep import _fields
from mobile_ep import ir as mir

LIGHT = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


class _Plain:
    __slots__ = ("_x", "_y")

    def __init__(self) -> None:
        self._x, self._y = [1], None

    @property
    def x(self):
        """A docstring is not an instruction."""
        return self._x

    def y(self):
        return self._y

    @property
    def copied(self):
        return tuple(self._x)  # not a plain return: a new object each time

    @property
    def other(self):
        return self.x  # a property, not a slot

    def with_argument(self, default=None):
        return self._x

    def items(self):
        return tuple(self._x)  # a copy of a slot: what _tuple_of_slot accepts

    @property
    def listed(self):
        return list(self._x)  # not the builtin tuple

    @property
    def shadowed(self):
        return tuple(self.x)  # a copy of a property, not of a slot


class _Dict:
    def __init__(self) -> None:
        self._x = 1

    @property
    def x(self):
        return self._x  # an instance attribute, not a slot: left to the property


def test_plain_slot_accepts_only_plain_returns_of_slots():
    assert _fields._plain_slot(_Plain, "x") == "_x"
    assert _fields._plain_slot(_Plain, "y") == "_y"
    assert _fields._plain_slot(_Plain, "copied") is None
    assert _fields._plain_slot(_Plain, "other") is None
    assert _fields._plain_slot(_Plain, "with_argument") is None
    assert _fields._plain_slot(_Plain, "missing") is None
    assert _fields._plain_slot(_Dict, "x") is None


def test_tuple_of_slot_accepts_only_tuple_copies_of_slots():
    assert _fields._tuple_of_slot(_Plain, "copied") == "_x"
    assert _fields._tuple_of_slot(_Plain, "items") == "_x"
    assert _fields._tuple_of_slot(_Plain, "listed") is None
    assert _fields._tuple_of_slot(_Plain, "shadowed") is None
    assert _fields._tuple_of_slot(_Plain, "x") is None
    assert _fields._tuple_of_slot(_Plain, "with_argument") is None
    assert _fields._tuple_of_slot(_Dict, "x") is None


def test_getters_fall_back_to_the_public_accessor():
    obj = _Plain()
    x, copied, y = _fields._getter(_Plain, "x"), _fields._getter(_Plain, "copied"), _fields._getter(
        _Plain, "y", method=True)
    assert x(obj) is obj._x
    assert copied(obj) == (1,)
    assert y(obj) is None
    # which way each reads: the slot itself, or the accessor
    assert (repr(x), repr(copied), repr(y)) == (
        "operator.attrgetter('_x')", "operator.attrgetter('copied')", "operator.attrgetter('_y')")


def _models() -> list[ir.Model]:
    models = [mir.load(LIGHT / "light_squeezenet.onnx"), mir.load(LIGHT / "light_inception_v1.onnx")]
    x = ir.Value(name="x", shape=ir.Shape([1, "n"]), type=ir.TensorType(ir.DataType.FLOAT))
    w = ir.Value(name="w", const_value=ir.tensor(np.ones((1, 1), np.float32), name="w"))
    w.shape, w.dtype = ir.Shape([1, 1]), ir.DataType.FLOAT
    c = ir.Node("", "Constant", [], [ir.Attr("value_float", ir.AttributeType.FLOAT, 2.0)], num_outputs=1)
    add = ir.Node("", "Add", [x, w], num_outputs=1)
    mul = ir.Node("", "Mul", [add.outputs[0], c.outputs[0]], num_outputs=1)
    graph = ir.Graph([x, w], [mul.outputs[0]], nodes=[c, add, mul], initializers=[w],
                     opset_imports={"": 18})
    models.append(ir.Model(graph, ir_version=10))
    return models


@pytest.mark.parametrize("model", _models(), ids=["squeezenet", "inception_v1", "initializer_input"])
def test_getters_read_what_the_accessors_return(model):
    graph = model.graph
    values = list(graph.inputs) + list(graph.initializers.values())
    for node in graph:
        assert _fields.node_inputs(node) is node.inputs
        assert _fields.node_outputs(node) is node.outputs
        assert _fields.node_op_type(node) is node.op_type
        assert _fields.node_domain(node) is node.domain
        assert _fields.node_attributes(node) is node.attributes
        assert _fields.node_attribute_data(node) is node.attributes.data
        for attribute in node.attributes.values():
            assert _fields.attr_value(attribute) is attribute.value
            assert _fields.attr_type(attribute) is attribute.type
        values.extend(v for v in node.inputs if v is not None)
        values.extend(node.outputs)
    for value in values:
        assert _fields.value_shape(value) is value.shape
        assert _fields.value_type(value) is value.type
        assert _fields.value_producer(value) is value.producer()
        assert _fields.value_const_value(value) is value.const_value
        assert _fields.value_is_initializer(value) is value.is_initializer()
        assert _fields.value_is_graph_input(value) is value.is_graph_input()
        assert tuple(_fields.value_uses_items(value)) == value.uses()
        if value.shape is not None:
            assert tuple(_fields.shape_dims_items(value.shape)) == value.shape.dims
        if value.type is not None:
            getter = _fields.dtype_getters.get(type(value.type))
            assert getter is None or getter(value.type) is value.type.dtype
    assert _fields.dtype_getters  # (onnx_ir's TensorType.dtype is a plain return)
    sequence = ir.SequenceType(ir.TensorType(ir.DataType.FLOAT))
    assert type(sequence) not in _fields.dtype_getters  # (its dtype is its element type's)
