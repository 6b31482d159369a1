"""A backend whose placement is a real ONNX Runtime plugin EP's own.

``check --ep ort:<EP>`` asks the EP itself: the model mobile-ep prepared (basic optimization level, ``--shape``,
``--const``) is opened in a session with the EP's library and ``session.record_ep_graph_assignment_info=1``,
and the nodes the EP took are the backend's claims (:func:`mobile_ep.ep_libraries.assignment`, in a child
process: a library that crashes or hangs costs the answer, not the run).  Every other node stays on the CPU
with the reason "not taken by <EP> (the EP gives no reason)".  The claims are grouped into partitions by
ONNX Runtime's own algorithm, as the EP's are.  Rewrites: every exact rewrite of mobile-ep's library is tried
on the nodes the EP leaves on the CPU, and one is kept only when the EP, asked again about the rewritten
graph, takes more (the EP is the judge of every graph it is given).

``convert --ep ort:<EP> --compile`` has onnxruntime's ``ModelCompiler`` write the EPContext model (its context
files beside it, ``embed_mode=0``), then runs it where the EP runs on this machine (QNN's HTP simulator, a CPU
EP) against onnxruntime's CPU result within :data:`TOLERANCE`, or says that it could not run it.

Provider options come through ``-O`` as for every backend: ``-O ort:QNNExecutionProvider.soc_model=60``; a
library no known package provides: ``--ep ort -O ort.library=/path/libmy_ep.so`` (its EP name, when it
registers several: ``-O ort.ep_name=MyEP``).
"""

from __future__ import annotations

import hashlib
import pathlib
import tempfile
from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

import numpy as np
import onnx_ir as ir

from mobile_ep import (
    SUPPORTED,
    Backend,
    NodeUnit,
    Rewrite,
    RuleContext,
    RuleRegistry,
    Support,
    VerificationError,
    runtime,
)
from mobile_ep import ep_libraries as libraries
from mobile_ep import model_io as mir
from mobile_ep.contract.compile import CompileError
from mobile_ep.errors import UsageError
from mobile_ep.passes import fuse_cpu, to_epcontext
from mobile_ep.passes.to_epcontext import CompiledNode, CompileResult

__all__ = ["PluginEpBackend", "AnyLibraryBackend", "backend_class", "plugin_ep_backends", "TOLERANCE"]

#: (atol, rtol) of a compiled model's outputs against onnxruntime's CPU result: an EP may compute float32
#: graphs in float16 (the QNN HTP does unless told otherwise), whose rounding this allows.
TOLERANCE = (2e-2, 2e-2)
#: Option keys mobile-ep reads itself (not passed to the EP).
OWN_OPTIONS = ("library", "ep_name")


class PluginEpBackend(Backend):
    """The backend ``ort:<EP>`` of one plugin EP library (a subclass per library: :func:`backend_class`)."""

    library: ClassVar[libraries.EpLibrary]
    version = "0.1.0"
    preferred_layout = "NCHW"  # (an EP that wants NHWC transforms the layout itself)
    plugin_api = 1
    needs_seconds = libraries.SESSION_SECONDS
    selected_by_default = False  # (used when named: it loads the EP's library and asks it)
    answers_whole_graph = True

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(MappingProxyType(dict(options or {})))
        self._answers: dict[str, libraries.Assignment | str] = {}

    @property
    def description(self) -> str:  # type: ignore[override]  (read when listed: the library is loaded then)
        lib = self.library
        found = libraries.probe(lib)
        origin = f"{lib.package} {lib.version}" if lib.package else lib.path
        where = f"devices: {', '.join(found.devices)}" if found.usable else f"cannot be used here: {found.problem}"
        return (f"{lib.ep_name} (ONNX Runtime plugin EP, from {origin}, with onnxruntime {found.onnxruntime}; "
                f"{where}): the nodes the real EP takes, asked of it; compiled by onnxruntime's ModelCompiler")

    def build_rules(self) -> RuleRegistry:
        return RuleRegistry()

    def configure(self, values: Mapping[str, str]) -> Backend:
        if not values:
            return self
        own = [key for key in values if key in OWN_OPTIONS]
        if own:
            raise UsageError(f"{self.name}: option {own[0]!r} is for --ep ort (a library given by path)")
        return type(self)({**self.options, **values})

    def describe_options(self) -> list[tuple[str, str, str]]:
        defaults = libraries.DEFAULT_PROVIDER_OPTIONS.get(self.library.ep_name, {})
        return [*((key, value, f"provider option of {self.library.ep_name}") for key, value in defaults.items()),
                ("KEY", "", f"any provider option of {self.library.ep_name}, passed to it as given "
                            f"(e.g. -O {self.name}.KEY=VALUE)")]

    def provider_options(self) -> dict[str, str]:
        """The EP's provider options: those given with ``-O``, over the ones it needs to make a session at all
        (:data:`mobile_ep.ep_libraries.DEFAULT_PROVIDER_OPTIONS`)."""
        defaults = libraries.DEFAULT_PROVIDER_OPTIONS.get(self.library.ep_name, {})
        return {**defaults, **{str(k): str(v) for k, v in self.options.items()}}

    def rewrites(self) -> tuple[Rewrite, ...]:
        """Every exact rewrite of mobile-ep's library (:mod:`mobile_ep.rewrites`; none approximate), in its
        order: the EP is asked again about the graph each one rewrites, and it is kept only where the EP then
        leaves fewer nodes on the CPU in no more partitions."""
        from mobile_ep import rewrites as library

        made = []
        for name in library.__all__:
            kind = getattr(library, name)
            if isinstance(kind, type) and issubclass(kind, Rewrite) and kind.max_abs_error is None:
                try:
                    made.append(kind())
                except TypeError:  # (one that takes settings: not tried blind)
                    continue
        return tuple(made)

    # -- placement ------------------------------------------------------------------------------
    def supports(self, unit: NodeUnit, ctx: RuleContext) -> Support:
        return SUPPORTED  # (what the EP does not take is excluded: excluded_nodes)

    def excluded_nodes(self, graph: ir.Graph, ctx: RuleContext) -> Mapping[ir.Node, str]:
        if graph is not ctx.model.graph:
            return {}
        answer = self._answer(ctx.model)
        if isinstance(answer, str):
            return dict.fromkeys(graph, answer)
        ep = self.library.ep_name
        known = {node.name for node in graph}
        taken = set(libraries.taken_nodes(answer, libraries.graph_nodes(graph)))
        reasons = {next(iter(libraries.node_names([name], known)), name): why for name, why in answer.reasons.items()}
        otherwise = f"not taken by {ep}; it says: {'; '.join(answer.notes)}" if answer.notes else \
            f"not taken by {ep} (the EP gives no reason)"
        return {node: f"{ep}: {reasons[node.name]}" if node.name in reasons else otherwise
                for node in graph if node.name not in taken}

    def _answer(self, model: ir.Model) -> libraries.Assignment | str:
        """What the EP takes of *model*, or why it cannot say (asked once per graph)."""
        found = libraries.probe(self.library)
        if not found.usable:
            return f"{self.name} cannot be used here: {found.problem}"
        with tempfile.TemporaryDirectory(prefix="mobile-ep-ort-") as work:
            # a work copy beside the weights it references (none are copied), every node named
            folder = fuse_cpu.weights_folder(model, pathlib.Path(work))
            path = folder / f"{pathlib.Path(work).name}.onnx"
            try:
                fuse_cpu.save_work_copy(model, path)
                key = hashlib.sha256(path.read_bytes()).hexdigest()
                if key not in self._answers:
                    try:
                        self._answers[key] = libraries.assignment(path, self.library, self.provider_options())
                    except libraries.EpFailure as exc:
                        self._answers[key] = f"{self.library.ep_name} fails to build a session of this model: {exc}"
            finally:
                for written in (path, path.with_name(path.name + ".data")):
                    written.unlink(missing_ok=True)
        return self._answers[key]

    # -- compile --------------------------------------------------------------------------------
    def compile_with_ep(self, source, target, workdir, options=None) -> CompileResult:
        """``convert --compile``: the EP's own EPContext model of *source*, run where the EP runs here."""
        source, target = pathlib.Path(source), pathlib.Path(target)
        pathlib.Path(workdir).mkdir(parents=True, exist_ok=True)
        original = mir.load(source, check=False, shapes=False)
        result = CompileResult(self.name, nodes=len(original.graph))
        try:
            written = libraries.compile_model(source, target, self.library, self.provider_options())
        except libraries.EpFailure as exc:
            if "NULL EPContext node" in str(exc):  # (an EP that compiles for running, never for a file)
                raise CompileError(f"{source}: {self.library.ep_name} does not write EPContext models (it returns no "
                                   "EPContext node): --compile is not available with it; the .onnx and .ort are "
                                   "what an app loads") from None
            raise CompileError(f"{source}: {self.library.ep_name} could not compile the model: {exc}") from None
        if not written:
            return result
        result.path = str(target)
        with to_epcontext._binary_attributes_allowed():
            compiled = mir.load(target, check=False, shapes=False)
        left = {n.name for n in compiled.graph}
        taken = [n.name or "" for n in original.graph if n.name not in left]
        contexts = [n for n in compiled.graph if to_epcontext.is_context_node(n)]
        files = sorted({target.parent / _text(n, "ep_cache_context") for n in contexts
                        if _text(n, "ep_cache_context")})
        result.bundle = ",".join(str(f) for f in files)
        checked = self._check(source, target)
        for i, node in enumerate(contexts):
            result.compiled.append(CompiledNode(
                node.name or "", _text(node, "partition_name") or node.name or "", self.name, "ep-context",
                taken if i == 0 else [], [v.name or "" for v in node.inputs if v is not None],
                [v.name or "" for v in node.outputs], sum(f.stat().st_size for f in files if f.exists()),
                {"source": _text(node, "source"), "ep": self.library.ep_name, **checked}))
        return result

    def _check(self, source: pathlib.Path, target: pathlib.Path) -> dict[str, str]:
        """The compiled model run with the EP against onnxruntime's CPU EP on *source* (what the metadata says)."""
        atol, rtol = TOLERANCE
        feeds = runtime.make_inputs(source, seed=0)
        reference = runtime.run(source, feeds)
        try:
            got = libraries.run_outputs(target, self.library, self.provider_options(), feeds)
        except libraries.EpFailure as exc:
            return {"verified": "no", "not_verified": f"could not run the compiled model here: {exc}"}
        worst = 0.0
        for name, ref in reference.items():
            out = got.get(name)
            ref = np.asarray(ref)
            if out is None or np.shape(out) != ref.shape:
                raise VerificationError(f"{target}: output {name!r} missing or of another shape when run with "
                                        f"{self.library.ep_name}")
            if not np.issubdtype(ref.dtype, np.floating):
                if not np.array_equal(ref, out):
                    raise VerificationError(f"{target}: output {name!r} differs from onnxruntime's CPU result")
                continue
            diff = np.abs(ref.astype(np.float64) - np.asarray(out, np.float64))
            worst = max(worst, float(diff.max()) if diff.size else 0.0)
            if not bool(np.all(diff <= atol + rtol * np.abs(ref))):
                raise VerificationError(f"{target}: run with {self.library.ep_name}, output {name!r} differs from "
                                        f"onnxruntime's CPU result on {source.name}: max abs error {worst:.3g} "
                                        f"(tolerance atol {atol} rtol {rtol})")
        return {"verified": "yes", "max_abs_error": f"{worst:.3g}", "tolerance": f"atol {atol} rtol {rtol}"}


def _text(node: ir.Node, name: str) -> str:
    attribute = node.attributes.get(name)
    value = None if attribute is None else attribute.value
    return value.decode() if isinstance(value, bytes) else "" if value is None else str(value)


_CLASSES: dict[libraries.EpLibrary, type[PluginEpBackend]] = {}


def backend_class(library: libraries.EpLibrary) -> type[PluginEpBackend]:
    """The backend class ``ort:<EP>`` of *library* (one per library and process)."""
    if library not in _CLASSES:
        name = "".join(c if c.isalnum() else "_" for c in library.ep_name)
        _CLASSES[library] = type(f"PluginEp_{name}", (PluginEpBackend,),
                                 {"name": f"ort:{library.ep_name}", "library": library})
    return _CLASSES[library]


def plugin_ep_backends(package: str, function: str, ep_names: list[str] | tuple[str, ...]) -> list[PluginEpBackend]:
    """Backends ``ort:<EP>`` for an EP package: its distribution name, ``"module:function"`` returning its library's
    path, and the EP names the library registers.  For a plugin's ``mobile_ep_register_backends``."""
    return [backend_class(libraries.EpLibrary(name, package, function))() for name in ep_names]


class AnyLibraryBackend(PluginEpBackend):
    """``--ep ort -O ort.library=PATH``: the plugin EP library at PATH (no package needed)."""

    name = "ort"
    library = libraries.EpLibrary("")

    @property
    def description(self) -> str:  # type: ignore[override]
        return ("any ONNX Runtime plugin EP library given by path: --ep ort -O ort.library=PATH "
                "[-O ort.ep_name=NAME] [-O ort.KEY=VALUE for its provider options]")

    def configure(self, values: Mapping[str, str]) -> Backend:
        path = values.get("library", "")
        if not path:
            raise UsageError("ort: name the plugin EP library: -O ort.library=PATH")
        if not pathlib.Path(path).is_file():
            raise UsageError(f"ort: -O ort.library={path}: no such file")
        wanted = values.get("ep_name", "")
        try:
            names = libraries.ep_names(path, wanted)
        except libraries.EpFailure as exc:
            raise UsageError(f"ort: -O ort.library={path}: not a plugin EP library onnxruntime can load ({exc})") from None
        if not names:
            raise UsageError(f"ort: {path} loads but lists no device on this machine")
        if not wanted and names == [libraries.PROBE_NAME]:
            raise UsageError(f"ort: {path} takes the EP name it is registered under: give it with "
                             "-O ort.ep_name=NAME (e.g. the name its vendor documents)")
        wanted = wanted or (names[0] if len(names) == 1 else "")
        if not wanted or wanted not in names:
            raise UsageError(f"ort: {path} registers the EPs {', '.join(names)}: name one with -O ort.ep_name=NAME")
        cls = backend_class(libraries.EpLibrary(wanted, path=str(pathlib.Path(path).resolve())))
        return cls({k: v for k, v in values.items() if k not in OWN_OPTIONS})

    def excluded_nodes(self, graph: ir.Graph, ctx: RuleContext) -> Mapping[ir.Node, str]:
        return dict.fromkeys(graph, "--ep ort needs -O ort.library=PATH")

    def describe_options(self) -> list[tuple[str, str, str]]:
        return [("library", "", "path of the plugin EP library"),
                ("ep_name", "", "the EP to use, when the library registers several"),
                ("KEY", "", "any provider option of that EP, passed to it as given")]

    def compile_with_ep(self, source, target, workdir, options=None) -> CompileResult:
        raise UsageError("--ep ort needs -O ort.library=PATH")

