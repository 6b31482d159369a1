"""Op rules and their registry: what a backend can run, and why not.

A backend owns a :class:`RuleRegistry` of :class:`OpRule` objects, one per op or op family, each
registered under ``(domain, op_type)`` for a range of opsets.  ``OpRule.supports(unit, ctx)`` answers
with a :class:`~mobile_ep.contract.support.Support`, which is falsy and carries a human-readable reason
when the node cannot run.

Rules look at nodes through a :class:`RuleContext`, which knows the model (opsets, IR version), which
values are constant, their shapes and dtypes, and the backend's options.  A rule never needs to touch
ONNX protobufs.

Plugin authors import these from :mod:`mobile_ep.contract` (or :mod:`mobile_ep`).
"""

from __future__ import annotations

import importlib
import inspect
import operator
import pkgutil
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import onnx_ir as ir

from mobile_ep.contract.support import CYCLIC, SUPPORTED, NodeUnit, Support

if TYPE_CHECKING:
    from mobile_ep.contract.backend import Backend

__all__ = [
    "MAX_OPSET",
    "RuleContext",
    "OpRule",
    "RuleRegistry",
    "DuplicateRuleError",
    "shape_text",
    "doc_summary",
]

#: Highest ai.onnx opset the execution providers we model accept (ORT's builders cap at 27).
MAX_OPSET = 27

_node_domain = operator.attrgetter("domain")
_value_shape = operator.attrgetter("shape")
_value_type = operator.attrgetter("type")
_const_value = operator.attrgetter("const_value")
_is_initializer = operator.methodcaller("is_initializer")
_is_graph_input = operator.methodcaller("is_graph_input")
_ONLY_INTS = frozenset({int})


# --------------------------------------------------------------------------------------------------
# What rules see
# --------------------------------------------------------------------------------------------------
class RuleContext:
    """The model-level facts a rule needs, and a memo of answers.

    ``ctx.options`` is the backend's options object.  Shapes come back as tuples whose entries are
    ``int`` for known dims and ``None`` for symbolic or unknown ones; ``None`` for unknown rank.
    """

    def __init__(self, model: ir.Model, backend: Backend, graph: ir.Graph | None = None) -> None:
        self.model = model
        self.graph = graph if graph is not None else model.graph
        self.backend = backend
        self.options = backend.options
        self._memo: dict[int, Support] = {}
        self._opsets: dict[str, int] = {}
        self.units: Mapping[ir.Node, NodeUnit] = {}
        #: Constants a rewrite is about to add (not yet registered as initializers of the graph).
        self.pending_constants: set[ir.Value] = set()

    # -- model ------------------------------------------------------------------------------------
    def opset(self, domain: str = "") -> int:
        cached = self._opsets.get(domain)  # asked twice for every node
        if cached is not None:
            return cached
        key = domain
        if domain == "ai.onnx":
            domain = ""
        version = self.model.opset_imports.get(domain)
        if version is None and domain == "":
            version = self.model.opset_imports.get("ai.onnx")
        self._opsets[key] = result = int(version) if version is not None else 0
        return result

    def node_opset(self, node: ir.Node) -> int:
        domain = _node_domain(node)
        cached = self._opsets.get(domain)
        return cached if cached is not None else self.opset(domain)

    def graph_nodes(self) -> Sequence[ir.Node]:
        """The graph's nodes, in the graph's order (a new list each call)."""
        return list(self.graph)

    # -- values -----------------------------------------------------------------------------------
    def is_constant(self, value: ir.Value | None) -> bool:
        """True for an initializer that a session cannot override.

        From ONNX IR version 4 on, an initializer that is also a graph input is only a default and may be
        replaced at run time, so it is not constant (ORT's ``CanOverrideInitializer``).
        """
        if value is None:
            return False
        if self.pending_constants and value in self.pending_constants:
            return True
        if not _is_initializer(value) or _const_value(value) is None:
            return False
        return not (_is_graph_input(value) and (self.model.ir_version or 0) >= 4)

    def constant(self, value: ir.Value | None) -> np.ndarray | None:
        """The value of a constant initializer as a numpy array, else ``None``."""
        if not self.is_constant(value):
            return None
        assert value is not None and value.const_value is not None
        return value.const_value.numpy()

    def shape(self, value: ir.Value | None) -> tuple[int | None, ...] | None:
        if value is None:
            return None
        shape = _value_shape(value)  # (asked several times for every node: one slot read, not four calls)
        if shape is None:
            tensor = _const_value(value)
            if tensor is not None:
                return tuple(int(d) for d in tensor.shape)
            return None
        dims = shape.dims
        if _ONLY_INTS.issuperset(map(type, dims)):  # the common case, without a Python-level loop
            return dims
        return tuple(d if isinstance(d, int) else None for d in dims)

    def rank(self, value: ir.Value | None) -> int | None:
        shape = self.shape(value)
        return None if shape is None else len(shape)

    def static_shape(self, value: ir.Value | None) -> tuple[int, ...] | None:
        """The shape if every dim is known, else ``None``."""
        shape = self.shape(value)
        if shape is None or None in shape:
            return None
        return typing.cast(tuple[int, ...], shape)

    def dtype(self, value: ir.Value | None) -> ir.DataType | None:
        if value is None:
            return None
        type_ = _value_type(value)
        if type_ is not None:
            dtype = type_.dtype
            if dtype is not None:
                return dtype
        tensor = _const_value(value)
        return tensor.dtype if tensor is not None else None

    def producer(self, value: ir.Value | None) -> ir.Node | None:
        return None if value is None else value.producer()

    def consumers(self, value: ir.Value) -> list[ir.Node]:
        return [use.node for use in value.uses()]

    def is_graph_output(self, value: ir.Value) -> bool:
        return value.is_graph_output() and value in self.graph.outputs  # O(1) for the usual answer

    # -- other nodes --------------------------------------------------------------------------------
    def unit_of(self, node: ir.Node) -> NodeUnit:
        return self.units.get(node) or NodeUnit(node)

    def claims(self, node: ir.Node) -> Support:
        """Whether this backend supports *node* (memoized; for rules that depend on neighbours)."""
        return self.claims_unit(self.unit_of(node))

    def reads_graph(self) -> None:
        """Say that the answer being worked out depends on more than the node's signature (see
        :attr:`OpRule.signature_memo`): a rule that reads the graph other than through this context's
        ``constant``, ``producer``, ``consumers``, ``is_graph_output``, ``unit_of`` and ``claims`` calls it."""

    def claims_unit(self, unit: NodeUnit) -> Support:
        memo = self._memo
        key = id(unit.target)
        answer = memo.get(key)
        if answer is None:
            memo[key] = CYCLIC  # guards rules that look back at us
            memo[key] = answer = self.backend.supports(unit, self)
        return answer


# --------------------------------------------------------------------------------------------------
# Op rules
# --------------------------------------------------------------------------------------------------
class OpRule:
    """Support check (and, for compiling backends, lowering) of one op or op family.

    Subclasses set ``op_types`` (and ``domain``) and implement :meth:`check`.  A backend normally
    defines its own intermediate base class whose :meth:`check_common` runs the checks every op of that
    backend goes through (static shapes, dtypes, feature level, ...) before the op's own check, as
    ONNX Runtime's ``BaseOpBuilder`` does.

    The docstring of :meth:`check` (or the class) is shown in ``mobile-ep ops`` as the op's conditions.
    """

    domain: ClassVar[str] = ""
    op_types: ClassVar[tuple[str, ...]] = ()
    #: Opsets this rule is registered for: other rules may cover other ranges of the same op.
    opsets: ClassVar[tuple[int, int]] = (1, 10_000)
    #: Opsets the op is *supported* in; outside it the answer is "unsupported" with the reason.
    min_opset: ClassVar[int] = 1
    max_opset: ClassVar[int] = MAX_OPSET
    #: The rule's "supported" answer for a single node is a function of the node's signature (op, attributes,
    #: the element types, shapes and constness of its inputs and outputs; see
    #: :meth:`mobile_ep.partitioning.context.ProposalContext.signature`) and of what it reads through the context's ``constant``,
    #: ``producer``, ``consumers``, ``is_graph_output``, ``unit_of`` and ``claims`` (or announces with
    #: ``ctx.reads_graph()``).  Then the partitioner asks the rule once per signature, not once per node.
    #: Off by default: set it only for rules that read nothing else of the graph directly.
    signature_memo: ClassVar[bool] = False

    def supports(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        """Common checks, then the op's own.  Exceptions are the caller's to isolate."""
        result = self.check_common(unit, ctx)
        if result is not SUPPORTED and not result:  # (the identity test spares a __bool__ call per node)
            return result
        return self.check(unit, ctx)

    def check_common(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        opset = ctx.node_opset(unit.target)
        if self.min_opset <= opset <= self.max_opset:
            return SUPPORTED
        if opset < self.min_opset:
            return Support.no(f"opset {opset} is below the minimum {self.min_opset}")
        if opset > self.max_opset:
            return Support.no(f"opset {opset} is above the maximum {self.max_opset}")
        return SUPPORTED

    def check(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        return SUPPORTED

    # -- documentation --------------------------------------------------------------------------------
    def conditions(self, op_type: str) -> list[str]:
        """Human-readable conditions for the docs, generated from the rule's own attributes and docstring."""
        items = []
        if self.min_opset > 1 or self.max_opset != MAX_OPSET:
            items.append(f"opset {self.min_opset}–{self.max_opset}")
        doc = inspect.getdoc(type(self).check) if type(self).check is not OpRule.check else None
        doc = doc or inspect.getdoc(type(self))
        if doc:
            items.append(" ".join(doc.split("\n\n")[0].split()))
        return items


def shape_text(value: ir.Value | None, ctx: RuleContext) -> str:
    """A value's shape as a rule's reason shows it: ``[N,3,224,224]``, symbolic dims by name and unknown ones
    as ``?``; ``unknown`` when nothing is known of it, ``[]`` for no value (an omitted input)."""
    if value is None:
        return "[]"
    if value.shape is None:
        shape = ctx.shape(value)
        return "unknown" if shape is None else "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"
    dims = [str(d) if isinstance(d, int) else (str(d.value) if getattr(d, "value", None) else "?") for d in value.shape]
    return "[" + ",".join(dims) + "]"


def doc_summary(doc: str | None) -> str:
    """The first paragraph of a docstring on one line, without its final period (``""`` for none): a rule's
    condition as :meth:`OpRule.conditions` lists it for ``mobile-ep ops``."""
    return " ".join(doc.split("\n\n")[0].split()).rstrip(".") if doc else ""


class DuplicateRuleError(ValueError):
    """Two rules claim the same (domain, op_type) for overlapping opsets."""


class RuleRegistry:
    """Rules by (domain, op_type) and opset range.  Refuses duplicates unless told to override."""

    def __init__(self, rules: Iterable[OpRule] = ()) -> None:
        self._rules: dict[tuple[str, str], list[OpRule]] = {}
        #: :meth:`lookup`'s answers by (domain, op_type, opset); emptied by :meth:`add`.
        self._found: dict[tuple[str, str, int], OpRule | None] = {}
        for rule in rules:
            self.add(rule)

    @staticmethod
    def _key(domain: str, op_type: str) -> tuple[str, str]:
        return ("" if domain == "ai.onnx" else domain, op_type)

    def add(self, rule: OpRule, *, override: bool = False) -> None:
        if not rule.op_types:
            raise ValueError(f"{type(rule).__name__} declares no op_types")
        lo, hi = rule.opsets
        self._found.clear()
        for op_type in rule.op_types:
            entries = self._rules.setdefault(self._key(rule.domain, op_type), [])
            clashes = [r for r in entries if r.opsets[0] <= hi and lo <= r.opsets[1]]
            if clashes and not override:
                other = type(clashes[0]).__name__
                raise DuplicateRuleError(
                    f"{type(rule).__name__} and {other} both register {rule.domain or 'ai.onnx'}:{op_type} "
                    f"for overlapping opsets {rule.opsets} / {clashes[0].opsets}"
                )
            for clash in clashes:
                entries.remove(clash)
            entries.append(rule)
            entries.sort(key=lambda r: r.opsets)

    def add_module(self, module: types.ModuleType, *, override: bool = False) -> None:
        """Register every concrete OpRule subclass *defined* in *module* (imported names are ignored)."""
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, OpRule)
                and obj.__module__ == module.__name__
                and obj.op_types
                and not inspect.isabstract(obj)
            ):
                self.add(obj(), override=override)

    @classmethod
    def from_package(cls, package: types.ModuleType | str) -> RuleRegistry:
        """Build a registry from every module of a package (one module per op or op family)."""
        if isinstance(package, str):
            package = importlib.import_module(package)
        registry = cls()
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
            if info.name.startswith("_"):
                continue
            registry.add_module(importlib.import_module(f"{package.__name__}.{info.name}"))
        return registry

    def lookup(self, domain: str, op_type: str, opset: int) -> OpRule | None:
        key = (domain, op_type, opset)
        try:
            return self._found[key]  # (asked for every node: the answer once per op type and opset)
        except KeyError:
            pass
        found = None
        for rule in self._rules.get(self._key(domain, op_type), ()):
            low, high = rule.opsets
            if low <= opset <= high:
                found = rule
                break
        self._found[key] = found
        return found

    def __iter__(self) -> Iterator[tuple[str, str, OpRule]]:
        for (domain, op_type), rules in sorted(self._rules.items()):
            for rule in rules:
                yield domain, op_type, rule

    def op_types(self) -> list[tuple[str, str]]:
        return sorted(self._rules)

    def __len__(self) -> int:
        return len(self._rules)

    def __contains__(self, key: tuple[str, str]) -> bool:
        return self._key(*key) in self._rules
