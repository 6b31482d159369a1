"""The compile contract: an optional extension of :class:`~mobile_ep.Backend` for backends that lower
partitions to their own format.

A backend that only predicts what an execution provider claims (as ORT's built-in NNAPI and CoreML EPs
decide on the device) implements nothing here.  A backend that compiles implements three methods,
described by the :class:`CompilingBackend` protocol:

``compile(partition, ctx) -> CompiledPartition``
    Lower one partition: a :class:`~mobile_ep.PartitionView` (a subgraph of ONNX node units with
    named inputs and outputs) seen through a :class:`~mobile_ep.RuleContext` (shapes, dtypes,
    constants, the backend's options).  Constant inputs (weights) go into the payload; every other
    input is fed at run time.  Raise :class:`CompileError` when a unit cannot be lowered.
``emulate(payload, inputs) -> {output name: numpy array}``
    Run a payload on this machine with the backend's semantics (the host reference).  It must work
    from the payload alone: ``payload.data`` and ``payload.metadata`` survive serialization, nothing
    else does.
``runtime_adapter() -> {relative path: bytes}``
    The sources an app ships to run payloads on the device (C/C++, JNI, Swift, ...).

Optionally, ``package_functions(payloads, path) -> (written path, {name: payload})`` writes several payloads as
the functions of one artifact, the weights they share stored once (Core ML's multifunction ``.mlpackage``); each
returned payload runs its function with ``emulate``.  ``mobile-ep llm --compile`` uses it
(:mod:`mobile_ep.llm.functions`).

Op rules that lower implement ``lower(unit, ctx, builder)`` next to their ``check`` (the
:class:`LoweringRule` protocol) and a backend's ``compile`` calls :func:`lower_units`, which re-asserts
support before each lowering.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib.resources
import json
import struct
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np
import onnx_ir as ir

from mobile_ep.contract.backend import PartitionView
from mobile_ep.contract.rules import RuleContext
from mobile_ep.contract.support import NodeUnit, node_reads, op_label
from mobile_ep.errors import BackendError

__all__ = [
    "COMPILE_METHODS",
    "TensorSpec",
    "CompiledPartition",
    "CompilingBackend",
    "LoweringRule",
    "CompileError",
    "is_compiling",
    "missing_compile_methods",
    "partition_view",
    "runtime_inputs",
    "lower_units",
    "package_files",
]

#: The methods a compiling backend implements (all three, or none).
COMPILE_METHODS = ("compile", "emulate", "runtime_adapter")

_MAGIC = b"MEPPART1"
_HEADER = struct.Struct("<8sI")


class CompileError(BackendError):
    """A partition could not be lowered, or a payload is malformed."""


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """A named tensor at a partition's boundary: dtype and shape (``None`` dims are symbolic)."""

    name: str
    dtype: ir.DataType
    shape: tuple[int | None, ...] | None

    @classmethod
    def of(cls, value: ir.Value, ctx: RuleContext) -> TensorSpec:
        return cls(value.name or "", ctx.dtype(value) or ir.DataType.UNDEFINED, ctx.shape(value))

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype.name,
                "shape": None if self.shape is None else list(self.shape)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TensorSpec:
        shape = data.get("shape")
        return cls(str(data["name"]), ir.DataType[str(data["dtype"])],
                   None if shape is None else tuple(None if d is None else int(d) for d in shape))


@dataclasses.dataclass(frozen=True)
class CompiledPartition:
    """A backend's payload for one partition: opaque bytes plus string metadata.

    ``inputs`` are the tensors fed at run time, in the order the payload expects them (constant
    inputs are inside ``data``); ``outputs`` are the tensors it produces.  ``format`` names the
    payload's format and version (``"example-npu/1"``) so that a runtime can refuse what it cannot read.
    """

    backend: str
    format: str
    data: bytes
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    metadata: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def validate(self) -> CompiledPartition:
        """Raise :class:`CompileError` unless every field has the documented type."""
        problems = []
        if not isinstance(self.data, bytes):
            problems.append(f"data is {type(self.data).__name__}, not bytes")
        if not self.backend or not isinstance(self.backend, str):
            problems.append("backend is not a non-empty string")
        if not self.format or not isinstance(self.format, str):
            problems.append("format is not a non-empty string")
        for kind, specs in (("inputs", self.inputs), ("outputs", self.outputs)):
            if not isinstance(specs, tuple) or not all(isinstance(s, TensorSpec) for s in specs):
                problems.append(f"{kind} is not a tuple of TensorSpec")
        if not isinstance(self.metadata, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.metadata.items()
        ):
            problems.append("metadata is not a mapping of str to str")
        if problems:
            raise CompileError(f"{self.backend or '?'}: malformed compiled partition: {'; '.join(problems)}")
        return self

    # -- serialization --------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """A self-describing container: magic, header length, a JSON header, then ``data``."""
        header = json.dumps({
            "backend": self.backend, "format": self.format,
            "inputs": [s.as_dict() for s in self.inputs], "outputs": [s.as_dict() for s in self.outputs],
            "metadata": dict(self.metadata), "size": len(self.data),
        }, sort_keys=True, separators=(",", ":")).encode()
        return _HEADER.pack(_MAGIC, len(header)) + header + self.data

    @classmethod
    def from_bytes(cls, blob: bytes) -> CompiledPartition:
        if len(blob) < _HEADER.size or blob[:8] != _MAGIC:
            raise CompileError("not a mobile-ep compiled partition (bad magic)")
        _, length = _HEADER.unpack_from(blob)
        end = _HEADER.size + length
        try:
            header = json.loads(blob[_HEADER.size:end].decode())
            data = bytes(blob[end:])
            if len(data) != header["size"]:
                raise ValueError(f"payload is {len(data)} bytes, the header says {header['size']}")
            return cls(
                backend=header["backend"], format=header["format"], data=data,
                inputs=tuple(TensorSpec.from_dict(d) for d in header["inputs"]),
                outputs=tuple(TensorSpec.from_dict(d) for d in header["outputs"]),
                metadata={str(k): str(v) for k, v in header["metadata"].items()},
            ).validate()
        except (ValueError, KeyError, TypeError) as exc:
            raise CompileError(f"corrupt compiled partition: {exc}") from None


@runtime_checkable
class CompilingBackend(Protocol):
    """What a compiling backend implements on top of :class:`~mobile_ep.Backend` (see the module doc)."""

    name: str

    def compile(self, partition: PartitionView, ctx: RuleContext) -> CompiledPartition: ...

    def emulate(self, payload: CompiledPartition, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...

    def runtime_adapter(self) -> Mapping[str, bytes]: ...


@runtime_checkable
class LoweringRule(Protocol):
    """An op rule that also lowers: ``lower`` adds the unit to the backend's *builder*."""

    def lower(self, unit: NodeUnit, ctx: RuleContext, builder: Any) -> None: ...


def missing_compile_methods(backend: object) -> list[str]:
    return [m for m in COMPILE_METHODS if not callable(getattr(backend, m, None))]


def is_compiling(backend: object) -> bool:
    """True if *backend* implements the whole compile contract.

    A backend implementing only some of the methods is a contract violation, not a non-compiling
    backend: check :func:`missing_compile_methods` for that.
    """
    return not missing_compile_methods(backend)


# --------------------------------------------------------------------------------------------------
# Partitions
# --------------------------------------------------------------------------------------------------
def partition_view(ctx: RuleContext, nodes: Iterable[ir.Node]) -> PartitionView:
    """The partition made of *nodes* (grouped into the context's node units), in topological order.

    Its inputs are the values read from outside it (constants included); its outputs are the values
    used outside it or that are graph outputs.
    """
    units: list[NodeUnit] = []
    seen: set[int] = set()
    for node in nodes:
        unit = ctx.unit_of(node)
        if id(unit) not in seen:
            seen.add(id(unit))
            units.append(unit)
    members = {n for u in units for n in u.nodes}
    unit_of = {n: u for u in units for n in u.nodes}
    # Kahn order over the units (the graph's own node order need not be topological).
    pending = {id(u): 0 for u in units}
    users: dict[int, list[NodeUnit]] = collections.defaultdict(list)
    for unit in units:
        producers = {id(unit_of[v.producer()]) for n in unit.nodes for v in node_reads(n)
                     if v.producer() in members and unit_of[v.producer()] is not unit}
        pending[id(unit)] = len(producers)
        for producer in producers:
            users[producer].append(unit)
    ready = collections.deque(u for u in units if pending[id(u)] == 0)
    ordered: list[NodeUnit] = []
    while ready:
        unit = ready.popleft()
        ordered.append(unit)
        for user in users[id(unit)]:
            pending[id(user)] -= 1
            if pending[id(user)] == 0:
                ready.append(user)
    if len(ordered) != len(units):
        raise CompileError("the partition's nodes form a cycle")
    inputs: dict[ir.Value, None] = {}
    outputs: dict[ir.Value, None] = {}
    graph_outputs = set(ctx.graph.outputs)
    for unit in ordered:
        for node in unit.nodes:
            for value in node_reads(node):
                if value.producer() not in members:
                    inputs.setdefault(value, None)
            for value in node.outputs:
                if value in graph_outputs or any(use.node not in members for use in value.uses()):
                    outputs.setdefault(value, None)
    return PartitionView(ctx.backend.name, tuple(ordered), tuple(inputs), tuple(outputs))


def runtime_inputs(partition: PartitionView, ctx: RuleContext) -> list[ir.Value]:
    """The partition's inputs that are fed at run time (everything but constant initializers)."""
    return [v for v in partition.inputs if not ctx.is_constant(v)]


def lower_units(partition: PartitionView, ctx: RuleContext, builder: Any) -> None:
    """Lower every unit of *partition* with its rule's ``lower(unit, ctx, builder)``, in order.

    Support is re-asserted first: a unit its rule does not support (or a rule without ``lower``) raises
    :class:`CompileError` naming the node and the reason.
    """
    backend = ctx.backend
    for unit in partition.units:
        label = f"{op_label(unit.target)} node {unit.name!r}"
        rule = backend.rules.lookup(unit.domain, unit.op_type, ctx.node_opset(unit.target))
        if rule is None:
            raise CompileError(f"{backend.name}: {label}: no rule")
        if not isinstance(rule, LoweringRule):
            raise CompileError(f"{backend.name}: {label}: {type(rule).__name__} has no lower()")
        answer = rule.supports(unit, ctx)
        if not answer:
            raise CompileError(f"{backend.name}: {label} cannot be lowered: {answer.reason}")
        rule.lower(unit, ctx, builder)


def package_files(package: str, folder: str) -> dict[str, bytes]:
    """Every file under *folder* of *package*'s data, by relative POSIX path (for ``runtime_adapter``)."""
    root = importlib.resources.files(package).joinpath(folder)
    files: dict[str, bytes] = {}

    def walk(node: Any, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.name.startswith((".", "__pycache__")):
                continue
            path = f"{prefix}{child.name}"
            if child.is_dir():
                walk(child, path + "/")
            else:
                files[path] = child.read_bytes()

    walk(root, "")
    return files
