"""``check`` and ``convert``: the stages of :mod:`mobile_ep.passes` in order, and the reports made of their results.

check(model)                               convert(model, ep)
  load: validate, ORT's basic level          load: validate, ORT's basic level
  partition, each backend and all together   partition: what ORT Mobile does today ("before")
  after convert, per backend:                fix shapes, fold constants (ORT's basic level again)
    fix shapes, fold constants               legalize + partition (undoing rewrites that only made
    legalize + partition                       partitions the cost model rejects)
                                             fuse the CPU part, export .onnx and .ort
                                             compile to EPContext (--compile)
                                             verify, report.json

Both take an :class:`~mobile_ep.options.Options` or its fields as keywords (``mobile_ep.check(model,
"nnapi", shape={"x": (1, 3, 224, 224)})``), exactly what the command line takes.  Errors are the exceptions
of :mod:`mobile_ep.errors`, whose ``exit_code`` is the command's.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import pathlib
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

from mobile_ep import progress, runtime, sessions, writes
from mobile_ep.contract import Backend
from mobile_ep.contract.plugins import Plugins, make_plugins
from mobile_ep.errors import UsageError
from mobile_ep.options import Options, resolve_backends
from mobile_ep.passes import const_inputs, export, fuse_cpu, load, to_epcontext
from mobile_ep.passes import verify as verification
from mobile_ep.passes.conversion import Conversion, Found
from mobile_ep.passes.partition import PartitionPass, analyze
from mobile_ep.reports import against, const_hints, interface, nodegraph, option_hints
from mobile_ep.reports import model as reports

__all__ = ["check", "convert", "resolve_backends"]

def _one_command(run):
    """*run* as one command: each view of a model made once (:func:`mobile_ep.sessions.command`); one that
    verifies (``verify=True``, convert's default) keeps the sessions that made views to run those files."""
    verifies = "verify" in inspect.signature(run).parameters

    @functools.wraps(run)
    def command(*args: Any, **kwargs: Any):
        with sessions.command(runs=verifies and kwargs.get("verify", True)):
            return run(*args, **kwargs)

    return command


@_one_command
def check(model: str | os.PathLike, ep: str | Sequence[str] | None = None, *, after_convert: bool = True,
          html: str | os.PathLike | None = None, node_data: str | os.PathLike | None = None,
          plugins: Plugins | None = None, against_ep: bool = False, **options: Any) -> reports.CheckReport:
    """``mobile-ep check``: how ORT Mobile's EPs partition *model* today, and after ``convert``.

    *ep*: backend names in priority order (default: every installed backend); *options*: an ``options=``
    :class:`Options` or its fields as keywords.  With *html*, also writes the HTML report there; with
    *node_data*, Model Explorer's node data (:mod:`mobile_ep.reports.node_data`).  *against_ep*: each backend
    that predicts a plugin EP also against that EP's own placement (``report.against_ep``).
    """
    opts = Options.build(ep, **options)
    path, timer = pathlib.Path(model), progress.Timer()
    proto = load.validate(path)  # a bad model is reported before anything else
    backends = resolve_backends(opts, plugins)
    with _recording(html or node_data), _workspace() as work:
        with timer("load"):
            as_is = load.view(path, work / "as_is", proto=proto, backends=backends)
        with timer("partition"):
            alone, together = analyze(as_is.model, backends, strict=opts.strict)
            before, own, planned = {}, {}, {}  # (own: the model as each backend's session alone sees it)
            for backend, found in zip(backends, alone, strict=True):  # (alone: offered inlined what another keeps)
                mine = as_is
                if load.needs_own_view(as_is, backends, found[0].rejected):
                    mine = load.view(path, work / f"as_is.{backend.name}", proto=proto, backends=[backend])
                    (found,), _ = analyze(mine.model, [backend], strict=opts.strict)
                own[backend.name], planned[backend.name] = mine, found
                before[backend.name] = reports.backend_report(backend, *found, model=mine.model, whole=mine.whole)
        after, changes, converted = {}, {}, {}
        if after_convert:
            with timer("after_convert"):
                reference, fixing, const_dir = const_inputs.reference(path, opts)
                try:
                    read = None if const_dir else proto  # (--const: the model with its constants, read anew)
                    fixed = load.view(reference, work / "fixed", fixing, read, backends) if opts.fixes_inputs else as_is
                    changes = fixed.changes
                    for backend in backends:  # (convert's graph: the backend alone, as above)
                        mine = own[backend.name] if fixed is as_is else fixed
                        if fixed is not as_is and load.needs_own_view(fixed, backends, None):
                            mine = load.view(reference, work / f"fixed.{backend.name}", fixing, read, [backend])
                        converted[backend.name] = mine
                        after[backend.name] = _after_convert(mine, backend, opts, work,
                                                             planned[backend.name] if mine is own[backend.name] else None)
                finally:
                    if const_dir is not None:
                        const_dir.cleanup()
        dynamic = reports.still_dynamic(reports.dynamic_inputs(as_is.model), opts.shapes, opts.dims, opts.consts)
        for backend in backends:
            report = before[backend.name]
            report.suggestions = reports.suggestions(report, after.get(backend.name), dynamic, beside=report)
            const_hints.attach(as_is.model, report, after.get(backend.name))
            if after_convert:  # (each option change computed: as is, or through the model convert writes)
                report.suggestions += option_hints.better_options(
                    own[backend.name].model, backend, report, after.get(backend.name),
                    lambda variant, seen=converted[backend.name]: _after_convert(seen, variant, opts, work),
                    strict=opts.strict)
        combined = [reports.combined_report(proposal, backends) for proposal in together]  # (one per platform)
        result = reports.CheckReport(str(model), len(as_is.model.graph), before, combined[0] if combined else None,
                                     after, changes, timer.timings, other_platforms=combined[1:])
    if against_ep:
        result.against_ep = against.against_eps(path, opts, plugins or make_plugins(), check)
    return _with_html(result, html, node_data)


@_one_command
def convert(model: str | os.PathLike, ep: str, output: str | os.PathLike = "out", *, verify: bool = True,
            seed: int = 0, compile: bool = False, html: str | os.PathLike | None = None,
            node_data: str | os.PathLike | None = None, plugins: Plugins | None = None, **options: Any
            ) -> reports.ConvertReport:
    """``mobile-ep convert``: write the EP-aware model for backend *ep* into *output* and verify it.

    Writes ``<model>.<ep>.onnx``, ``<model>.<ep>.ort`` and ``report.json``; with *compile*, also the
    compiled-partition model (:mod:`mobile_ep.passes.to_epcontext`), its app bundle and the runtime adapter.
    Raises :class:`~mobile_ep.errors.VerificationError` when an output differs (files and report are kept).
    """
    opts = Options.build(ep, **options)
    if len(opts.backends) != 1:
        raise UsageError(f"convert takes one backend, got {len(opts.backends)} ({ep!r}); run convert once per "
                         "backend (check compares several)")
    source, timer, out_dir = pathlib.Path(model), progress.Timer(), pathlib.Path(output)
    proto = load.validate(source)
    (backend,) = resolve_backends(opts, plugins)
    export.refuse_overwriting(source, export.output_paths(source, backend.name, out_dir).values())
    reference, fixing, const_dir = const_inputs.reference(source, opts)  # (--const: the model with its constants)
    try:
        return _convert(source, proto, backend, opts, out_dir, reference, fixing, const_dir is not None, verify=verify,
                        seed=seed, compile=compile, timer=timer, html=html, node_data=node_data)
    finally:
        if const_dir is not None:
            const_dir.cleanup()


def _convert(source: pathlib.Path, proto, backend: Backend, opts: Options, out_dir: pathlib.Path,
             reference: pathlib.Path, fixing: Options, const: bool, *, verify: bool, seed: int, compile: bool,
             timer: progress.Timer, html, node_data) -> reports.ConvertReport:
    """:func:`convert` once its input is validated and its backend known (*reference*: the model verified
    against, with its ``--const`` inputs made constants when *const*)."""
    with writes.staged(out_dir) as stage:  # (written beside the outputs, moved in as one set when complete)
        paths = export.output_paths(source, backend.name, stage.folder)
        with _recording(html or node_data), _workspace() as work:
            with timer("load"):
                as_is = load.view(source, work / "as_is", proto=proto, backends=[backend])
                fixed = load.view(reference, work / "fixed", fixing, None if const else proto,
                                  backends=[backend]) if opts.fixes_inputs else as_is
            with timer("partition"):
                before = PartitionPass(backend, Options(strict=opts.strict))
                before(as_is.model)
                before_report = reports.backend_report(backend, before.proposal, before.nodes, model=as_is.model,
                                                       whole=as_is.whole)
                dynamic = reports.still_dynamic(reports.dynamic_inputs(as_is.model), opts.shapes, opts.dims,
                                                opts.consts)
                conversion = Conversion.plan(fixed.model, backend, opts, settled=fixed.settled)
            stage.create()
            ort_file = export.OrtExport()
            try:
                with timer("export_onnx"):
                    conversion.write(paths["onnx"], work)
                    ort_file.start(paths["onnx"], paths["ort"])  # (on a thread, beside what follows)
                    written_partition, written_model = conversion.as_loaded()
                compiled = None
                if compile:
                    with timer("compile"):
                        compiled = to_epcontext.compile_into(paths, backend, stage.folder, work / "compile", opts)
                with timer("export_ort"):
                    if ort_file.result() is None:
                        del paths["ort"]
            finally:
                ort_file.wait()
            report = reports.backend_report(backend, written_partition.proposal, written_partition.nodes,
                                            written_partition.costs, model=written_model)
        report.rewrites, report.suggestions = conversion.rewrites, reports.suggestions(before_report, report, dynamic)
        const_hints.attach(as_is.model, report, before_report)
        checked, not_verified = [], None
        if verify:
            with timer("verify"):
                try:
                    checked = verification.verify(reference, [p for k, p in paths.items() if k != "report"], backend,
                                                  opts, as_is.model, seed, proto=None if const else proto,
                                                  applied=conversion.rewrites)
                except runtime.InputError as exc:  # the outputs stand; the report says why they were not verified
                    not_verified = exc
        changed, app_inputs = interface.app_interface(proto, paths["onnx"], opts.consts)
        result = reports.ConvertReport(str(source), backend.name, {k: str(v) for k, v in paths.items()}, report,
                                       checked, before_report, fixed.changes, timer.timings, conversion.fusion,
                                       compiled=compiled, interface=changed, app_inputs=app_inputs)
        stage.relocate(result, checked, compiled)  # (the report names the files where they end up)
        written = result.as_dict()
        if not_verified is not None:
            written["verification_error"] = str(not_verified)
        stage.commit(written, report_name=paths["report"].name)  # report.json last, with each file's sha256
    if not_verified is not None:
        raise not_verified
    verification.raise_on_mismatch(checked, out_dir / paths["report"].name)
    return _with_html(result, html, node_data)


def _after_convert(seen: load.View, backend: Backend, options: Options, work: pathlib.Path,
                   found: Found | None = None) -> reports.BackendReport:
    """What *backend* takes of the model ``convert`` writes from *seen*: its steps (:class:`Conversion`), the
    work files beside the weights *seen* reads, which they reference, else in *work*.  *found*: the backend's
    partition of *seen* as it is (:func:`analyze`), used again when no rewrite applies.  A model the backend
    takes whole with no rewrite, *seen* settled, is not written (:attr:`Conversion.reusable`)."""
    conversion = Conversion.plan(seen.model, backend, options, found, settled=seen.settled)
    if not conversion.reusable:
        folder = fuse_cpu.weights_folder(seen.model, work)
        conversion.write(folder / f"after.{export.file_label(backend.name)}.onnx", folder, by_reference=True)
    partition, model = conversion.as_loaded()
    report = reports.backend_report(backend, partition.proposal, partition.nodes, partition.costs, model=model,
                                    whole=seen.whole if model is seen.model else None)
    report.rewrites = conversion.rewrites
    return report


def _recording(html: str | os.PathLike | None) -> contextlib.AbstractContextManager:
    """Graphs are recorded for the HTML report when one is asked for here (or by a caller, around the run)."""
    return nodegraph.recording(True) if html is not None else contextlib.nullcontext()


def _with_html(report, html: str | os.PathLike | None, node_data: str | os.PathLike | None = None):
    if html is not None:
        from mobile_ep.reports.html import write_html

        write_html(report, html)
    if node_data is not None:
        from mobile_ep.reports.node_data import write_node_data

        write_node_data(report, node_data)
    return report


@contextlib.contextmanager
def _workspace() -> Iterator[pathlib.Path]:
    with tempfile.TemporaryDirectory(prefix="mobile-ep-") as work:
        yield pathlib.Path(work)
