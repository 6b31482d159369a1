"""The partitioner's rule context: one per backend and proposal, remembering what it worked out.

:func:`~mobile_ep.partitioning.propose.propose` (and the legalize pass, which asks the same questions of a
model it is not changing at that moment) ask every node's rule through a :class:`ProposalContext`.  It
answers like a :class:`~mobile_ep.contract.RuleContext`, and in addition

- works out each value's shape once, however many rules ask for it;
- tells whether the rule it served read anything beyond a node's :meth:`~ProposalContext.signature`
  (another node, a constant's values, a value's consumers), so that the answers of rules with
  :attr:`~mobile_ep.contract.OpRule.signature_memo` can be shared by every node of one signature
  (:meth:`~ProposalContext.ask`).

A rewrite's context must not be one: it changes the graph while it asks.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from mobile_ep.contract import SUPPORTED, Backend, NodeUnit, RuleContext, Support

__all__ = ["ProposalContext"]

_node_op_type = operator.attrgetter("op_type")
_node_domain = operator.attrgetter("domain")
_node_inputs = operator.attrgetter("inputs")
_node_outputs = operator.attrgetter("outputs")
_attribute_data = operator.attrgetter("attributes.data")
_attr_value = operator.attrgetter("value")
_attr_type = operator.attrgetter("type")
_value_shape = operator.attrgetter("shape")
_value_producer = operator.methodcaller("producer")
_const_value = operator.attrgetter("const_value")
_is_initializer = operator.methodcaller("is_initializer")
#: Attribute types a node signature holds (:meth:`ProposalContext.signature`).
_PLAIN_ATTRIBUTES = frozenset({ir.AttributeType.INT, ir.AttributeType.FLOAT, ir.AttributeType.STRING,
                               ir.AttributeType.INTS, ir.AttributeType.FLOATS, ir.AttributeType.STRINGS})


class ProposalContext(RuleContext):
    """The :class:`RuleContext` of one proposal, which does not change the model while it runs: each value's
    shape is worked out once, however many rules ask for it (a rewrite's context must not do this).

    It also tells whether the rule it serves read anything a node's :meth:`signature` does not hold (another
    node, a constant's values, a value's consumers): ``beyond_signature`` is set when it did.
    """

    def __init__(self, model: ir.Model, backend: Backend, graph: ir.Graph | None = None,
                 nodes: Sequence[ir.Node] | None = None) -> None:
        super().__init__(model, backend, graph)
        self._graph_nodes = nodes  # (the graph's nodes as the proposal already listed them, if it did)
        self._shapes: dict[ir.Value | None, tuple[int | None, ...] | None] = {}
        self._facts: dict[ir.Value | None, tuple | None] = {None: None}  # (an omitted optional input)
        self.beyond_signature = False

    @property
    def answers(self) -> dict[int, Support]:
        """The answers worked out so far, by ``id`` of each unit's target node (the memo of
        :meth:`~mobile_ep.contract.RuleContext.claims_unit`, holding ``CYCLIC`` while one is being worked out): the
        partitioner seeds it with answers it already has and keeps it as the proposal's answers."""
        return self._memo

    def graph_nodes(self) -> Sequence[ir.Node]:
        nodes = self._graph_nodes
        return nodes if nodes is not None else RuleContext.graph_nodes(self)

    def shape(self, value: ir.Value | None) -> tuple[int | None, ...] | None:
        shapes = self._shapes
        if value in shapes:
            return shapes[value]
        result = shapes[value] = RuleContext.shape(self, value)
        return result

    # -- what a signature does not hold --------------------------------------------------------------
    def reads_graph(self) -> None:
        self.beyond_signature = True

    def constant(self, value: ir.Value | None) -> np.ndarray | None:
        self.beyond_signature = True
        return RuleContext.constant(self, value)

    def producer(self, value: ir.Value | None) -> ir.Node | None:
        self.beyond_signature = True
        return RuleContext.producer(self, value)

    def consumers(self, value: ir.Value) -> list[ir.Node]:
        self.beyond_signature = True
        return RuleContext.consumers(self, value)

    def is_graph_output(self, value: ir.Value) -> bool:
        self.beyond_signature = True
        return RuleContext.is_graph_output(self, value)

    def unit_of(self, node: ir.Node) -> NodeUnit:
        self.beyond_signature = True
        return RuleContext.unit_of(self, node)

    def claims_unit(self, unit: NodeUnit) -> Support:
        self.beyond_signature = True
        return RuleContext.claims_unit(self, unit)

    # -- signatures ----------------------------------------------------------------------------------
    def memo_signature(self, node: ir.Node) -> tuple | None:
        """*node*'s :meth:`signature` when the backend's rule for it answers by signature
        (:attr:`OpRule.signature_memo`), else None."""
        rule = self.backend.rules.lookup(_node_domain(node), _node_op_type(node), self.node_opset(node))
        return self.signature(node) if rule is not None and rule.signature_memo else None

    def ask(self, unit: NodeUnit, signature: tuple | None, signatures: dict[tuple, Support]) -> Support:
        """``backend.supports(unit, self)``, or the answer *signatures* already holds for *signature* (None: always
        asked).  A new answer is kept there when the rule read nothing beyond the signature and, for a "no",
        when its reason names nothing of the node (:func:`_names_nothing_of`)."""
        if signature is not None:
            answer = signatures.get(signature)
            if answer is not None:
                return answer
        self.beyond_signature = False
        answer = self.backend.supports(unit, self)
        if signature is not None and not self.beyond_signature and (
                answer is SUPPORTED or _names_nothing_of(unit.target, answer)):
            signatures[signature] = answer
        return answer

    def signature(self, node: ir.Node) -> tuple | None:
        """What a rule with ``signature_memo`` may read of *node* through this context, as a key: op, domain,
        attributes, and for each input and output its element type, dims (symbolic ones by name), whether it
        is a constant initializer, any initializer, or the output of a ``Constant`` node.  ``None`` when an
        attribute is not a plain value (a tensor, a graph, a reference): such nodes are always asked.
        """
        data = _attribute_data(node)  # (the mapping itself, not the slower UserDict view)
        if data:
            items = []
            for name, attribute in data.items():
                value = _attr_value(attribute)  # (None for a reference to a function's attribute)
                if value is None or _attr_type(attribute) not in _PLAIN_ATTRIBUTES:
                    return None
                items.append((name, tuple(value) if type(value) is list else value))
            attributes: tuple = tuple(items)
        else:
            attributes = ()
        fact = self._fact
        return (_node_op_type(node), _node_domain(node), attributes, tuple(map(fact, _node_inputs(node))),
                tuple(map(fact, _node_outputs(node))))

    def signatures(self, nodes: Sequence[ir.Node], mask: Sequence[bool] | None = None) -> list[tuple | None]:
        """``[self.signature(node) for node in nodes]``, None where *mask* is false."""
        signature = self.signature
        if mask is None:
            return list(map(signature, nodes))
        return [signature(node) if wanted else None for node, wanted in zip(nodes, mask, strict=True)]

    def _fact(self, value: ir.Value | None) -> tuple | None:
        """A value's part of a node signature (worked out once per value; ``None`` for an omitted input)."""
        facts = self._facts
        if value in facts:
            return facts[value]
        assert value is not None  # (None is in the facts from the start)
        shape = _value_shape(value)
        if shape is not None:
            dims: tuple | None = shape.dims  # (ints and SymbolicDims, which compare and hash by name)
        else:
            dims = RuleContext.shape(self, value)
        producer = _value_producer(value)
        from_constant_node = (producer is not None and _node_op_type(producer) == "Constant"
                              and _node_domain(producer) in ("", "ai.onnx"))
        result = facts[value] = (self.dtype(value), dims, self.is_constant(value),
                                 _is_initializer(value) and _const_value(value) is not None, from_constant_node)
        return result


def _names_nothing_of(node: ir.Node, answer: Support) -> bool:
    """Whether a "no" *answer* may stand for every node with *node*'s signature: its reason quotes neither
    *node*'s name nor the name of any of its inputs or outputs (a reason that does is *node*'s own)."""
    if answer.ok or type(answer) is not Support or not isinstance(answer.reason, str):
        return False
    reason = answer.reason
    if node.name and node.name in reason:
        return False
    return not any(value is not None and value.name and value.name in reason
                   for value in itertools.chain(node.inputs, node.outputs))
