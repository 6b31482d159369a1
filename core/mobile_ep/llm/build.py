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
from mobile_ep.llm.graphs import GRAPHS, SharedWeights, build_graphs, write_shared
from mobile_ep.options import Options
from mobile_ep.passes import load
from mobile_ep.reports.model import BackendReport

__all__ = ["LlmReport", "build", "build_llm", "GraphReport"]

#: Largest logits difference (absolute) of a float graph on the CPU EP against the original export.
FLOAT_TOLERANCE = 1e-3


@dataclasses.dataclass
class GraphReport:
    """One written graph: its file, its shapes and what each backend takes of it."""

    file: str
    seq: int
    past: int
    nodes: int
    #: Per backend: the graph as an onnxruntime session sees it, and after ``convert``'s rewrites.
    backends: dict[str, BackendReport]
    after_convert: dict[str, BackendReport]

    def as_dict(self) -> dict:
        return {"file": self.file, "seq": self.seq, "past": self.past, "nodes": self.nodes,
                "backends": {name: _summary(b) for name, b in self.backends.items()},
                "after_convert": {name: _summary(b) for name, b in self.after_convert.items()}}


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
    weights: SharedWeights
    output: str
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
            "weights": self.weights.as_dict()}
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
          prompts: Sequence[Sequence[int]] | None = None, plugins: Plugins | None = None,
          **options: Any) -> LlmReport:
    """``mobile-ep llm``: the prefill and decode graphs of the decoder export *model* over *context* tokens
    (*prefill* new tokens at once in the prefill graph), written into *output* with one weights file, each
    checked with the backends *ep* (default: every installed one; *options* as :func:`mobile_ep.check` takes
    them).  With *verify*, *steps* greedy tokens after each of *prompts* (token ids; default two fixed random
    prompts) through the written graphs must equal the original export's on the CPU EP; a
    :class:`~mobile_ep.errors.VerificationError` says which differ (the files and report are kept).
    """
    from mobile_ep import pipeline

    opts = Options.build(ep, **options)
    if opts.fixes_inputs:
        raise UsageError("llm fixes the decoder's input shapes itself (from --context and --prefill): leave out "
                         "--shape, --dim and --const")
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
            graphs = build_graphs(path, face, context, prefill, pathlib.Path(work), proto)
            stage.create()
            paths, shared = write_shared(graphs, stage.folder)
        reports = {}
        for name in GRAPHS:
            with timer(f"check_{name}"):
                seen = pipeline.check(paths[name], [b.name for b in backends], plugins=plugins,
                                      options=dataclasses.replace(opts, backends=tuple(b.name for b in backends)))
            seq = prefill if name == "prefill" else 1
            reports[name] = GraphReport(paths[name].name, seq, context - seq, seen.nodes, seen.backends,
                                        seen.after_convert)
        result = LlmReport(str(path), context, prefill, face, reports, shared, str(out_dir), timings=timer.timings)
        if verify:
            with timer("verify"):
                chosen = prompts if prompts is not None else generate.default_prompts(face.vocab or 2, prefill)
                result.steps = steps
                result.generations = generate.verify(face, context, prefill, path, paths["prefill"],
                                                     paths["decode"], chosen, steps)
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
