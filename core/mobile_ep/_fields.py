"""Getters for the onnx_ir fields the partitioner reads for every node, without a Python call each.

onnx_ir exposes a node's and a value's fields through properties and methods that only return a slot
(``Node.inputs`` is ``return self._inputs``).  Each read is a Python-level call: the partitioner and the cost
model make about fifty per node, half of their time on a 100k-node graph.  ``operator.attrgetter`` on the
slot itself reads it in C.

A getter here reads the slot only if the installed onnx_ir's accessor is exactly that plain return (checked
on its byte code when this module is imported) and the slot is a slot of the class; otherwise it is the
public accessor.  Either way it returns the same object.  They are for ``ir.Node``, ``ir.Value`` and
``ir.Attr`` objects (onnx_ir's own classes, which nothing here subclasses).
"""

from __future__ import annotations

import builtins
import dis
import operator
import types
from collections.abc import Callable

import onnx_ir as ir

__all__ = ["node_inputs", "node_outputs", "node_op_type", "node_domain", "node_attributes", "node_attribute_data",
           "value_shape", "value_type", "value_producer", "value_const_value", "value_is_initializer",
           "value_is_graph_input", "attr_value", "attr_type", "shape_dims_items", "value_uses_items", "dtype_getters"]

_SKIP = frozenset({"RESUME", "NOP", "CACHE", "COPY_FREE_VARS", "MAKE_CELL"})


def _steps(cls: type, name: str, ignored: frozenset[str] = _SKIP) -> tuple[types.FunctionType, list] | None:
    """The function behind ``cls.<name>`` (a property, or a method without arguments) and its byte code as
    (opname, argval) pairs without the *ignored* instructions; None if it is neither or cannot be read."""
    accessor = getattr(cls, name, None)
    function = accessor.fget if isinstance(accessor, property) else accessor
    if not isinstance(function, types.FunctionType) or function.__code__.co_argcount != 1:
        return None
    try:
        return function, [(i.opname, i.argval) for i in dis.get_instructions(function) if i.opname not in ignored]
    except Exception:  # pragma: no cover - a byte code this Python's dis cannot read
        return None


def _member(cls: type, slot: object) -> str | None:
    """*slot* if it names a slot of ``cls`` (a member descriptor in its MRO), else None."""
    if not isinstance(slot, str):
        return None
    owner = next((k for k in cls.__mro__ if slot in vars(k)), None)
    if owner is None or not isinstance(vars(owner)[slot], types.MemberDescriptorType):
        return None
    return slot


def _plain_slot(cls: type, name: str) -> str | None:
    """The slot that ``cls.<name>`` (a property, or a method without arguments) only returns, else None."""
    found = _steps(cls, name)
    if found is None or len(found[1]) != 3:
        return None
    function, ((load_self, self_name), (load_attr, slot), (ret, _)) = found
    plain = (load_self.startswith("LOAD_FAST") and self_name == function.__code__.co_varnames[0]
             and load_attr == "LOAD_ATTR" and ret == "RETURN_VALUE")
    return _member(cls, slot) if plain else None


def _getter(cls: type, name: str, *, method: bool = False) -> Callable:
    slot = _plain_slot(cls, name)
    if slot is not None:
        return operator.attrgetter(slot)
    return operator.methodcaller(name) if method else operator.attrgetter(name)


node_inputs = _getter(ir.Node, "inputs")
node_outputs = _getter(ir.Node, "outputs")
node_op_type = _getter(ir.Node, "op_type")
node_domain = _getter(ir.Node, "domain")
node_attributes = _getter(ir.Node, "attributes")
value_shape = _getter(ir.Value, "shape")
value_type = _getter(ir.Value, "type")
value_producer = _getter(ir.Value, "producer", method=True)
value_const_value = _getter(ir.Value, "const_value")
value_is_initializer = _getter(ir.Value, "is_initializer", method=True)
value_is_graph_input = _getter(ir.Value, "is_graph_input", method=True)
attr_value = _getter(ir.Attr, "value")
attr_type = _getter(ir.Attr, "type")


def _attribute_data_getter() -> Callable:
    """A node's attributes as the plain dict onnx_ir's ``Attributes`` (a ``UserDict``) keeps them in."""
    slot = _plain_slot(ir.Node, "attributes")
    return operator.attrgetter(f"{slot or 'attributes'}.data")


node_attribute_data = _attribute_data_getter()


def _tuple_of_slot(cls: type, name: str) -> str | None:
    """The slot that ``cls.<name>`` (a property, or a method without arguments) returns as ``tuple(self.<slot>)``
    (the builtin tuple), else None."""
    found = _steps(cls, name, _SKIP | {"PRECALL", "PUSH_NULL"})
    if found is None or len(found[1]) != 5:
        return None
    function, ((load_tuple, tuple_name), (load_self, self_name), (load_attr, slot), (call, _), (ret, _)) = found
    plain = (load_tuple == "LOAD_GLOBAL" and tuple_name == "tuple"
             and function.__globals__.get("tuple", builtins.tuple) is builtins.tuple
             and load_self.startswith("LOAD_FAST") and self_name == function.__code__.co_varnames[0]
             and load_attr == "LOAD_ATTR" and call in ("CALL", "CALL_FUNCTION") and ret == "RETURN_VALUE")
    return _member(cls, slot) if plain else None


_dims_slot = _tuple_of_slot(ir.Shape, "dims")
#: A shape's dims: the sequence ``Shape.dims`` makes a tuple of (read from its slot), or ``Shape.dims`` itself.
#: Callers that keep the result must ``tuple()`` it (the compiled loops in mobile_ep._speedups do).
shape_dims_items = operator.attrgetter(_dims_slot) if _dims_slot else operator.attrgetter("dims")
_uses_slot = _tuple_of_slot(ir.Value, "uses")
#: A value's uses: the collection ``Value.uses()`` makes a tuple of (read from its slot), or ``Value.uses()``.
value_uses_items = operator.attrgetter(_uses_slot) if _uses_slot else operator.methodcaller("uses")
#: Getters of ``dtype`` by the exact class of a value's type, where the class's ``dtype`` only returns a slot.
dtype_getters: dict[type, Callable] = {cls: operator.attrgetter(slot) for cls in (ir.TensorType, ir.SparseTensorType)
                                       if (slot := _plain_slot(cls, "dtype")) is not None}
