"""Backends: a target accelerator's rules, options, layout and partition policy.

A plugin subclasses :class:`Backend`, sets its ``name``, ``version`` and ``Options`` (a frozen dataclass,
parsed from ``-O backend.key=value`` strings by :func:`parse_options`), builds its
:class:`~mobile_ep.contract.rules.RuleRegistry` and may veto the partitions the partitioner proposes,
seen as :class:`PartitionView` objects.  The optional compile contract is in
:mod:`mobile_ep.contract.compile`.

Plugin authors import these from :mod:`mobile_ep.contract` (or :mod:`mobile_ep`).
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal

import onnx_ir as ir

from mobile_ep.contract.rules import RuleContext, RuleRegistry
from mobile_ep.contract.support import SUPPORTED, Layout, NodeUnit, Support, op_label

__all__ = [
    "Backend",
    "PartitionView",
    "CostParams",
    "NoOptions",
    "RegisterBackend",
    "parse_options",
    "check_option_types",
    "format_option",
]


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

    @property
    def nodes(self) -> tuple[ir.Node, ...]:
        return tuple(n for u in self.units for n in u.nodes)


# --------------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class CostParams:
    """The cost model's constants for one accelerator (:meth:`Backend.cost_params`), deliberately round; the
    model itself is :mod:`mobile_ep.partitioning.cost`."""

    #: Sustained CPU throughput of a mid-range phone core cluster, GFLOP/s.
    cpu_gflops: float = 20.0
    #: How much faster the accelerator runs the same arithmetic.
    speedup: float = 4.0
    #: CPU <-> accelerator copy bandwidth, GB/s.
    copy_gbps: float = 4.0
    #: Fixed cost of one partition call (dispatch, synchronisation), microseconds.
    dispatch_us: float = 30.0


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
    #: Where the backend's EP runs: ``"android"``, ``"ios"``, or ``"any"`` (the default: a backend that names
    #: no platform is grouped with every one).  Fixes that offer another backend, and the backends registered
    #: together, stay within one platform.
    platform: ClassVar[str] = "any"
    #: The onnxruntime release whose EP the rules follow (``"onnxruntime 1.30"``; empty: not said), shown by
    #: ``mobile-ep list -v``.
    rules_from: ClassVar[str] = ""
    #: Seconds this backend's rules need on one model at most, when more than the rule budget a user sets
    #: (``--rule-budget``): a backend that asks a real EP about the whole model (:mod:`mobile_ep.ep_libraries`
    #: answers within its own time limit).  ``None``: the user's budget.
    needs_seconds: ClassVar[float | None] = None
    #: Whether a command without ``--ep`` uses this backend (every installed backend is used by default); False
    #: for a backend used only when named (mobile-ep-ort's ``ort:<EP>``, which asks a real EP).
    selected_by_default: ClassVar[bool] = True
    #: Whether the backend's claims are a real EP's answer about the whole graph (:meth:`excluded_nodes`, its
    #: rules claiming everything), as mobile-ep-ort's ``ort:<EP>``: its rewrites are tried on the nodes the EP
    #: leaves on the CPU, one rewrite at a time, and one is kept only when the EP, asked again about the
    #: rewritten graph, takes more (:func:`mobile_ep.passes.conversion.legalize_and_partition`).
    answers_whole_graph: ClassVar[bool] = False
    #: Whether the EP groups its nodes counting only the values nodes read as inputs, not those the branches
    #: of an If (Loop, Scan) read from the outer graph, while onnxruntime checks each group counting them
    #: (onnxruntime-qnn 2.7, a plugin EP): when a group is then not fusable, onnxruntime drops every group of
    #: that round (:func:`mobile_ep.partitioning.propose.wave_groups`'s callers).
    groups_by_explicit_inputs: ClassVar[bool] = False

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

    def cost_params(self) -> CostParams:
        """Constants of the cost model (:class:`CostParams`) for this accelerator."""
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

    def real_ep(self) -> tuple[str, Mapping[str, str]] | None:
        """The ONNX Runtime execution provider this backend's rules predict, when it ships as a plugin EP
        library: its EP name and the provider options matching this backend's options.  ``check --against-ep``
        asks that EP itself (through the ``ort:<EP name>`` backend of mobile-ep-ort) and lists where the rules
        and the EP disagree.  ``None`` (the default): no such EP."""
        return None

    def compile_with_ep(self, source: Any, target: Any, workdir: Any, options: Any = None) -> Any:
        """``convert --compile`` by the backend's own execution provider: write the EPContext model *target*
        (and its context files) from the written model *source* (work files in *workdir*; *options*: the run's
        :class:`mobile_ep.options.Options`), check it, and return its
        :class:`~mobile_ep.contract.compile.CompileResult`.  ``None`` (the default): the EP writes nothing of
        its own, and ``--compile`` uses the backend's compile/emulate/runtime_adapter
        (:mod:`mobile_ep.contract.compile`)."""
        return None

    def describe_options(self) -> list[tuple[str, str, str]]:
        """(name, default, help) for each option."""
        result = []
        for field in dataclasses.fields(self.Options):
            default = getattr(self.Options(), field.name)
            result.append((field.name, format_option(default), field.metadata.get("help", "")))
        return result

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.version}>"


def format_option(value: Any) -> str:
    """An option value as text, the way :func:`parse_options` reads it back (enums by value, sequences
    comma-separated): for ``mobile-ep list``, reports and the backend's option help."""
    if isinstance(value, bool):
        return "true" if value else "false"
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


def check_option_types(options: Any) -> None:
    """Refuse, with a ``ValueError`` naming the field, a value of an options dataclass that is not one of its
    ``Literal`` choices, or not a bool for a ``bool`` field (for ``__post_init__``: options built in Python,
    not parsed from strings by :func:`parse_options`, are checked too)."""
    hints = typing.get_type_hints(type(options))
    for field in dataclasses.fields(options):
        hint, value = hints[field.name], getattr(options, field.name)
        if typing.get_origin(hint) is Literal:
            choices = typing.get_args(hint)
            if value not in choices:
                raise ValueError(f"{field.name}={value!r}: expected one of {', '.join(map(str, choices))}")
        elif hint is bool and not isinstance(value, bool):
            raise ValueError(f"{field.name}={value!r}: expected true or false")


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


#: What :func:`~mobile_ep.contract.hookspecs.mobile_ep_register_backends` hands a plugin: call it once per backend.
RegisterBackend = Callable[[Backend], None]
