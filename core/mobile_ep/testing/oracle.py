"""The oracle: a backend's prediction against the real ONNX Runtime execution provider it models.

A backend predicts which nodes an execution provider (EP) takes.  When that EP runs on the host (QNN's HTP
simulator on x86-64 Linux, XNNPACK, a vendor's plugin EP...), the prediction can be checked against the
real thing, case by case.  :func:`run_oracle` does, for one model:

1. the model is written with every node named (names are how the two placements meet) and opened with
   onnxruntime's basic optimizations on the CPU: that basic-level graph is what the EP is asked about;
2. the backend's prediction: :func:`mobile_ep.partitioning.propose.propose` over that graph (ORT's
   partitioning, no cost model: the EP has none);
3. the real placement: a session with the EP, at the basic level, with ORT's EPContext output on
   (``ep.context_enable=1``, ``ep.context_embed_mode=0``).  The model ORT writes holds one
   ``com.microsoft:EPContext`` node per partition the EP compiled, and every node it did not take as it
   was: the nodes taken are the basic graph's nodes that are gone (a node is known by the values it
   produces: nodes onnxruntime makes itself, e.g. a function op's inlined body, have no name), each
   partition is known by its outputs.  When the EP takes nothing ORT writes no file;
4. the two are compared: nodes predicted but left on the CPU, nodes taken but not predicted (with the
   backend's reason), and the partitions: as many, each producing the same graph outputs (a real partition
   that only copies values the CPU computes, made of nodes ORT or the EP added, is left out).  The Casts
   the CPU-only session inserts after partitioning, around CPU kernels without float16
   (``InsertedPrecisionFreeCast_...``), where :func:`mobile_ep.passes.fold_constants.ort_optimized` could
   not take them out again, are left out of the comparison: the EP is never offered them, whatever the
   backend says of them (a partition of nothing else is left out too).

:class:`OracleResult` holds both placements and :meth:`OracleResult.diff` names every node that differs.
The EP is described by an :class:`ExecutionProvider`: its name, provider options, session config
entries and, for a plugin EP, its library (registered once per process with
``onnxruntime.register_execution_provider_library``)::

    from mobile_ep.testing import ExecutionProvider, run_oracle

    qnn = ExecutionProvider("QNNExecutionProvider", {"backend_type": "htp", "soc_model": "60"},
                            library=onnxruntime_qnn.get_library_path())
    result = run_oracle(MyQnnBackend(), "model.onnx", qnn)
    assert result.matches, result.diff()

Only session creation runs (no inference), so each case costs what the EP's compilation costs.
"""

from __future__ import annotations

import dataclasses
import pathlib
import tempfile
import threading
from collections.abc import Mapping
from typing import Any

import onnx
import onnx_ir as ir

from mobile_ep.contract import Backend, op_label
from mobile_ep.partitioning.propose import Proposal, propose
from mobile_ep.passes.fold_constants import INSERTED_CAST_PREFIX

__all__ = [
    "EP_CRASHED",
    "ExecutionProvider",
    "CpuNode",
    "RealPartition",
    "RealPlacement",
    "OracleResult",
    "register_ep_library",
    "real_placement",
    "run_oracle",
]

EP_CONTEXT_OP = "EPContext"
EP_CONTEXT_DOMAIN = "com.microsoft"

_registered: dict[str, str] = {}
_lock = threading.Lock()


def register_ep_library(name: str, path: str) -> None:
    """Register a plugin EP library with onnxruntime, once per process (a second registration fails)."""
    import onnxruntime as ort

    with _lock:
        if name in _registered:
            return
        try:
            ort.register_execution_provider_library(name, str(path))
        except Exception as exc:  # registered by someone else in this process: fine
            if "already registered" not in str(exc):
                raise
        _registered[name] = str(path)


@dataclasses.dataclass(frozen=True)
class ExecutionProvider:
    """An onnxruntime execution provider as the oracle opens sessions with it.

    ``library``: for a plugin EP, the shared library to register (the devices whose ``ep_name`` is
    ``name`` are then used); ``None`` for an EP built into the installed onnxruntime.
    """

    name: str
    options: Mapping[str, str] = dataclasses.field(default_factory=dict)
    library: str | None = None
    session_config: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def session_options(self) -> Any:
        """A ``SessionOptions`` at the basic optimization level with this EP added (registering it first)."""
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.log_severity_level = 3
        for key, value in self.session_config.items():
            so.add_session_config_entry(key, str(value))
        if self.library is not None:
            register_ep_library(self.name, self.library)
            devices = [d for d in ort.get_ep_devices() if d.ep_name == self.name][:1]
            if not devices:
                raise RuntimeError(f"onnxruntime lists no device for the execution provider {self.name}")
            so.add_provider_for_devices(devices, {k: str(v) for k, v in self.options.items()})
        return so

    def session(self, model: str | bytes, so: Any = None) -> Any:
        """An ``InferenceSession`` of *model* (a path or serialized bytes) on this EP."""
        import onnxruntime as ort

        so = so if so is not None else self.session_options()
        if self.library is not None:
            return ort.InferenceSession(model, so)
        return ort.InferenceSession(model, so, providers=[(self.name, dict(self.options)), "CPUExecutionProvider"])


@dataclasses.dataclass(frozen=True)
class RealPartition:
    """One partition the real EP compiled: its EPContext node's name, inputs, outputs and attributes."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attributes: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class CpuNode:
    """A node the real EP left on the CPU, as the EPContext model has it."""

    name: str
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclasses.dataclass
class RealPlacement:
    """What the real EP took of a model: partitions, node names left on the CPU, or the session's error."""

    partitions: list[RealPartition]
    cpu_nodes: set[str]
    error: str | None = None
    #: The EPContext model ORT wrote (``None`` when the EP took nothing or the session failed).
    context_model: pathlib.Path | None = None
    #: Each node left on the CPU, in the written model's order.
    cpu_graph: list[CpuNode] = dataclasses.field(default_factory=list)


def _ep_context_attributes(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def real_placement(model: str | pathlib.Path, ep: ExecutionProvider, workdir: str | pathlib.Path, *,
                   keep: bool = False, isolated: bool = False) -> RealPlacement:
    """Open *model* with *ep* at the basic level, EPContext output on, and read what it took.

    With ``keep`` the EPContext model and its context files stay in *workdir* (``context.onnx``).  With
    ``isolated`` the session is created in a child process, so that an EP that crashes (a segmentation fault in
    its native code) gives a placement whose :attr:`RealPlacement.error` says so instead of ending this process.
    """
    if isolated:
        return _in_child(model, ep, workdir, keep)
    work = pathlib.Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    out = work / "context.onnx"
    for stale in work.glob("context*"):  # (an EP that takes nothing writes nothing: never read an old file)
        stale.unlink()
    so = ep.session_options()
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_file_path", str(out))
    so.add_session_config_entry("ep.context_embed_mode", "0")
    try:
        ep.session(str(model), so)
    except Exception as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        return RealPlacement([], set(), error=text)
    if not out.exists():
        return RealPlacement([], set(), context_model=None)
    written = onnx.load(str(out), load_external_data=False)
    partitions = []
    cpu = set()
    cpu_graph = []
    for node in written.graph.node:
        if node.op_type == EP_CONTEXT_OP and node.domain == EP_CONTEXT_DOMAIN:
            partitions.append(RealPartition(node.name, tuple(node.input), tuple(node.output),
                                            _ep_context_attributes(node)))
        else:
            cpu.add(node.name)
            cpu_graph.append(CpuNode(node.name, node.op_type, tuple(node.input), tuple(node.output)))
    if not keep:
        for path in work.glob("context*"):
            path.unlink()
        out = None  # type: ignore[assignment]
    return RealPlacement(partitions, cpu, context_model=out, cpu_graph=cpu_graph)


#: The error of a placement whose EP crashed the child process creating the session (``isolated``).
EP_CRASHED = "the execution provider crashed while the session was created"


def _child(model: str, ep: ExecutionProvider, workdir: str, keep: bool) -> None:
    import pickle

    placement = real_placement(model, ep, workdir, keep=keep)
    (pathlib.Path(workdir) / "placement.pickle").write_bytes(pickle.dumps(placement))


def _in_child(model: str | pathlib.Path, ep: ExecutionProvider, workdir: str | pathlib.Path,
              keep: bool) -> RealPlacement:
    import multiprocessing
    import pickle

    work = pathlib.Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    result = work / "placement.pickle"
    result.unlink(missing_ok=True)
    process = multiprocessing.get_context("spawn").Process(target=_child, args=(str(model), ep, str(work), keep))
    process.start()
    process.join()
    if process.exitcode != 0 or not result.exists():
        return RealPlacement([], set(), error=f"{EP_CRASHED} (exit code {process.exitcode})")
    placement = pickle.loads(result.read_bytes())  # (written by the child just now, from our own classes)
    result.unlink()
    return placement


@dataclasses.dataclass
class OracleResult:
    """A backend's prediction for one model next to the real EP's placement."""

    case: str
    backend: str
    ep: str
    #: Every node of the basic-level graph: name -> op label (``Conv``, ``com.microsoft:Gelu``...).
    nodes: dict[str, str]
    #: Predicted partitions (node names) and the backend's reasons for the nodes it leaves.
    predicted: list[list[str]]
    reasons: dict[str, str]
    predicted_outputs: list[tuple[str, ...]]
    real: RealPlacement
    #: The node of the basic-level graph producing each value.
    producers: dict[str, str] = dataclasses.field(default_factory=dict)
    #: The names of the graph's outputs.
    graph_outputs: frozenset[str] = frozenset()
    #: Nodes of the basic-level graph onnxruntime inserted after partitioning (:data:`INSERTED_CAST_PREFIX`):
    #: never offered to the EP, so never taken by it.
    inserted: frozenset[str] = frozenset()

    @property
    def built(self) -> bool:
        """Whether the real EP built a session for the model (``False``: :attr:`RealPlacement.error`)."""
        return self.real.error is None

    @property
    def predicted_nodes(self) -> set[str]:
        """The basic graph's nodes the backend predicts taken (the inserted Casts left out: they are in no
        real session when the EP is asked)."""
        return {n for p in self.predicted for n in p} - self.inserted

    @property
    def real_nodes(self) -> set[str]:
        """The basic graph's nodes the real EP took (gone from the EPContext model)."""
        if not self.real.partitions:
            return set()
        return set(self.nodes) - self.real.cpu_nodes - self.inserted

    @property
    def unexpected_cpu_nodes(self) -> set[str]:
        """Nodes of the real session's CPU part that are not in the basic graph (made by the EP's transforms)."""
        return self.real.cpu_nodes - set(self.nodes)

    @property
    def over_claimed(self) -> set[str]:
        """Predicted for the backend, left on the CPU by the real EP."""
        return self.predicted_nodes - self.real_nodes

    @property
    def under_claimed(self) -> set[str]:
        """Taken by the real EP, predicted to stay on the CPU."""
        return self.real_nodes - self.predicted_nodes

    @property
    def copy_partitions(self) -> list[RealPartition]:
        """Real partitions holding none of the basic graph's nodes: every value they produce is computed by a node
        the EP left on the CPU (ORT or the EP added a node of its own there, e.g. for a graph output)."""
        return [p for p in self.real.partitions
                if p.outputs and all(self.producers.get(o) in self.real.cpu_nodes for o in p.outputs)]

    def _keys(self, outputs: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
        # (a set: onnxruntime-qnn may list a graph output twice among a partition's outputs)
        return sorted(tuple(sorted({o for o in out if o in self.graph_outputs})) for out in outputs)

    @property
    def partitions_match(self) -> bool:
        """As many partitions, each producing the same graph outputs.

        (Values between partitions and the CPU are not compared by name: the layout transform of an NHWC EP
        may move where a transpose sits, and with it which value crosses the boundary.  A graph output a real
        partition lists as an input too is passed through, not produced by it: onnxruntime-qnn lists a graph
        output a CPU node makes among the outputs of a partition reading it.)"""
        copies = {id(p) for p in self.copy_partitions}
        real = [tuple(o for o in p.outputs if o not in p.inputs) for p in self.real.partitions if id(p) not in copies]
        return self._keys(self._predicted_outputs()) == self._keys(real)

    def _predicted_outputs(self) -> list[tuple[str, ...]]:
        """The outputs of each predicted partition holding more than inserted Casts."""
        return [out for nodes, out in zip(self.predicted, self.predicted_outputs, strict=True)
                if set(nodes) - self.inserted]

    @property
    def matches(self) -> bool:
        """Same nodes taken, same partitions (by their outputs); a session that failed to build never matches."""
        return (self.built and not self.over_claimed and not self.under_claimed and self.partitions_match
                and not self.unexpected_cpu_nodes)

    def diff(self) -> str:
        """What differs, one line per node or partition, naming each node and its op."""
        if not self.built:
            return f"{self.case}: the real {self.ep} did not build a session: {self.real.error}"
        lines = []
        for name in sorted(self.over_claimed):
            lines.append(f"- {self.nodes.get(name, '?')} node {name!r}: {self.backend} predicts it taken, the real "
                         f"{self.ep} leaves it on the CPU")
        for name in sorted(self.under_claimed):
            reason = self.reasons.get(name, "")
            lines.append(f"+ {self.nodes.get(name, '?')} node {name!r}: the real {self.ep} takes it, {self.backend} "
                         f"predicts the CPU" + (f" ({reason})" if reason else ""))
        for name in sorted(self.unexpected_cpu_nodes):
            lines.append(f"! node {name!r} runs on the CPU in the real session but is not in the basic-level graph")
        if not self.partitions_match:
            predicted = [sorted(o) for o in self._predicted_outputs()]
            copies = {id(p) for p in self.copy_partitions}
            real = [sorted(p.outputs) for p in self.real.partitions if id(p) not in copies]
            lines.append(f"~ partitions: {self.backend} predicts {len(predicted)} producing {predicted}, the real "
                         f"{self.ep} made {len(real)} producing {real}")
        if not lines:
            return f"{self.case}: {self.backend} matches the real {self.ep}"
        return f"{self.case}: {self.backend} vs the real {self.ep}:\n" + "\n".join("  " + line for line in lines)

    def as_dict(self) -> dict[str, Any]:
        return {"case": self.case, "backend": self.backend, "ep": self.ep, "built": self.built,
                "matches": self.matches, "nodes": len(self.nodes), "predicted_partitions": len(self.predicted),
                "real_partitions": len(self.real.partitions), "over_claimed": sorted(self.over_claimed),
                "under_claimed": sorted(self.under_claimed), "error": self.real.error}


def _named(model: Any) -> ir.Model:
    """A copy of *model* with every node named (an IR model given is not changed)."""
    from mobile_ep import model_io as mir
    from mobile_ep.testing.helpers import as_model

    m = mir.from_proto(ir.serde.serialize_model(model)) if isinstance(model, ir.Model) else as_model(model)
    seen: set[str] = set()
    for index, node in enumerate(m.graph):
        name = node.name or f"{node.op_type}_{index}"
        while name in seen:
            name = f"{name}_{index}"
        node.name = name
        seen.add(name)
    return m


def run_oracle(backend: Backend, model: Any, ep: ExecutionProvider, *, case: str | None = None,
               workdir: str | pathlib.Path | None = None, keep: bool = False, isolated: bool = False) -> OracleResult:
    """Compare *backend*'s prediction for *model* (an ``onnx.ModelProto``, a path or an IR model) with *ep*.

    The session is only created, never run.  ``workdir`` keeps the files (the named model
    ``model.onnx``, the basic-level ``optimized.onnx`` and, with ``keep``, the EPContext model).  ``isolated``:
    the real session in a child process (see :func:`real_placement`); a crash of the EP is then a result
    whose :attr:`OracleResult.built` is false, its error :data:`EP_CRASHED`.
    """
    from mobile_ep import model_io as mir
    from mobile_ep.passes import fold_constants

    label = case or (str(model) if isinstance(model, (str, pathlib.Path)) else "model")
    with tempfile.TemporaryDirectory(prefix="mobile-ep-oracle-") as tmp:
        work = pathlib.Path(workdir) if workdir is not None else pathlib.Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        path = mir.save(_named(model), work / "model.onnx")
        basic = mir.load(fold_constants.ort_optimized(path, work, backends=[backend]), check=False)
        found: Proposal = propose(basic, [backend])
        mine = found.per_backend[backend.name]
        nodes = {n.name or "": op_label(n) for n in basic.graph}
        reasons = {n.name or "": reason for n, reason in mine.rejected.items()}
        predicted = [[n.name or "" for n in p.nodes] for p in mine.partitions]
        outputs = [tuple(name for v in p.outputs for name in _through_inserted_casts(v)) for p in mine.partitions]
        placement = real_placement(path, ep, work, keep=keep, isolated=isolated)
        real = _named_cpu_nodes(_named_values(placement, basic.graph), basic.graph)
        producers = {v.name or "": n.name or "" for n in basic.graph for v in n.outputs}
        inserted = frozenset(name for name, op in nodes.items() if name.startswith(INSERTED_CAST_PREFIX) and op == "Cast")
        return OracleResult(label, backend.name, ep.name, nodes, predicted, reasons, outputs, real, producers,
                            frozenset(v.name or "" for v in basic.graph.outputs), inserted)


def _named_values(real: RealPlacement, graph: ir.Graph) -> RealPlacement:
    """The placement with the values at partition boundaries named as in *graph*.

    The EPContext model may name a value a partition produces (and its readers) after the node producing it
    (``Conv_3`` for the value ``conv2``): such a name is mapped back to the node's output.
    """
    values = {v.name for n in graph for v in n.outputs}
    by_node = {n.name: n.outputs[0].name for n in graph if n.name and len(n.outputs) == 1 and n.outputs[0].name}

    def value(name: str) -> str:
        return name if name in values or name not in by_node else by_node[name] or name

    real.partitions = [dataclasses.replace(p, inputs=tuple(value(n) for n in p.inputs),
                                           outputs=tuple(value(n) for n in p.outputs)) for p in real.partitions]
    return real


def _through_inserted_casts(value: ir.Value) -> list[str]:
    """*value*'s name and the names of the values Casts onnxruntime inserted after partitioning make of it (the
    EP's partition produces those under the name the Cast's output has in the basic-level graph)."""
    names = [value.name or ""]
    for user in value.consumers():
        if (user.name or "").startswith(INSERTED_CAST_PREFIX) and user.op_type == "Cast":
            names.extend(_through_inserted_casts(user.outputs[0]))
    return names


def _named_cpu_nodes(real: RealPlacement, graph: ir.Graph) -> RealPlacement:
    """The placement with each CPU node named as the basic-level graph's node producing the same values.

    Names are given to the nodes of the model before onnxruntime opens it, but the nodes onnxruntime makes
    while it opens the model (the body of a function op it inlines, ``_inlfunc_...`` values) have no name,
    in the basic-level graph as in the EPContext model: the values a node produces identify it in both.  A
    CPU node producing none of the basic graph's values keeps its name (``op type -> first output`` when it
    has none): a node the EP or ORT added.  A value the basic graph has a Cast onnxruntime inserted after
    partitioning produce (:data:`INSERTED_CAST_PREFIX`) is, in the EPContext model, produced by the node
    before that Cast; a value the basic graph has only as its float32 copy, by the node producing the copy.
    A node whose values the basic graph names otherwise (a Cast onnxruntime merged with one it inserted, which
    core puts back under a name of its own) is found by its op and inputs.
    """
    producers = {v.name: n for n in graph for v in n.outputs if v.name}

    def producer(value: str) -> str | None:
        node = producers.get(value, producers.get(INSERTED_CAST_PREFIX + value))  # (its float32 copy)
        while node is not None and (node.name or "").startswith(INSERTED_CAST_PREFIX) and node.inputs[0] is not None:
            node = producers.get(node.inputs[0].name or "")
        return None if node is None else node.name or ""

    by_inputs = {(n.op_type, tuple(v.name if v is not None else "" for v in n.inputs)): n.name or "" for n in graph}
    cpu = set()
    for node in real.cpu_graph:
        found = next((p for p in map(producer, node.outputs) if p is not None), None)
        if found is None:  # (a Cast core put back, under a name of its own)
            found = by_inputs.get((node.op_type, node.inputs))
        cpu.add(found if found is not None else node.name or f"{node.op_type} -> {next(iter(node.outputs), '')}")
    real.cpu_nodes = cpu
    return real
