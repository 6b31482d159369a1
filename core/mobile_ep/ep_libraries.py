"""ONNX Runtime plugin EP libraries: where they are, whether they load here, and which nodes they take.

Execution providers now ship as plugin libraries for a stock onnxruntime (``onnxruntime-qnn``,
``onnxruntime-ep-openvino``, ``onnxruntime-ep-webgpu``, ``onnxruntime-ggml``, ...): a package's function gives
the library's path, ``onnxruntime.register_execution_provider_library`` loads it, and the devices it serves
are listed by ``onnxruntime.get_ep_devices()``.  A session made with ``session.record_ep_graph_assignment_info=1``
says which nodes each EP took (``InferenceSession.get_provider_graph_assignment_info()``: one entry per
subgraph, i.e. per partition), without running the model.

A library is native code that may fail to load, hang or crash the process that loads it, so everything here
that touches one runs in a child process (``python -m mobile_ep.ep_libraries``) with a time limit: a crash
or a hang is an answer (:class:`EpFailure`), never the end of the run.

- :class:`EpLibrary`: one library as a package provides it (:data:`KNOWN_PACKAGES`) or as a path;
- :func:`probe`: whether it loads beside this onnxruntime, its EP names and devices, or a one-line reason;
- :func:`assignment`: the nodes the EP takes of a model, by partition, as onnxruntime reports them;
- :func:`compile_model`: ``onnxruntime.ModelCompiler`` writes the EPContext model of a model with the EP;
- :func:`compile_shared`: the same for several models in one child, sharing one EP context (``ep.share_ep_contexts``).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

__all__ = ["KNOWN_PACKAGES", "DEFAULT_PROVIDER_OPTIONS", "EpLibrary", "EpProbe", "EpFailure", "Assignment", "installed_libraries", "probe",
           "assignment", "validated_outputs", "compile_model", "compile_shared", "run_outputs", "node_names", "taken_nodes", "graph_nodes",
           "ep_names", "diagnostics"]

#: Packages known to provide a plugin EP library: distribution name -> (module, library-path function,
#: the EP names the library registers).
KNOWN_PACKAGES: Mapping[str, tuple[str, str, tuple[str, ...]]] = {
    "onnxruntime-qnn": ("onnxruntime_qnn", "get_library_path", ("QNNExecutionProvider",)),
    "onnxruntime-ep-openvino": ("onnxruntime_ep_openvino", "get_library_path", ("OpenVINOExecutionProvider",)),
    "onnxruntime-ep-webgpu": ("onnxruntime_ep_webgpu", "get_library_path", ("WebGpuExecutionProvider",)),
    "onnxruntime-ggml": ("onnxruntime_ggml", "library_path", ("ggml",)),
}
#: Provider options an EP needs to make a session at all, given unless the user sets them: the QNN EP has no
#: default backend (htp: the NPU, a simulator on x86-64 Linux) and finalizes many graphs on the simulator only
#: for a given SoC (60, as mobile-ep's qnn backend).
DEFAULT_PROVIDER_OPTIONS: Mapping[str, Mapping[str, str]] = {
    "QNNExecutionProvider": {"backend_type": "htp", "soc_model": "60"},
}

#: Seconds a child may take to load a library and list its devices, and to answer about one model.
PROBE_SECONDS = 120.0
SESSION_SECONDS = 1800.0


class EpFailure(Exception):
    """The EP library could not answer: it did not load, crashed, hung, or refused the model (one line);
    ``crashed``: the child process died of a signal (a crash of the EP's native code)."""

    def __init__(self, message: str, *, crashed: bool = False) -> None:
        super().__init__(message)
        self.crashed = crashed


@dataclasses.dataclass(frozen=True)
class EpLibrary:
    """A plugin EP library: the EP name to use from it, and where the library comes from.

    ``package``: the distribution that provides it (``""`` for a library given by path); ``function``:
    ``"module:function"`` giving its path, resolved when needed (importing a package may import onnxruntime).
    """

    ep_name: str
    package: str = ""
    function: str = ""
    path: str = ""

    @property
    def built_in(self) -> bool:
        """An EP built into the installed onnxruntime (no library to load: neither a path nor a function)."""
        return not (self.path or self.function)

    def library_path(self) -> str:
        if self.built_in:
            return ""
        if self.path:
            return self.path
        module, _, function = self.function.partition(":")
        try:
            return str(getattr(importlib.import_module(module), function)())
        except Exception as exc:
            raise EpFailure(f"{self.package or module}: cannot find its EP library: {_one_line(exc)}") from None

    @property
    def version(self) -> str:
        if not self.package:
            return ""
        try:
            return importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            return ""

    def needs(self) -> str:
        """The onnxruntime versions the package asks for (``""``: no requirement stated)."""
        if not self.package:
            return ""
        try:
            requires = importlib.metadata.requires(self.package) or []
        except importlib.metadata.PackageNotFoundError:
            return ""
        for requirement in requires:
            match = re.match(r"\s*onnxruntime\s*([<>=!~][^;]*)?(;.*)?$", requirement)
            if match and match.group(1) and not (match.group(2) or "").strip():
                return match.group(1).replace(" ", "")
        return ""


def installed_libraries() -> list[EpLibrary]:
    """The plugin EP libraries the installed packages of :data:`KNOWN_PACKAGES` provide (nothing is loaded)."""
    found = []
    for package, (module, function, names) in KNOWN_PACKAGES.items():
        try:
            importlib.metadata.distribution(package)
        except importlib.metadata.PackageNotFoundError:
            continue
        found.extend(EpLibrary(name, package, f"{module}:{function}") for name in names)
    return found


@dataclasses.dataclass(frozen=True)
class EpProbe:
    """What loading a library beside this onnxruntime showed: its devices, or why it cannot be used here."""

    onnxruntime: str
    devices: tuple[str, ...] = ()
    problem: str = ""

    @property
    def usable(self) -> bool:
        return not self.problem


def _version_problem(library: EpLibrary, onnxruntime_version: str) -> str:
    needs = library.needs()
    if not needs:
        return ""
    try:
        from packaging.specifiers import SpecifierSet
        from packaging.version import Version
    except ImportError:  # (cannot tell: loading it will)
        return ""
    if Version(onnxruntime_version) in SpecifierSet(needs):
        return ""
    return f"{library.package} {library.version} needs onnxruntime{needs}; this is onnxruntime {onnxruntime_version}"


_PROBES: dict[EpLibrary, EpProbe] = {}


def probe(library: EpLibrary) -> EpProbe:
    """Load *library* in a child process and list the devices of its EP (once per process for each library)."""
    if library in _PROBES:
        return _PROBES[library]
    import onnxruntime

    version = onnxruntime.__version__
    problem = _version_problem(library, version)
    if problem:
        result = EpProbe(version, problem=problem)
    else:
        try:
            answer = _child({"do": "probe", "ep": library.ep_name, "library": library.library_path()}, PROBE_SECONDS)
            devices = tuple(answer["devices"])
            result = EpProbe(version, devices, "" if devices else
                             f"the {library.ep_name} library loads but lists no device on this machine")
        except EpFailure as exc:
            result = EpProbe(version, problem=str(exc))
    _PROBES[library] = result
    return result


#: The name a library is registered under to see which EP names it lists (some take the name they are
#: registered under as their EP's name).
PROBE_NAME = "mobile-ep-probe"


def ep_names(path: str | os.PathLike, name: str = "") -> list[str]:
    """The EP names the library at *path* lists devices for, registered under *name* (default
    :data:`PROBE_NAME`), loaded in a child process."""
    return list(_child({"do": "names", "ep": name or PROBE_NAME, "library": str(path)}, PROBE_SECONDS)["names"])


@dataclasses.dataclass(frozen=True)
class Assignment:
    """The nodes an EP took of a model: the names of each partition's nodes, in onnxruntime's order, and their ops
    (``ops``: the same shape, ``Conv`` or ``com.microsoft:Gelu``; a node onnxruntime made itself, e.g. of a
    function's inlined body, has no name: its op and partition are what is known of it); and what the EP said of
    the others, where it says it in its log (:func:`diagnostics`): by node name, and for the model."""

    ep_name: str
    partitions: tuple[tuple[str, ...], ...]
    reasons: Mapping[str, str] = dataclasses.field(default_factory=dict)
    notes: tuple[str, ...] = ()
    ops: tuple[tuple[str, ...], ...] = ()
    #: The nodes other EPs (the CPU) took, as ``(name, op)``.
    others: tuple[tuple[str, str], ...] = ()
    #: The values made by the nodes the EP's op validation passed, where its log says (:func:`validated_outputs`).
    validated: frozenset[str] = frozenset()

    @property
    def nodes(self) -> frozenset[str]:
        return frozenset(name for partition in self.partitions for name in partition)


def assignment(model: str | os.PathLike, library: EpLibrary, options: Mapping[str, str],
               config: Mapping[str, str] | None = None) -> Assignment:
    """Which nodes of *model* (a file) the EP of *library* takes with provider *options* (and session *config*
    entries): a session at the basic optimization level, in a child process.  Raises :class:`EpFailure` when the
    session cannot be made (``crashed`` when the EP took the child down).

    The one way mobile-ep asks a real EP which nodes it takes: the ``ort:`` backends, ``check --against-ep`` and
    the test kit's oracle (:func:`mobile_ep.testing.oracle.real_placement`) all come here."""
    answer = _child({"do": "assign", "ep": library.ep_name, "library": library.library_path(),
                     "options": dict(options), "config": dict(config or {}), "model": str(model)}, SESSION_SECONDS)
    reasons, notes = diagnostics(answer.get("log", ""))
    return Assignment(library.ep_name, tuple(tuple(p) for p in answer["partitions"]), reasons, notes,
                      tuple(tuple(p) for p in answer.get("ops", ())), tuple(tuple(n) for n in answer.get("others", ())),
                      validated_outputs(answer.get("log", "")))


#: The QNN EP's op validation trace (at onnxruntime's verbose log level): a refused node unit, then its nodes'
#: names and the reason.
_QNN_FAILED = re.compile(r"Validation FAILED for \d+ nodes in \w+ \((?P<op>[^)]*)\) :\s*(?P<body>.*?)REASON : "
                         r"(?P<reason>[^\n]*)", re.S)
_QNN_NODE = re.compile(r"Node name: (?P<name>.*?) Node index:")
#: A warning an EP logs through onnxruntime (``[W:onnxruntime:, <source> ep] <message>``) that speaks of nodes.
_EP_WARNING = re.compile(r"\[W:onnxruntime:, [^\]]* ep\] (?P<message>[^\n]*?node[^\n]*?)(?:\x1b\[m)?$", re.I | re.M)


def diagnostics(log: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """What an EP's log says of the nodes it did not take: a reason by node name (the QNN EP's op validation
    trace), and lines about the model as a whole (an EP's warning that speaks of nodes, e.g. onnxruntime-ggml's
    "4 of 65 nodes use ops this provider lacks ...; claiming nothing")."""
    reasons: dict[str, str] = {}
    for failed in _QNN_FAILED.finditer(log):
        for node in _QNN_NODE.finditer(failed.group("body")):
            reasons.setdefault(node.group("name").strip(), " ".join(failed.group("reason").split()))
    notes = tuple(dict.fromkeys(" ".join(m.group("message").split()) for m in _EP_WARNING.finditer(log)))
    return reasons, notes


_QNN_VALIDATION = re.compile(r"LogNodeSupport\] Validation (PASSED|FAILED) ")
_QNN_OUTPUTS = re.compile(r"node_outputs:\n((?: name=\S+[^\n]*\n)+)")


def validated_outputs(log: str) -> frozenset[str]:
    """The values made by the nodes whose op validation passed, as the QNN EP's verbose log lists them (each QNN
    node it builds, with its output tensors, then the verdict): how a node onnxruntime made without a name (an
    inlined function body's) is told from another of its op."""
    made: set[str] = set()
    start = 0
    for verdict in _QNN_VALIDATION.finditer(log):
        if verdict.group(1) == "PASSED":
            for block in _QNN_OUTPUTS.finditer(log, start, verdict.start()):
                made.update(line.split()[0].removeprefix("name=") for line in block.group(1).splitlines())
        start = verdict.end()
    return frozenset(made)


def compile_model(model: str | os.PathLike, target: str | os.PathLike, library: EpLibrary,
                  options: Mapping[str, str]) -> bool:
    """Have the EP compile *model* into the EPContext model *target* (``onnxruntime.ModelCompiler``, context
    files beside it, ``embed_mode=0``); False when the EP took nothing (no file is written then)."""
    answer = _child({"do": "compile", "ep": library.ep_name, "library": library.library_path(),
                     "options": dict(options), "model": str(model), "target": str(target)}, SESSION_SECONDS)
    return bool(answer["written"])


def run_outputs(model: str | os.PathLike, library: EpLibrary, options: Mapping[str, str],
                feeds: Mapping[str, Any]) -> dict[str, Any]:
    """*model* run with the EP (on this machine: a simulator, or the CPU) on *feeds*, in a child process."""
    import tempfile

    import numpy as np

    with tempfile.TemporaryDirectory(prefix="mobile-ep-ep-run-") as work:
        inputs = pathlib.Path(work) / "inputs.npz"
        np.savez(inputs, **{k: np.asarray(v) for k, v in feeds.items()})
        outputs = pathlib.Path(work) / "outputs.npz"
        _child({"do": "run", "ep": library.ep_name, "library": library.library_path(), "options": dict(options),
                "model": str(model), "inputs": str(inputs), "outputs": str(outputs)}, SESSION_SECONDS)
        with np.load(outputs, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}


def node_names(reported: Iterable[str], known: Collection[str]) -> set[str]:
    """The nodes of a graph (named *known*) an EP reports under the names *reported*: a name of the graph, or
    one a layout-transforming EP (NHWC) gave the node it replaced it by, ``<name>_token_<n>``; the nodes the EP
    added itself (its layout's Transposes) are left out."""
    found = set()
    for name in reported:
        original = name if name in known else re.sub(r"_token_\d+$", "", name)
        if original in known:
            found.add(original)
    return found


def taken_nodes(answer: Assignment, graph: Sequence[tuple[Any, ...]]) -> dict[str, int]:
    """The nodes of a graph the EP took, each with the index of its partition in *answer*.

    *graph*: each node as ``(name, op, the names of the nodes it reads from and feeds[, the values it makes])``.
    onnxruntime reports the nodes of each EP by name: a node is known by its name, or by the name a
    layout-transforming EP (NHWC) replaced (``<name>_token_<n>``: :func:`node_names`).  A node reported by neither
    EP under a name of the graph (made without a name, or one a layout transform re-made around the Transposes it
    moves) is matched by its op with the unknown nodes each side reports: the side that reports an unknown node of
    that op, unless the EP's log has the node's op validation passing (:attr:`Assignment.validated`, by the values
    it makes: the EP) or says of other nodes only (the CPU); both: the side of most of its neighbours; neither:
    the EP (the node is gone from the EP's session, folded into what it took).  A node the EP took that is left
    over takes the place of an unknown node of an op the graph does not have (a function node the EP took whole,
    its body inlined in *graph*).  Nodes the EP added (its layout Transposes) are left out."""
    names = {item[0] for item in graph}
    made = {item[0]: item[3] for item in graph if len(item) > 3}
    graph_ops = {item[1] for item in graph}
    ops = answer.ops or tuple(("",) * len(p) for p in answer.partitions)
    where: dict[str, int] = {}
    ep_unknown: dict[str, list[int]] = {}
    for index, (partition, kinds) in enumerate(zip(answer.partitions, ops, strict=True)):
        for name, op in zip(partition, kinds, strict=True):
            found = node_names([name], names) if name else set()
            if found:
                where[next(iter(found))] = index
            else:
                ep_unknown.setdefault(op, []).append(index)
    cpu = {next(iter(node_names([name], names))) for name, _ in answer.others if name and node_names([name], names)}
    cpu_unknown: dict[str, int] = {}
    for name, op in answer.others:
        if not (name and node_names([name], names)):
            cpu_unknown[op] = cpu_unknown.get(op, 0) + 1
    neighbours = {item[0]: item[2] for item in graph}
    orphans = [index for op, indexes in ep_unknown.items() if op not in graph_ops for index in indexes]
    left = [(item[0], item[1]) for item in graph if item[0] not in where and item[0] not in cpu]
    while left:
        def side(item: tuple[str, str]) -> int:  # (>0: the CPU, <0: the EP, 0: cannot tell yet)
            name, op = item
            on_ep, on_cpu = bool(ep_unknown.get(op)), cpu_unknown.get(op, 0) > 0
            if answer.validated and made.get(name):
                passed = any(value in answer.validated for value in made[name])
                if passed and (on_ep or orphans):
                    return -999
                if not passed and on_cpu:
                    return 999
            if on_ep != on_cpu:
                return 1000 if on_cpu else -1000
            return sum(n in cpu for n in neighbours[name]) - sum(n in where for n in neighbours[name]) if on_ep else -1
        name, op = best = max(left, key=lambda item: abs(side(item)))
        left.remove(best)
        if side(best) > 0:
            cpu_unknown[op] -= 1
            cpu.add(name)
        elif ep_unknown.get(op):
            where[name] = ep_unknown[op].pop(0)
        elif orphans and any(value in answer.validated for value in made.get(name, ())):
            where[name] = orphans.pop(0)
        elif answer.partitions:
            where[name] = -1  # (gone from the EP's session: placed with a neighbour below)
    for name in [n for n, index in where.items() if index < 0]:
        where[name] = next((where[n] for n in neighbours[name] if where.get(n, -1) >= 0), 0)
    return where


def graph_nodes(nodes: Iterable[Any]) -> list[tuple[str, str, set[str], set[str]]]:
    """*nodes* (``onnx_ir`` nodes of one graph) as :func:`taken_nodes` reads them."""
    def label(node: Any) -> str:
        return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"

    def around(node: Any) -> set[str]:
        near = {v.producer().name or "" for v in node.inputs if v is not None and v.producer() is not None}
        return near | {u.name or "" for v in node.outputs for u in v.consumers()}

    return [(node.name or "", label(node), around(node), {v.name or "" for v in node.outputs}) for node in nodes]


# -- the child process ----------------------------------------------------------------------------------
_SIGNALS = {-11: "SIGSEGV", -6: "SIGABRT", -7: "SIGBUS", -4: "SIGILL", -8: "SIGFPE", -9: "SIGKILL"}


def _child(request: dict, seconds: float) -> dict:
    """Run *request* in ``python -m mobile_ep.ep_libraries``; its JSON answer, or :class:`EpFailure`."""
    what = {"probe": "loading the library", "names": "loading the library", "assign": "creating a session", "compile": "compiling",
            "run": "running the model", "compile_shared": "compiling graphs that share weights"}[request["do"]]
    try:
        proc = subprocess.run([sys.executable, "-m", "mobile_ep.ep_libraries"], input=json.dumps(request),
                              capture_output=True, text=True, timeout=seconds,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except subprocess.TimeoutExpired:
        raise EpFailure(f"{request['ep']}: no answer after {seconds:.0f} s while {what}") from None
    if proc.returncode < 0:
        signal_name = _SIGNALS.get(proc.returncode, f"signal {-proc.returncode}")
        raise EpFailure(f"{request['ep']} crashed ({signal_name}) while {what}", crashed=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = [line for line in proc.stderr.splitlines() if line.strip()][-1:] or ["no message"]
        raise EpFailure(f"{request['ep']} failed while {what} (exit {proc.returncode}): {_one_line(tail[0])}")
    answer = json.loads(lines[-1])
    if "error" in answer:
        raise EpFailure(f"{request['ep']}: {answer['error']}")
    return answer


def _session_options(request: dict) -> tuple[Any, list, list | None]:
    """The basic-level ``SessionOptions`` with the EP of *request*, the EP's devices, and the providers to pass
    to the session (``None``: the devices added to the options; a built-in EP: by name, then the CPU)."""
    import onnxruntime as ort

    from mobile_ep import sessions

    so = sessions.options(level="basic", config={k: str(v) for k, v in request.get("config", {}).items()})
    options = {k: str(v) for k, v in request.get("options", {}).items()}
    if not request["library"]:  # (an EP built into the installed onnxruntime)
        found = request["ep"] in ort.get_available_providers()
        return so, [request["ep"]] if found else [], [(request["ep"], options), "CPUExecutionProvider"]
    try:
        ort.register_execution_provider_library(request["ep"], request["library"])
    except Exception as exc:
        if "already registered" not in str(exc):
            raise
    devices = [d for d in ort.get_ep_devices() if d.ep_name == request["ep"]]
    if devices:
        so.add_provider_for_devices(devices[:1], options)
    return so, devices, None


def _serve(request: dict) -> dict:
    import onnxruntime as ort

    if request["do"] == "names":
        before = {d.ep_name for d in ort.get_ep_devices()}
        ort.register_execution_provider_library(request["ep"], request["library"])
        return {"names": sorted({d.ep_name for d in ort.get_ep_devices()} - before)}
    if request["do"] == "probe":
        _, devices, _ = _session_options(request)
        return {"devices": [f"{d.device.type.name.lower()} ({d.ep_vendor})" for d in devices]}
    from mobile_ep import sessions

    so, devices, providers = _session_options(request)
    if not devices:
        return {"error": f"onnxruntime lists no device for {request['ep']}"}
    if request["do"] == "assign":
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
        so.log_severity_level = 0  # (an EP's reasons for the nodes it leaves are in its verbose log)
        log = tempfile.TemporaryFile(mode="w+b")
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)  # (onnxruntime logs to the process's stderr)
        try:
            session = sessions.open_session(request["model"], so, providers=providers)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        log.seek(0)
        subgraphs = session.get_provider_graph_assignment_info()
        taken = [subgraph.get_nodes() for subgraph in subgraphs if subgraph.ep_name == request["ep"]]
        label = lambda n: n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}:{n.op_type}"  # noqa: E731
        return {"partitions": [[n.name for n in nodes] for nodes in taken],
                "ops": [[label(n) for n in nodes] for nodes in taken],
                "others": [[n.name, label(n)] for s in subgraphs if s.ep_name != request["ep"] for n in s.get_nodes()],
                "log": log.read().decode(errors="replace")}
    if request["do"] == "compile":
        target = pathlib.Path(request["target"])
        so.add_session_config_entry("ep.context_embed_mode", "0")
        compiler = sessions.model_compiler(so, request["model"], embed_compiled_data_into_model=False)
        try:
            compiler.compile_to_file(str(target))
        except Exception as exc:
            if "no nodes" in str(exc).lower() or "not compiled" in str(exc).lower():
                return {"written": False}
            raise
        return {"written": target.exists()}
    if request["do"] == "run":
        import numpy as np

        session = sessions.open_session(request["model"], so, providers=providers)
        with np.load(request["inputs"], allow_pickle=False) as data:
            feeds = {name: data[name] for name in data.files}
        names = [o.name for o in session.get_outputs()]
        np.savez(request["outputs"], **dict(zip(names, session.run(names, feeds), strict=True)))
        return {"outputs": names}
    if request["do"] == "compile_shared":
        return _compile_shared(request)
    raise ValueError(f"unknown request {request['do']!r}")


def _one_line(exc: object) -> str:
    """*exc* as one line; of onnxruntime's nested "[ONNXRuntimeError] : 1 : FAIL : <source>:<line> <function>
    [ONNXRuntimeError] : ..." messages, the innermost cause."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return re.split(r"\[ONNXRuntimeError\] : \d+ : \w+ : ", text)[-1].strip() or text


def _main() -> None:  # pragma: no cover - runs in the child
    request = json.loads(sys.stdin.read())
    try:
        answer = _serve(request)
    except Exception as exc:
        answer = {"error": _one_line(exc)}
    sys.stdout.write("\n" + json.dumps(answer) + "\n")
    sys.stdout.flush()


def compile_shared(models: Iterable[tuple[str | os.PathLike, str | os.PathLike]], library: EpLibrary,
                   options: Mapping[str, str]) -> list[bool]:
    """Have the EP compile each (model, target) pair, in order and in ONE child process, into EPContext models
    (``embed_mode=0``) whose contexts it may share: onnxruntime's session config ``ep.share_ep_contexts=1`` on
    every compile and ``ep.stop_share_ep_contexts=1`` on the last (the EP keeps one context across the
    sessions, and writes the graphs' binaries into the first one's context file); EP-specific options that make
    the context share weights go in *options* (QNN: ``enable_htp_weight_sharing=1``).  For each pair, whether a
    file was written (False: the EP took nothing of that model)."""
    pairs = [[str(m), str(t)] for m, t in models]
    answer = _child({"do": "compile_shared", "ep": library.ep_name, "library": library.library_path(),
                     "options": dict(options), "models": pairs}, SESSION_SECONDS)
    return [bool(w) for w in answer["written"]]


def _compile_shared(request: dict) -> dict:  # pragma: no cover - runs in the child
    from mobile_ep import sessions

    written = []
    pairs = request["models"]
    for index, (model, target) in enumerate(pairs):
        so, _, _ = _session_options(request)
        so.add_session_config_entry("ep.context_embed_mode", "0")
        so.add_session_config_entry("ep.share_ep_contexts", "1")
        if index == len(pairs) - 1:
            so.add_session_config_entry("ep.stop_share_ep_contexts", "1")
        pathlib.Path(target).unlink(missing_ok=True)
        compiler = sessions.model_compiler(so, model, embed_compiled_data_into_model=False)
        try:
            compiler.compile_to_file(target)
        except Exception as exc:
            if "no nodes" not in str(exc).lower() and "not compiled" not in str(exc).lower():
                raise
        written.append(pathlib.Path(target).exists())
    return {"written": written}


if __name__ == "__main__":  # pragma: no cover
    _main()
