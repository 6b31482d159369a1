"""The capability contract: what a backend can run, and why not.

A backend owns a :class:`RuleRegistry` of :class:`OpRule` objects, one per op or op family, each
registered under ``(domain, op_type)`` for a range of opsets.  ``OpRule.supports(unit, ctx)`` answers
with a :class:`Support`, which is falsy and carries a human-readable reason when the node cannot run.

Rules look at nodes through a :class:`RuleContext`, which knows the model (opsets, IR version), which
values are constant, their shapes and dtypes, and the backend's options.  A rule never needs to touch
ONNX protobufs.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
import itertools
import operator
import pkgutil
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Literal

import numpy as np
import onnx_ir as ir

_node_op_type = operator.attrgetter("op_type")
_node_domain = operator.attrgetter("domain")
_node_inputs = operator.attrgetter("inputs")
_node_outputs = operator.attrgetter("outputs")
_attribute_data = operator.attrgetter("attributes.data")
_attr_value = operator.attrgetter("value")
_attr_type = operator.attrgetter("type")
_value_shape = operator.attrgetter("shape")
_value_type = operator.attrgetter("type")
_value_producer = operator.methodcaller("producer")
_const_value = operator.attrgetter("const_value")
_is_initializer = operator.methodcaller("is_initializer")
_is_graph_input = operator.methodcaller("is_graph_input")
_shape_dims = operator.attrgetter("dims")

__all__ = [
    "MAX_OPSET",
    "Support",
    "SUPPORTED",
    "UnitIO",
    "NodeUnit",
    "RuleContext",
    "OpRule",
    "RuleRegistry",
    "DuplicateRuleError",
    "Layout",
    "Backend",
    "PartitionView",
    "attr",
    "op_label",
]

#: Highest ai.onnx opset the execution providers we model accept (ORT's builders cap at 27).
MAX_OPSET = 27

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
_CYCLIC = Support(False, "cyclic support query")
_ONLY_INTS = frozenset({int})
#: Attribute types a node signature holds (:meth:`_ProposalContext.signature`).
_PLAIN_ATTRIBUTES = frozenset({ir.AttributeType.INT, ir.AttributeType.FLOAT, ir.AttributeType.STRING,
                               ir.AttributeType.INTS, ir.AttributeType.FLOATS, ir.AttributeType.STRINGS})
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

    @property
    def nodes(self) -> tuple[ir.Node, ...]:
        if not self.dq_nodes and not self.q_nodes:
            return (self.target,)
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
        result = []
        for value in self.target.outputs:
            q = q_by_input.get(value)
            if q is not None:
                result.append(UnitIO(q.outputs[0], _input(q, 1), _input(q, 2)))
            else:
                result.append(UnitIO(value))
        return tuple(result)

    def __repr__(self) -> str:
        return f"NodeUnit({self.kind}, {op_label(self.target)} {self.name!r})"


def _single_units(nodes: Iterable[ir.Node]) -> list[NodeUnit]:
    """``[NodeUnit(node) for node in nodes]`` in a third of the time (the partitioner makes one per node).

    Only ``target`` is set on each instance: the other fields keep their defaults, which a dataclass
    keeps as class attributes, so the units are indistinguishable from ``NodeUnit(node)``.
    """
    new, set_field = object.__new__, object.__setattr__
    units = []
    append = units.append
    for node in nodes:
        unit = new(NodeUnit)
        set_field(unit, "target", node)
        append(unit)
    return units


def _input(node: ir.Node, index: int) -> ir.Value | None:
    return node.inputs[index] if index < len(node.inputs) else None


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
        """The graph's nodes, in the graph's order (do not change the list: a proposal's context hands out
        the one it holds, built once for all its backends)."""
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
            memo[key] = _CYCLIC  # guards rules that look back at us
            memo[key] = answer = self.backend.supports(unit, self)
        return answer


class _ProposalContext(RuleContext):
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
    #: :meth:`_ProposalContext.signature`) and of what it reads through the context's ``constant``,
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


# --------------------------------------------------------------------------------------------------
# Partitions as backends see them (for filters)
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class PartitionView:
    """A group of units a backend is about to claim; backends may veto it in ``accept_partition``."""

    backend: str
    units: tuple[NodeUnit, ...]
    inputs: tuple[ir.Value, ...]
    outputs: tuple[ir.Value, ...]
    #: The units' nodes when whoever made the view knew them already (the partitioner), else None.
    _nodes: tuple[ir.Node, ...] | None = dataclasses.field(default=None, init=False, repr=False)

    @property
    def nodes(self) -> tuple[ir.Node, ...]:
        nodes = self._nodes
        if nodes is not None:
            return nodes
        return tuple(n for u in self.units for n in u.nodes)


# --------------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class NoOptions:
    """A backend without options."""


class Backend:
    """A target accelerator: its op rules, options, layout and partition policy.

    Subclass it, set ``name``, ``version`` and (optionally) ``Options``, a frozen dataclass whose fields
    carry ``metadata={"help": ...}``, and implement :meth:`build_rules`.
    """

    name: ClassVar[str] = ""
    version: ClassVar[str] = "0"
    #: Shown by ``mobile-ep list``.
    description: ClassVar[str] = ""
    preferred_layout: ClassVar[Layout] = "NCHW"
    Options: ClassVar[type] = NoOptions
    #: The plugin API this backend is written for (``mobile_ep.PLUGIN_API_VERSION``): ``N``, or an
    #: inclusive range ``(LOW, HIGH)``; ``None`` declares nothing.  Checked when the backend registers.
    plugin_api: ClassVar[int | tuple[int, int] | None] = None

    def __init__(self, options: Any = None) -> None:
        if not self.name:
            raise TypeError(f"{type(self).__name__} must set a name")
        self.options = options if options is not None else self.Options()
        self.rules = self.build_rules()

    # -- configuration ------------------------------------------------------------------------------
    def build_rules(self) -> RuleRegistry:
        raise NotImplementedError

    def configure(self, values: Mapping[str, str]) -> Backend:
        """A copy of this backend with options parsed from strings (``{"api_level": "29"}``)."""
        if not values:
            return self
        options = parse_options(self.Options, values, current=self.options, backend=self.name)
        return type(self)(options)

    def rewrites(self) -> Sequence[Any]:
        """Legalizing rewrites (:class:`mobile_ep.Rewrite`) this backend wants, tried in this order."""
        return ()

    def cost_params(self) -> Any:
        """Constants of the cost model (:class:`mobile_ep.partitioning.cost.CostParams`) for this accelerator."""
        from mobile_ep.partitioning.cost import CostParams

        return CostParams()

    def qdq_ops(self) -> frozenset[str]:
        """Op types this backend takes as whole QDQ units (DequantizeLinear -> op -> QuantizeLinear)."""
        return frozenset()

    # -- capability ---------------------------------------------------------------------------------
    def supports(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        target = unit.target  # (asked for every node: no detours through properties)
        opset = ctx.node_opset(target)
        rule = self.rules.lookup(target.domain, target.op_type, opset)
        if rule is None:
            if (unit.domain, unit.op_type) in self.rules:
                return Support.no(f"opset {opset} is not covered by any {self.name} rule")
            return Support.no(f"{self.name} has no rule for {op_label(unit.target)}")
        return rule.supports(unit, ctx)

    def excluded_nodes(self, graph: ir.Graph, ctx: RuleContext) -> Mapping[ir.Node, str]:
        """Nodes this backend must not take whatever their rules say (e.g. NNAPI's stop ops)."""
        return {}

    def accept_partition(self, partition: PartitionView, ctx: RuleContext) -> Support:
        """Veto a proposed partition (a falsy answer's reason is shown for each of its nodes)."""
        return SUPPORTED

    def describe_options(self) -> list[tuple[str, str, str]]:
        """(name, default, help) for each option."""
        result = []
        for field in dataclasses.fields(self.Options):
            default = getattr(self.Options(), field.name)
            result.append((field.name, _format_option(default), field.metadata.get("help", "")))
        return result

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.version}>"


def _format_option(value: Any) -> str:
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, (tuple, list, frozenset)):
        return ",".join(str(v) for v in value)
    return str(value)


def parse_options(options_type: type, values: Mapping[str, str], *, current: Any, backend: str) -> Any:
    """Parse string option values into a new options dataclass instance; errors name the option."""
    from mobile_ep.errors import UsageError

    fields = {f.name: f for f in dataclasses.fields(options_type)}
    hints = typing.get_type_hints(options_type)
    changes: dict[str, Any] = {}
    for key, raw in values.items():
        name = key.replace("-", "_")
        if name not in fields:
            known = ", ".join(sorted(fields)) or "none"
            raise UsageError(f"{backend}: unknown option {key!r} (options: {known})")
        try:
            changes[name] = _convert_option(hints[name], raw)
        except ValueError as exc:
            raise UsageError(f"{backend}: option {key}={raw!r}: {exc}") from None
    try:
        return dataclasses.replace(current, **changes)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{backend}: {exc}") from None


def _convert_option(hint: Any, raw: str) -> Any:
    origin = typing.get_origin(hint)
    if hint is bool:
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ValueError("expected true or false")
    if hint is int:
        try:
            return int(raw)
        except ValueError:
            raise ValueError("expected an integer") from None
    if hint is float:
        return float(raw)
    if hint is str:
        return raw
    if origin is Literal:
        choices = typing.get_args(hint)
        for choice in choices:
            if str(choice).lower() == raw.strip().lower():
                return choice
        raise ValueError(f"expected one of {', '.join(map(str, choices))}")
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        for member in hint:
            if raw.strip().lower() in (str(member.value).lower(), member.name.lower()):
                return member
        raise ValueError(f"expected one of {', '.join(str(m.value) for m in hint)}")
    if origin in (tuple, frozenset, list, Sequence):
        items = tuple(s.strip() for s in raw.split(",") if s.strip())
        return frozenset(items) if origin is frozenset else items
    raise ValueError(f"cannot parse options of type {hint}")


RegisterBackend = Callable[[Backend], None]
