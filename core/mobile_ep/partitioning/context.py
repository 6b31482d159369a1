"""The partitioner's rule context: one per backend and proposal.

:func:`~mobile_ep.partitioning.propose.propose` (and the legalize pass, which asks the same questions of a
model it is not changing at that moment) ask every node's rule through a :class:`ProposalContext`.  It
answers like a :class:`~mobile_ep.contract.RuleContext`, and in addition tells whether the rule it served
read anything beyond a node's :meth:`~ProposalContext.signature` (another node, a constant's values, a
value's consumers), so that the answers of rules with :attr:`~mobile_ep.contract.OpRule.signature_memo`
can be shared by every node of one signature (:meth:`~ProposalContext.ask`).
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx_ir as ir

from mobile_ep.contract import SUPPORTED, NodeUnit, RuleContext, Support

__all__ = ["ProposalContext"]

_UNKNOWN = object()

#: Attribute types a node signature holds (:meth:`ProposalContext.signature`).
_PLAIN_ATTRIBUTES = frozenset({ir.AttributeType.INT, ir.AttributeType.FLOAT, ir.AttributeType.STRING,
                               ir.AttributeType.INTS, ir.AttributeType.FLOATS, ir.AttributeType.STRINGS})


class ProposalContext(RuleContext):
    """The :class:`RuleContext` of one proposal.  It tells whether the rule it serves read anything a node's
    :meth:`signature` does not hold (another node, a constant's values, a value's consumers):
    ``beyond_signature`` is set when it did.
    """

    beyond_signature = False
    #: While the partitioner builds a group: the outputs of the target nodes it has taken into the group so far
    #: (emptied when the group closes), for rules whose answer depends on the group being built, as ORT's
    #: NNAPI EP's does for uint8 data outside QDQ form.  ``None`` outside the wave algorithm.
    group_values: set[ir.Value] | None = None

    @property
    def answers(self) -> dict[int, Support]:
        """The answers worked out so far, by ``id`` of each unit's target node (the memo of
        :meth:`~mobile_ep.contract.RuleContext.claims_unit`, holding ``CYCLIC`` while one is being worked out): the
        partitioner seeds it with answers it already has and keeps it as the proposal's answers."""
        return self._memo

    # -- what a signature does not hold --------------------------------------------------------------
    def reads_graph(self) -> None:
        self.beyond_signature = True

    def constant(self, value: ir.Value | None) -> np.ndarray | None:
        self.beyond_signature = True
        return super().constant(value)

    def producer(self, value: ir.Value | None) -> ir.Node | None:
        self.beyond_signature = True
        return super().producer(value)

    def consumers(self, value: ir.Value) -> list[ir.Node]:
        self.beyond_signature = True
        return super().consumers(value)

    def is_graph_output(self, value: ir.Value) -> bool:
        self.beyond_signature = True
        return super().is_graph_output(value)

    def unit_of(self, node: ir.Node) -> NodeUnit:
        self.beyond_signature = True
        return super().unit_of(node)

    def claims_unit(self, unit: NodeUnit) -> Support:
        self.beyond_signature = True
        return super().claims_unit(unit)

    # -- signatures ----------------------------------------------------------------------------------
    def memo_signature(self, node: ir.Node, known: dict[ir.Node, tuple | None] | None = None) -> tuple | None:
        """*node*'s :meth:`signature` when the backend's rule for it answers by signature
        (:attr:`OpRule.signature_memo`), else None.  *known*: the signatures already worked out for nodes of
        this graph, unchanged since (kept there; a signature is the graph's, whichever backend asks)."""
        rule = self.backend.rules.lookup(node.domain, node.op_type, self.node_opset(node))
        if rule is None or not rule.signature_memo:
            return None
        if known is None or self.pending_constants:
            return self.signature(node)
        signature = known.get(node, _UNKNOWN)
        if signature is _UNKNOWN:
            signature = known[node] = self.signature(node)
        return signature

    def ask(self, unit: NodeUnit, signature: tuple | None, signatures: dict[tuple, Support] | None) -> Support:
        """``backend.supports(unit, self)``, or the answer *signatures* already holds for *signature* (None: always
        asked).  A new answer is kept there when the rule read nothing beyond the signature and, for a "no",
        when its reason names nothing of the node (:func:`_names_nothing_of`)."""
        if signature is None or signatures is None:
            return self.backend.supports(unit, self)
        answer = signatures.get(signature)
        if answer is not None:
            return answer
        self.beyond_signature = False
        answer = self.backend.supports(unit, self)
        if not self.beyond_signature and (answer is SUPPORTED or _names_nothing_of(unit.target, answer)):
            signatures[signature] = answer
        return answer

    def signature(self, node: ir.Node) -> tuple | None:
        """What a rule with ``signature_memo`` may read of *node* through this context, as a key: op, domain,
        attributes, and for each input and output its element type, dims (symbolic ones by name), whether it
        is a constant initializer, any initializer, or the output of a ``Constant`` node.  ``None`` when an
        attribute is not a plain value (a tensor, a graph, a reference): such nodes are always asked.
        """
        attributes = []
        for name, attribute in node.attributes.items():
            value = attribute.value  # (None for a reference to a function's attribute)
            if value is None or attribute.type not in _PLAIN_ATTRIBUTES:
                return None
            attributes.append((name, tuple(value) if isinstance(value, list) else value))
        return (node.op_type, node.domain, tuple(attributes), tuple(self._fact(value) for value in node.inputs),
                tuple(self._fact(value) for value in node.outputs))

    def _fact(self, value: ir.Value | None) -> tuple | None:
        """A value's part of a node signature (``None`` for an omitted input).  Its dims are the value's own:
        ints and symbolic dims, which compare and hash by name."""
        if value is None:
            return None
        dims = value.shape.dims if value.shape is not None else self.shape(value)
        producer = value.producer()
        from_constant_node = (producer is not None and producer.op_type == "Constant"
                              and producer.domain in ("", "ai.onnx"))
        return (self.dtype(value), dims, self.is_constant(value),
                value.is_initializer() and value.const_value is not None, from_constant_node)


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
