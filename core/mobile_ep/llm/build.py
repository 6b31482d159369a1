"""``mobile-ep llm``: one decoder export to the files an app ships.

Writes into the output folder (atomically, as ``convert`` does: :mod:`mobile_ep.writes`):

* ``prefill.onnx``: ``prefill`` new tokens over a KV cache of ``context - prefill``;
* ``decode.onnx``: one new token over a KV cache of ``context - 1``;
* ``weights.data``: the weights of both, each tensor once (both graphs reference the same offsets);
* ``report.json``: the interface, each graph's partitions per backend (as it is and after ``convert``'s
  rewrites), the weights' sizes and the verification by generation (:mod:`mobile_ep.llm.generate`);
* with ``quantize``: ``prefill.<scheme>.onnx``, ``decode.<scheme>.onnx`` and their one weights file
  (:mod:`mobile_ep.llm.quantize`), checked and compiled instead of the float graphs, their cost against the
  float graphs reported and held to :data:`QUANTIZED_FLOOR_DB`;
* with ``compile``, for a backend whose real EP is installed (``Backend.real_ep()``: qnn): ``<ep>/`` holds both
  graphs compiled into EPContext models sharing one context binary (:mod:`mobile_ep.llm.shared`), each graph also
  compiled alone and verified where the EP runs here (the HTP simulator cannot load a context holding several
  graphs); for another compiling backend, ``<ep>/<graph>/`` holds ``convert --compile``'s files, and a backend
  that makes functions of its partitions (coreml) also writes them as one package, each shared weight once
  (:mod:`mobile_ep.llm.functions`: ``coreml/decoder.mlpackage``).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import tempfile
from collections.abc import Sequence
from typing import Any

from mobile_ep import progress, writes
from mobile_ep.contract.plugins import Plugins
from mobile_ep.errors import UsageError, VerificationError
from mobile_ep.llm import generate
from mobile_ep.llm.decoder import Interface, interface
from mobile_ep.llm.graphs import GRAPHS, SharedWeights, build_graphs, only_new_slots, write_shared
from mobile_ep.llm.split import split_graphs
from mobile_ep.options import Options
from mobile_ep.passes import load
from mobile_ep.reports.model import BackendReport

__all__ = ["LlmReport", "build", "build_llm", "GraphReport"]

#: Largest logits difference (absolute) of a float graph on the CPU EP against the original export.
FLOAT_TOLERANCE = 1e-3
#: The least logits SQNR (dB) of quantized graphs against the float ones, over the calibration prompts, below
#: which ``llm`` fails: it catches a broken quantization (wrong scales, a cache range not shared), which lands
#: near or below 0 dB; it is not a quality bar (measure that on your own prompts: docs/llm.md).
QUANTIZED_FLOOR_DB = {"w8a16": 12.0, "w4a16": 3.0}
#: ``--max-part-mb``'s default: the weights one HTP session is given at most (see docs/llm.md, "Split").
DEFAULT_PART_MB = 1024


@dataclasses.dataclass
class GraphReport:
    """One written graph: its file, its shapes and what each backend takes of it."""

    file: str
    seq: int
    past: int
    nodes: int
    #: The part of a split model (1 when not split).
    part: int
    #: Per backend: the graph as an onnxruntime session sees it, and after ``convert``'s rewrites.
    backends: dict[str, BackendReport]
    after_convert: dict[str, BackendReport]
    #: With ``compile``: ``convert --compile``'s result for the graph (:func:`_compiled`).
    compiled: dict | None = None

    def as_dict(self) -> dict:
        data = {"file": self.file, "part": self.part, "seq": self.seq, "past": self.past, "nodes": self.nodes,
                "backends": {name: _summary(b) for name, b in self.backends.items()},
                "after_convert": {name: _summary(b) for name, b in self.after_convert.items()}}
        if self.compiled is not None:
            data["compiled"] = self.compiled
        return data


def _compiled(result, folder: pathlib.Path, stage) -> dict:
    """What ``convert --compile`` of one graph gave: its folder (relative to the output folder), the compiled
    partitions and nodes, and its verification (each output against the graph on the CPU EP)."""
    compiled = result.compiled
    worst = max((o.max_abs for v in result.verification for o in v.outputs), default=0.0)
    return {"folder": folder.relative_to(stage.folder).as_posix() if stage is not None else str(folder),
            "backend": result.backend,
            "compiled_partitions": len(compiled.compiled) if compiled else 0,
            "compiled_nodes": compiled.compiled_nodes if compiled else 0, "nodes": compiled.nodes if compiled else 0,
            "failures": [f.as_dict() for f in compiled.failures] if compiled else [],
            "verified": all(v.ok for v in result.verification), "max_abs_error": worst,
            "files": sorted(pathlib.Path(p).name for p in result.outputs.values())}


def _summary(report: BackendReport) -> dict:
    cpu: dict[str, int] = {}
    for reason in report.unsupported:
        cpu[reason.op] = cpu.get(reason.op, 0) + 1
    return {"nodes": report.nodes, "supported_nodes": report.supported_nodes, "partitions": len(report.partitions),
            "verdict": report.verdict, "cpu_ops": dict(sorted(cpu.items())),
            "unsupported": [dataclasses.asdict(r) for r in report.unsupported],
            "rewrites": report.rewrites}


@dataclasses.dataclass
class LlmReport:
    model: str
    context: int
    prefill: int
    interface: Interface
    graphs: dict[str, GraphReport]
    #: Per part: its weights file.
    weights: list[SharedWeights]
    output: str
    max_part_mb: float | None = None
    generations: list[generate.Generation] = dataclasses.field(default_factory=list)
    steps: int = 0
    tolerance: float = FLOAT_TOLERANCE
    app: dict[str, str] = dataclasses.field(default_factory=dict)
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    #: With ``quantize``: :class:`mobile_ep.llm.quantize.LlmQuantReport`.
    quantized: Any = None
    #: With ``compile`` for a backend with a real EP: one :class:`mobile_ep.llm.shared.SharedCompileReport` per part.
    shared: list = dataclasses.field(default_factory=list)
    #: With ``compile`` for a backend making functions of its partitions: one
    #: :class:`mobile_ep.llm.functions.FunctionsReport` per part.
    functions: list = dataclasses.field(default_factory=list)

    @property
    def verified(self) -> bool:
        return all(g.tokens == g.reference and max(g.logits_error, default=0.0) <= self.tolerance
                   for g in self.generations) and not self.quantized_too_far()

    def quantized_too_far(self) -> list[str]:
        """The quantized graphs whose logits SQNR is below the scheme's :data:`QUANTIZED_FLOOR_DB`."""
        if self.quantized is None:
            return []
        floor = QUANTIZED_FLOOR_DB[self.quantized.scheme.name]
        return [f"{a.graph} {a.sqnr_db:.1f} dB" for a in self.quantized.accuracy if not a.sqnr_db >= floor]

    def as_dict(self) -> dict:
        data: dict[str, Any] = {
            "model": self.model, "output": self.output, "context": self.context, "prefill": self.prefill,
            "interface": self.interface.as_dict(),
            "graphs": {name: g.as_dict() for name, g in self.graphs.items()},
            "parts": len(self.weights), "max_part_mb": self.max_part_mb,
            "weights": [w.as_dict() for w in self.weights]}
        if self.generations:
            data["verification"] = {
                "provider": "CPUExecutionProvider", "steps": self.steps, "tolerance": self.tolerance,
                "equal": self.verified, "generations": [g.as_dict() for g in self.generations]}
        if self.quantized is not None:
            data["quantized"] = {**self.quantized.as_dict(), "floor_db": QUANTIZED_FLOOR_DB[self.quantized.scheme.name]}
        if self.shared:
            data["shared_context"] = [r.as_dict() for r in self.shared]
        if self.functions:
            data["functions"] = [r.as_dict() for r in self.functions]
        if self.app:
            data["app"] = self.app
        data["timings"] = self.timings
        return data


def build(model: str | os.PathLike, ep: str | Sequence[str] | None = None, *, context: int = 512,
          prefill: int = 128, output: str | os.PathLike = "out", verify: bool = True, steps: int = 32,
          prompts: Sequence[Sequence[int]] | None = None, max_part_mb: float | None = DEFAULT_PART_MB,
          compile: bool = False, quantize: str | None = None, calibration: str | os.PathLike | None = None,
          random_prompts: int = 0, plugins: Plugins | None = None, **options: Any) -> LlmReport:
    """``mobile-ep llm``: the prefill and decode graphs of the decoder export *model* over *context* tokens
    (*prefill* new tokens at once in the prefill graph), written into *output* with one weights file, each
    checked with the backends *ep* (default: every installed one; *options* as :func:`mobile_ep.check` takes
    them).  With *verify*, *steps* greedy tokens after each of *prompts* (token ids; default two fixed random
    prompts) through the written graphs must equal the original export's on the CPU EP; a
    :class:`~mobile_ep.errors.VerificationError` says which differ (the files and report are kept).  Weights
    over *max_part_mb* (MB of 2**20 bytes; ``None``: no limit) split the graphs into parts of whole layers
    (:mod:`mobile_ep.llm.split`): ``partN.prefill.onnx``, ``partN.decode.onnx`` and ``partN.weights.data``.
    With *compile* (one backend), each graph also goes through ``convert --compile`` (the backend's own
    lowering, verified with its emulator) into ``<ep>/<graph>/``; a backend with a real EP (qnn) compiles both
    graphs into one shared context instead (:mod:`mobile_ep.llm.shared`).  *quantize* (``"w8a16"`` or
    ``"w4a16"``, an unsplit model) also writes the quantized graphs, calibrated on the token-id files of the folder
    *calibration* or on *random_prompts* random prompts (a smoke test), which are then the graphs checked and
    compiled.
    """
    from mobile_ep import pipeline
    from mobile_ep.llm import quantize as quantizing

    opts = Options.build(ep, **options)
    if opts.fixes_inputs:
        raise UsageError("llm fixes the decoder's input shapes itself (from --context and --prefill): leave out "
                         "--shape, --dim and --const")
    if compile and len(opts.backends) != 1:
        raise UsageError("--compile takes one backend (--ep NAME): each graph is compiled for it")
    if not 1 <= prefill < context:
        raise UsageError(f"--prefill {prefill} must be at least 1 and less than --context {context}")
    if quantize is not None and quantize not in quantizing.SCHEMES:
        raise UsageError(f"--quantize {quantize}: choose one of {', '.join(quantizing.SCHEMES)}")
    if quantize is not None and (calibration is None) == (not random_prompts):
        raise UsageError("--quantize needs calibration prompts: --calibration FOLDER (token-id files) or --random N "
                         "(random token ids: a smoke test, not an accuracy measure)")
    if verify and prompts is None and steps > context - prefill:
        steps = context - prefill
    path, out_dir, timer = pathlib.Path(model), pathlib.Path(output), progress.Timer()
    proto = load.validate(path)
    face = interface(proto, path)
    backends = pipeline.resolve_backends(opts, plugins)
    with writes.staged(out_dir) as stage, tempfile.TemporaryDirectory(prefix="mobile-ep-llm-") as work:
        with timer("graphs"):
            graphs = build_graphs(path, face, context, prefill, pathlib.Path(work), proto, new_slots=False)
            budget = int(max_part_mb * 2**20) if max_part_mb is not None else None
            parts = split_graphs(graphs, face, budget) if budget is not None else [graphs]
            stage.create()
            written, shared = [], []
            for k, part in enumerate(parts):
                for name, model in part.items():
                    only_new_slots(model, face, context, prefill if name == "prefill" else 1)
                paths, weights = write_shared(part, stage.folder, prefix=f"part{k + 1}." if len(parts) > 1 else "")
                written.append(paths)
                shared.append(weights)
        quantized = None
        if quantize is not None:
            if len(written) > 1:
                raise UsageError(f"--quantize takes a model in one part: its weights are over --max-part-mb "
                                 f"{max_part_mb:g}; raise it, or quantize each part's export")
            with timer("quantize"):
                calibrating = quantizing.read_prompts(calibration) if calibration is not None else \
                    quantizing.random_prompts(random_prompts, face.vocab or 2, prefill)
                quantized = quantizing.quantize_graphs(
                    written[0]["prefill"], written[0]["decode"], stage.folder, calibrating, quantize,
                    calibration=str(calibration) if calibration is not None else f"{random_prompts} random prompts",
                    random=calibration is None)
        shipped = [{name: pathlib.Path(quantized.graphs[name]) for name in GRAPHS}] if quantized else written
        reports = {}
        for k, paths in enumerate(shipped):
            for name in GRAPHS:
                with timer(f"check_{name}"):
                    seen = pipeline.check(paths[name], [b.name for b in backends], plugins=plugins,
                                          options=dataclasses.replace(opts, backends=tuple(b.name for b in backends)))
                seq = prefill if name == "prefill" else 1
                reports[paths[name].stem] = GraphReport(paths[name].name, seq, context - seq, seen.nodes, k + 1,
                                                        seen.backends, seen.after_convert)
        shared_reports: list = []
        function_reports: list = []
        if compile:
            with timer("compile"):
                shared_reports = _compile(backends[0], shipped, reports, stage, pathlib.Path(work), plugins, opts,
                                          function_reports)
        result = LlmReport(str(path), context, prefill, face, reports, shared, str(out_dir), max_part_mb,
                           timings=timer.timings, quantized=quantized, shared=shared_reports,
                           functions=function_reports)
        if verify:
            with timer("verify"):
                chosen = prompts if prompts is not None else generate.default_prompts(face.vocab or 2, prefill)
                result.steps = steps
                result.generations = generate.verify(face, context, prefill, path, [p["prefill"] for p in written],
                                                     [p["decode"] for p in written], chosen, steps)
        with timer("app"):  # (a split model's loops run its parts in order)
            from mobile_ep.llm import app

            result.app = app.write(stage.folder, face, written, context, prefill)
        stage.commit(result.as_dict())
    unverified = [f for f in result.functions if not f.error and not f.verified]
    if unverified:
        raise VerificationError(f"{out_dir / 'report.json'}: {unverified[0].text()}")
    if result.quantized_too_far():
        raise VerificationError(f"{out_dir / 'report.json'}: the {quantize} graphs' logits are too far from the float "
                                f"graphs': SQNR {', '.join(result.quantized_too_far())} (at least "
                                f"{QUANTIZED_FLOOR_DB[quantize]} dB expected: a broken quantization)")  # type: ignore[index]
    if verify and not result.verified:
        bad = [g for g in result.generations if g.tokens != g.reference]
        detail = (f"{len(bad)} of {len(result.generations)} prompts' tokens differ from the original's"
                  if bad else f"logits differ by up to {max(max(g.logits_error) for g in result.generations):.3g}")
        raise VerificationError(f"{out_dir / 'report.json'}: generation through the written graphs differs: "
                                f"{detail} (tolerance {result.tolerance})")
    return result


def _compile(backend, shipped: list[dict[str, pathlib.Path]], reports: dict[str, GraphReport], stage,
             work: pathlib.Path, plugins: Plugins | None, opts: Options, function_reports: list) -> list:
    """``--compile``: with the backend's real EP (:func:`mobile_ep.llm.shared.real_ep`), each part's graphs into
    EPContext models sharing one context in ``<ep>/`` (and each graph compiled alone by ``convert --compile`` in a
    work folder, verified where the EP runs here); else each graph's ``convert --compile`` into ``<ep>/<graph>/``,
    and their partitions as the functions of one package per part (:mod:`mobile_ep.llm.functions`) into
    *function_reports* when the backend makes functions of them."""
    from mobile_ep import pipeline
    from mobile_ep.llm import functions, shared

    real = shared.real_ep(backend) if backend.real_ep() is not None else None
    results = []
    for k, paths in enumerate(shipped):
        compiled_graphs = {}
        if real is not None:
            folder = stage.folder / backend.name / (f"part{k + 1}" if len(shipped) > 1 else "")
            results.append(shared.compile_shared_graphs(paths, folder, *real))
        for name in GRAPHS:
            folder = (work if real is not None else stage.folder) / backend.name / paths[name].stem
            converted = pipeline.convert(paths[name], backend.name, folder, compile=True, plugins=plugins, options=opts)
            compiled = _compiled(converted, folder, stage) if real is None else {
                **_compiled(converted, folder, None), "folder": "", "files": [],
                "alone": "compiled alone (not shipped) to be run here: the simulator cannot load a shared context"}
            reports[paths[name].stem].compiled = compiled
            if real is None and "compiled" in converted.outputs:
                compiled_graphs[name] = (paths[name], pathlib.Path(converted.outputs["compiled"]),
                                         converted.check.rewrites)
        if real is None and functions.supports_functions(backend):
            part = f"part{k + 1}" if len(shipped) > 1 else ""
            function_reports.append(functions.package_graphs(
                backend, compiled_graphs, stage.folder / backend.name / ".".join(filter(None, (part, "decoder"))),
                stage.folder, prefix=f"{part}_" if part else ""))
    return results


#: ``mobile_ep.build_llm``: :func:`build` under the name the package exports.
build_llm = build
