"""The oracle: a backend's prediction against the real ONNX Runtime execution provider it models.

A backend predicts which nodes an execution provider (EP) takes.  When that EP runs on the host (QNN's HTP
simulator on x86-64 Linux, XNNPACK, a vendor's plugin EP...), the prediction can be checked against the
real thing, case by case.  :func:`run_oracle` does, for one model:

1. the model is written with every node named (names are how the two placements meet) and opened with
   onnxruntime's basic optimizations on the CPU: that basic-level graph is what the EP is asked about;
2. the backend's prediction: :func:`mobile_ep.partitioning.propose.propose` over that graph (ORT's
   partitioning, no cost model: the EP has none);
3. the real placement: the EP is asked which nodes it takes of the named model, as the ``ort:`` backends and
   ``check --against-ep`` ask it (:func:`mobile_ep.ep_libraries.assignment`: a session at the basic level in a
   child process, with ``session.record_ep_graph_assignment_info=1``; onnxruntime reports each partition's
   nodes by name and op, and the CPU's).  The nodes reported are named as in the basic-level graph
   (:func:`mobile_ep.ep_libraries.taken_nodes`, as the ``ort:`` backends do): by name, by the name a
   layout-transforming EP replaced, and a node reported under no name of the graph (a function op's inlined
   body, a node a layout transform re-made) by its op.  A partition's outputs are the values its nodes produce that are
   graph outputs or read outside it.  (No EPContext model is written: onnxruntime-qnn fails some sessions
   only when asked for one.)
4. the two are compared: nodes predicted but left on the CPU, nodes taken but not predicted (with the
   backend's reason), and the partitions: as many, each producing the same graph outputs (a real partition
   made only of nodes the EP added, e.g. its layout Transposes, is left out).  The Casts
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

import onnx_ir as ir

from mobile_ep.contract import Backend, op_label
from mobile_ep.partitioning.propose import Proposal, propose
from mobile_ep.passes.fold_constants import INSERTED_CAST_PREFIX

__all__ = [
    "EP_CRASHED",
    "ExecutionProvider",
    "RealPartition",
    "RealPlacement",
    "OracleResult",
    "register_ep_library",
    "real_placement",
    "run_oracle",
]

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
    """An onnxruntime execution provider as the oracle asks it.

    ``library``: for a plugin EP, the shared library to register (the devices whose ``ep_name`` is
    ``name`` are then used); ``None`` for an EP built into the installed onnxruntime.
    """

    name: str
    options: Mapping[str, str] = dataclasses.field(default_factory=dict)
    library: str | None = None
    session_config: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def ep_library(self) -> Any:
        """This EP as :mod:`mobile_ep.ep_libraries` asks it (:class:`mobile_ep.ep_libraries.EpLibrary`)."""
        from mobile_ep.ep_libraries import EpLibrary

        return EpLibrary(self.name, path=self.library or "")

    def session_options(self) -> Any:
        """A ``SessionOptions`` at the basic optimization level with this EP added (registering it first), for a
        session made in this process (:meth:`session`: compiling, running a compiled model)."""
        import onnxruntime as ort

        from mobile_ep import sessions

        so = sessions.options(level="basic", config={k: str(v) for k, v in self.session_config.items()})
        if self.library is not None:
            register_ep_library(self.name, self.library)
            devices = [d for d in ort.get_ep_devices() if d.ep_name == self.name][:1]
            if not devices:
                raise RuntimeError(f"onnxruntime lists no device for the execution provider {self.name}")
            so.add_provider_for_devices(devices, {k: str(v) for k, v in self.options.items()})
        return so

    def session(self, model: str | bytes, so: Any = None) -> Any:
        """An ``InferenceSession`` of *model* (a path or serialized bytes) on this EP, made in this process through
        :func:`mobile_ep.sessions.open_session`."""
        from mobile_ep import sessions

        so = so if so is not None else self.session_options()
        providers = None if self.library is not None else [(self.name, dict(self.options)), "CPUExecutionProvider"]
        return sessions.open_session(model, so, providers=providers)


@dataclasses.dataclass(frozen=True)
class RealPartition:
    """One partition the real EP took: its nodes (named as in the basic-level graph) and the values it reads and
    produces (as the basic-level graph has them)."""

    nodes: tuple[str, ...]
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()


@dataclasses.dataclass
class RealPlacement:
    """What the real EP took of a model: its partitions and the nodes left on the CPU, or the session's error.

    ``reported``: the EP's answer as onnxruntime gave it (:class:`mobile_ep.ep_libraries.Assignment`: node names
    and ops by partition), before :func:`run_oracle` names its nodes as the basic-level graph does."""

    partitions: list[RealPartition]
    cpu_nodes: set[str]
    error: str | None = None
    reported: Any = None


#: The error of a placement whose EP crashed the child process creating the session.
EP_CRASHED = "the execution provider crashed while the session was created"


def real_placement(model: str | pathlib.Path, ep: ExecutionProvider) -> RealPlacement:
    """Which nodes of *model* (a file) *ep* takes, as onnxruntime reports them (the session config entry
    ``session.record_ep_graph_assignment_info``), asked by :func:`mobile_ep.ep_libraries.assignment` in a child
    process at the basic level: an EP that crashes gives a placement whose :attr:`RealPlacement.error` starts
    with :data:`EP_CRASHED`, a session that fails one with onnxruntime's message.  The partitions hold the
    names the EP reports (:func:`run_oracle` maps them onto the basic-level graph)."""
    from mobile_ep import ep_libraries

    try:
        answer = ep_libraries.assignment(model, ep.ep_library(), ep.options, ep.session_config)
    except ep_libraries.EpFailure as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        return RealPlacement([], set(), error=f"{EP_CRASHED}: {text}" if exc.crashed else text)
    return RealPlacement([RealPartition(p) for p in answer.partitions], set(), reported=answer)


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
        """The basic graph's nodes the real EP took."""
        return {n for p in self.real.partitions for n in p.nodes} - self.inserted

    @property
    def over_claimed(self) -> set[str]:
        """Predicted for the backend, left on the CPU by the real EP."""
        return self.predicted_nodes - self.real_nodes

    @property
    def under_claimed(self) -> set[str]:
        """Taken by the real EP, predicted to stay on the CPU."""
        return self.real_nodes - self.predicted_nodes

    def _keys(self, outputs: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
        return sorted(tuple(sorted({o for o in out if o in self.graph_outputs})) for out in outputs)

    @property
    def partitions_match(self) -> bool:
        """As many partitions, each producing the same graph outputs.

        (Values between partitions and the CPU are not compared by name: the layout transform of an NHWC EP
        may move where a transpose sits, and with it which value crosses the boundary.)"""
        return self._keys(self._predicted_outputs()) == self._keys([p.outputs for p in self.real.partitions])

    def _predicted_outputs(self) -> list[tuple[str, ...]]:
        """The outputs of each predicted partition holding more than inserted Casts."""
        return [out for nodes, out in zip(self.predicted, self.predicted_outputs, strict=True)
                if set(nodes) - self.inserted]

    @property
    def matches(self) -> bool:
        """Same nodes taken, same partitions (by their outputs); a session that failed to build never matches."""
        return self.built and not self.over_claimed and not self.under_claimed and self.partitions_match

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
        if not self.partitions_match:
            predicted = [sorted(o) for o in self._predicted_outputs()]
            real = [sorted(p.outputs) for p in self.real.partitions]
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
               workdir: str | pathlib.Path | None = None) -> OracleResult:
    """Compare *backend*'s prediction for *model* (an ``onnx.ModelProto``, a path or an IR model) with *ep*.

    The session is only created, never run, in a child process (:func:`real_placement`): a crash of the EP is
    a result whose :attr:`OracleResult.built` is false, its error starting with :data:`EP_CRASHED`.
    ``workdir`` keeps the files (the named model ``model.onnx``, the basic-level ``optimized.onnx``).
    """
    from mobile_ep import model_io as mir
    from mobile_ep.passes import contrib_qdq, fold_constants

    label = case or (str(model) if isinstance(model, (str, pathlib.Path)) else "model")
    with tempfile.TemporaryDirectory(prefix="mobile-ep-oracle-") as tmp:
        work = pathlib.Path(workdir) if workdir is not None else pathlib.Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        named = _named(model)
        path = mir.save(named, work / "model.onnx")
        basic = mir.load(fold_constants.ort_optimized(path, work, backends=[backend]), check=False)
        contrib_qdq.standardize(basic)  # (as the commands read the model: mobile_ep.passes.load)
        found: Proposal = propose(basic, [backend])
        mine = found.per_backend[backend.name]
        nodes = {n.name or "": op_label(n) for n in basic.graph}
        reasons = {n.name or "": reason for n, reason in mine.rejected.items()}
        predicted = [[n.name or "" for n in p.nodes] for p in mine.partitions]
        outputs = [tuple(name for v in p.outputs for name in _through_inserted_casts(v)) for p in mine.partitions]
        real = _on_basic_graph(real_placement(path, ep), basic.graph)
        inserted = frozenset(name for name, op in nodes.items() if name.startswith(INSERTED_CAST_PREFIX) and op == "Cast")
        return OracleResult(label, backend.name, ep.name, nodes, predicted, reasons, outputs, real,
                            frozenset(v.name or "" for v in basic.graph.outputs), inserted)


def _on_basic_graph(real: RealPlacement, graph: ir.Graph) -> RealPlacement:
    """The placement with its partitions' nodes named as in the basic-level *graph*
    (:func:`mobile_ep.ep_libraries.taken_nodes`), each with the values it reads and produces there, and the
    graph's other nodes on the CPU; a partition of nothing but nodes the EP added is left out."""
    from mobile_ep.ep_libraries import graph_nodes, taken_nodes

    if real.reported is None:
        return real
    nodes = [n for n in graph if not (n.name or "").startswith(INSERTED_CAST_PREFIX)]
    where = taken_nodes(real.reported, graph_nodes(nodes))
    partitions = [{n for n, i in where.items() if i == index} for index in range(len(real.reported.partitions))]
    real.partitions = [_partition(graph, p) for p in partitions if p]
    real.cpu_nodes = {n.name or "" for n in graph} - set(where)
    return real


def _partition(graph: ir.Graph, names: set[str]) -> RealPartition:
    """The partition of *graph*'s nodes *names*: the values it reads from outside, and those it produces that are
    graph outputs or read outside (through the Casts onnxruntime inserted after partitioning)."""
    members = [n for n in graph if (n.name or "") in names]
    outputs = set(graph.outputs)
    inputs = {v.name or "" for n in members for v in n.inputs
              if v is not None and (v.producer() is None or (v.producer().name or "") not in names)}
    made = [name for n in members for v in n.outputs
            if v in outputs or any((u.name or "") not in names for u in v.consumers())
            for name in _through_inserted_casts(v)]
    return RealPartition(tuple(sorted(names)), tuple(sorted(inputs)), tuple(dict.fromkeys(made)))


def _through_inserted_casts(value: ir.Value) -> list[str]:
    """*value*'s name and the names of the values Casts onnxruntime inserted after partitioning make of it (the
    EP's partition produces those under the name the Cast's output has in the basic-level graph)."""
    names = [value.name or ""]
    for user in value.consumers():
        if (user.name or "").startswith(INSERTED_CAST_PREFIX) and user.op_type == "Cast":
            names.extend(_through_inserted_casts(user.outputs[0]))
    return names
