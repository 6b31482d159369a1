"""If: the QNN EP builds an If whose branches give tensors of static shapes (as a select between them)."""

from __future__ import annotations

from mobile_ep.contract.support import node_reads

from ._base import SUPPORTED, DataType, QnnRule, Support


class If(QnnRule):
    op_types = ("If",)
    input_types = {0: frozenset({DataType.BOOL})}

    def check(self, unit, ctx):
        """A bool condition; tensor outputs of static shapes; no value its branches read from the outer graph
        made by a node the EP leaves on the CPU (the real EP refuses such an If: "If implicit input ... is
        produced outside the QNN partition")."""
        node = unit.target
        explicit = {id(v) for v in node.inputs if v is not None}
        for value in node_reads(node):
            if id(value) in explicit:
                continue
            producer = ctx.producer(value)
            if producer is None or producer.graph is not node.graph:
                continue  # (a graph input, an initializer, or a value made inside the branches)
            if not ctx.claims(producer):
                return Support.no(f"its branches read {value.name!r}, made by a node the QNN EP leaves on the CPU")
        return SUPPORTED
