"""Support answers and node units: what a rule is asked about, and how it answers.

A rule answers with a :class:`Support`, falsy with a reason a user can act on when the node cannot run.
It is asked about a :class:`NodeUnit`: one node, or a QDQ group (DequantizeLinear -> op -> QuantizeLinear)
that a backend takes or leaves whole, whose logical inputs and outputs are :class:`UnitIO`.  :func:`attr`
reads a node's attributes as plain Python values, :func:`op_label` names its op.

Plugin authors import these from :mod:`mobile_ep.contract` (or :mod:`mobile_ep`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, Literal

import onnx_ir as ir

__all__ = [
    "node_reads",
    "Support",
    "SUPPORTED",
    "CYCLIC",
    "Layout",
    "UnitIO",
    "NodeUnit",
    "op_label",
    "attr",
]

#: A backend's preferred tensor layout.
Layout = Literal["NCHW", "NHWC"]


# --------------------------------------------------------------------------------------------------
# Support answers
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Support:
    """The answer to "can this backend run that?".  Falsy when not, with a reason a user can act on."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok

    @classmethod
    def yes(cls) -> Support:
        return SUPPORTED

    @classmethod
    def no(cls, reason: str) -> Support:
        if not reason:
            raise ValueError("an unsupported answer needs a reason")
        return cls(False, reason)

    @classmethod
    def check(cls, condition: object, reason: str) -> Support:
        """``Support.yes()`` if *condition* is truthy, else ``Support.no(reason)``."""
        return SUPPORTED if condition else cls(False, reason)


SUPPORTED = Support(True)
#: The answer a context records for a unit while that unit's own answer is being worked out: a rule that asks
#: back about the unit (through its neighbours) gets "no" instead of recursing forever.  Whoever memoizes
#: answers (:meth:`~mobile_ep.contract.rules.RuleContext.claims_unit`, the partitioner, the legalize pass) sets
#: it first and never keeps it as a final answer.
CYCLIC = Support(False, "cyclic support query")
_NUMBERS = frozenset({int, float})


# --------------------------------------------------------------------------------------------------
# Node units: a single node, or a QDQ group (DequantizeLinear -> op -> QuantizeLinear) that a backend
# takes or leaves as a whole.
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class UnitIO:
    """One logical input or output of a node unit.

    For a QDQ unit the value is the *quantized* tensor (the DequantizeLinear input, or the
    QuantizeLinear output) and ``scale`` / ``zero_point`` are the quantization parameters.
    """

    value: ir.Value
    scale: ir.Value | None = None
    zero_point: ir.Value | None = None

    @property
    def quantized(self) -> bool:
        return self.scale is not None


@dataclasses.dataclass(frozen=True, eq=False)
class NodeUnit:
    """What a backend claims as one piece: one node, or a QDQ group around a target node."""

    target: ir.Node
    kind: Literal["single", "qdq"] = "single"
    dq_nodes: tuple[ir.Node, ...] = ()
    q_nodes: tuple[ir.Node, ...] = ()
    #: A Relu or Clip between the target and its QuantizeLinear that the quantization makes redundant
    #: (ORT's ``IsClipMadeRedundantByQ``): part of the unit, with nothing to compute.
    redundant_clip: ir.Node | None = None

    @property
    def nodes(self) -> tuple[ir.Node, ...]:
        if not self.dq_nodes and not self.q_nodes:
            return (self.target,)
        if self.redundant_clip is not None:
            return (*self.dq_nodes, self.target, self.redundant_clip, *self.q_nodes)
        return (*self.dq_nodes, self.target, *self.q_nodes)

    @property
    def op_type(self) -> str:
        return self.target.op_type

    @property
    def domain(self) -> str:
        return self.target.domain

    @property
    def name(self) -> str:
        return self.target.name or ""

    @property
    def inputs(self) -> tuple[UnitIO | None, ...]:
        """The unit's inputs in the target's input order; ``None`` for omitted optional inputs."""
        if not self.dq_nodes:
            return tuple(None if value is None else UnitIO(value) for value in self.target.inputs)
        result: list[UnitIO | None] = []
        dq_outputs = {dq.outputs[0]: dq for dq in self.dq_nodes}
        for value in self.target.inputs:
            if value is None:
                result.append(None)
            elif value in dq_outputs:
                dq = dq_outputs[value]
                result.append(UnitIO(dq.inputs[0], _input(dq, 1), _input(dq, 2)))  # type: ignore[arg-type]
            else:
                result.append(UnitIO(value))
        return tuple(result)

    @property
    def outputs(self) -> tuple[UnitIO, ...]:
        q_by_input = {q.inputs[0]: q for q in self.q_nodes}
        clip = self.redundant_clip
        result = []
        for value in self.target.outputs:
            q = q_by_input.get(clip.outputs[0] if clip is not None else value)
            if q is not None:
                result.append(UnitIO(q.outputs[0], _input(q, 1), _input(q, 2)))
            else:
                result.append(UnitIO(value))
        return tuple(result)

    def __repr__(self) -> str:
        return f"NodeUnit({self.kind}, {op_label(self.target)} {self.name!r})"


def _input(node: ir.Node, index: int) -> ir.Value | None:
    return node.inputs[index] if index < len(node.inputs) else None


def node_reads(node: ir.Node) -> Iterator[ir.Value]:
    """The values *node* reads: its inputs, and those its subgraphs (If/Loop/Scan bodies) read."""
    yield from (v for v in node.inputs if v is not None)
    for attribute in node.attributes.values():
        graphs: list[ir.Graph] = []
        if attribute.type == ir.AttributeType.GRAPH:
            graphs = [attribute.value]
        elif attribute.type == ir.AttributeType.GRAPHS:
            graphs = list(attribute.value)
        for graph in graphs:
            for inner in graph.all_nodes():
                yield from (v for v in inner.inputs if v is not None)


def op_label(node: ir.Node) -> str:
    """``Conv`` for the default domain, ``com.microsoft:FusedConv`` otherwise."""
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"


# --------------------------------------------------------------------------------------------------
# Attributes
# --------------------------------------------------------------------------------------------------
def attr(node: ir.Node, name: str, default: Any = None) -> Any:
    """An attribute's plain Python value: int, float, str, tuple of those, a tensor or a graph."""
    attributes = node.attributes
    data = getattr(attributes, "data", None)  # (onnx_ir's Attributes is a UserDict: its dict is much faster)
    a = (data if type(data) is dict else attributes).get(name)
    if a is None:
        return default
    if a.is_ref():
        return default
    value = a.value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (list, tuple)):
        if _NUMBERS.issuperset(map(type, value)):  # ints or floats (kernel_shape, pads, ...): as they are
            return tuple(value)
        return tuple(v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v for v in value)
    return value
