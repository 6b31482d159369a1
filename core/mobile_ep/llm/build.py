"""``mobile-ep llm``: one decoder export to the files an app ships.

Writes into the output folder (atomically, as ``convert`` does: :mod:`mobile_ep.writes`):

* ``prefill.onnx``: ``prefill`` new tokens over a KV cache of ``context - prefill``;
* ``decode.onnx``: one new token over a KV cache of ``context - 1``;
* ``weights.data``: the weights of both, each tensor once (both graphs reference the same offsets);
* ``report.json``: the interface, each graph's partitions per backend (as it is and after ``convert``'s
  rewrites), the weights' sizes and the verification by generation (:mod:`mobile_ep.llm.generate`).
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
    return {"folder": folder.relative_to(stage.folder).as_posix(), "backend": result.backend,
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

    @property
    def verified(self) -> bool:
        return all(g.tokens == g.reference and max(g.logits_error, default=0.0) <= self.tolerance
                   for g in self.generations)

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
        if self.app:
            data["app"] = self.app
        data["timings"] = self.timings
        return data


def build(model: str | os.PathLike, ep: str | Sequence[str] | None = None, *, context: int = 512,
          prefill: int = 128, output: str | os.PathLike = "out", verify: bool = True, steps: int = 32,
          prompts: Sequence[Sequence[int]] | None = None, max_part_mb: float | None = DEFAULT_PART_MB,
          compile: bool = False, plugins: Plugins | None = None, **options: Any) -> LlmReport:
    """``mobile-ep llm``: the prefill and decode graphs of the decoder export *model* over *context* tokens
    (*prefill* new tokens at once in the prefill graph), written into *output* with one weights file, each
    checked with the backends *ep* (default: every installed one; *options* as :func:`mobile_ep.check` takes
    them).  With *verify*, *steps* greedy tokens after each of *prompts* (token ids; default two fixed random
    prompts) through the written graphs must equal the original export's on the CPU EP; a
    :class:`~mobile_ep.errors.VerificationError` says which differ (the files and report are kept).  Weights
    over *max_part_mb* (MB of 2**20 bytes; ``None``: no limit) split the graphs into parts of whole layers
    (:mod:`mobile_ep.llm.split`): ``partN.prefill.onnx``, ``partN.decode.onnx`` and ``partN.weights.data``.
    With *compile* (one backend), each graph also goes through ``convert --compile`` (the backend's own
    lowering, verified with its emulator) into ``<ep>/<graph>/``.
    """
    from mobile_ep import pipeline

    opts = Options.build(ep, **options)
    if opts.fixes_inputs:
        raise UsageError("llm fixes the decoder's input shapes itself (from --context and --prefill): leave out "
                         "--shape, --dim and --const")
    if compile and len(opts.backends) != 1:
        raise UsageError("--compile takes one backend (--ep NAME): each graph is compiled for it")
    if not 1 <= prefill < context:
        raise UsageError(f"--prefill {prefill} must be at least 1 and less than --context {context}")
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
        reports = {}
        for k, paths in enumerate(written):
            for name in GRAPHS:
                with timer(f"check_{name}"):
                    seen = pipeline.check(paths[name], [b.name for b in backends], plugins=plugins,
                                          options=dataclasses.replace(opts, backends=tuple(b.name for b in backends)))
                seq = prefill if name == "prefill" else 1
                reports[paths[name].stem] = GraphReport(paths[name].name, seq, context - seq, seen.nodes, k + 1,
                                                        seen.backends, seen.after_convert)
                if compile:
                    with timer("compile"):
                        folder = stage.folder / backends[0].name / paths[name].stem
                        converted = pipeline.convert(paths[name], backends[0].name, folder, compile=True,
                                                     plugins=plugins, options=opts)
                        reports[paths[name].stem].compiled = _compiled(converted, folder, stage)
        result = LlmReport(str(path), context, prefill, face, reports, shared, str(out_dir), max_part_mb,
                           timings=timer.timings)
        if verify:
            with timer("verify"):
                chosen = prompts if prompts is not None else generate.default_prompts(face.vocab or 2, prefill)
                result.steps = steps
                result.generations = generate.verify(face, context, prefill, path, [p["prefill"] for p in written],
                                                     [p["decode"] for p in written], chosen, steps)
        if len(written) == 1:  # (the loops run one session per graph)
            with timer("app"):
                from mobile_ep.llm import app

                result.app = app.write(stage.folder, face, context, prefill)
        stage.commit(result.as_dict())
    if verify and not result.verified:
        bad = [g for g in result.generations if g.tokens != g.reference]
        detail = (f"{len(bad)} of {len(result.generations)} prompts' tokens differ from the original's"
                  if bad else f"logits differ by up to {max(max(g.logits_error) for g in result.generations):.3g}")
        raise VerificationError(f"{out_dir / 'report.json'}: generation through the written graphs differs: "
                                f"{detail} (tolerance {result.tolerance})")
    return result


#: ``mobile_ep.build_llm``: :func:`build` under the name the package exports.
build_llm = build
