"""The ``mobile-ep`` command."""

from __future__ import annotations

import functools
import logging
import os
import pathlib
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import click

from mobile_ep import __version__
from mobile_ep.cli import crash
from mobile_ep.cli.group import EXIT_CODES_HELP, Group, PluginFailure
from mobile_ep.cli.llm import llm as _llm_command
from mobile_ep.errors import UsageError
from mobile_ep.options import Options
from mobile_ep.textsafe import EscapingFormatter, escape

if TYPE_CHECKING:  # (the command imports the pipeline, onnx and the plugins only when a subcommand runs)
    from mobile_ep.cli import batch
    from mobile_ep.contract.plugins import Plugins
    from mobile_ep.reports.model import CheckReport, ConvertReport

class _State:
    def __init__(self, debug: bool, verbose: int, quiet: bool, strict: bool) -> None:
        self.debug = debug
        self.verbose = verbose
        self.quiet = quiet
        self.strict = strict
        #: --node-data FILE.json (check, convert): the Model Explorer node-data file to write.
        self.node_data: pathlib.Path | None = None
        #: --const NAME=VALUE (check, convert, explain): inputs fixed to constants.
        self.consts: tuple[str, ...] = ()
        self._plugins: Plugins | None = None

    @property
    def plugins(self) -> Plugins:
        if self._plugins is None:
            from mobile_ep.contract.plugins import make_plugins

            self._plugins = make_plugins()
            self._plugins.backends()  # a plugin failing to register its backends is broken too
            for error in self._plugins.errors:
                if self.strict:
                    raise PluginFailure(f"plugin {error.plugin!r} {error.message}")
                click.echo(f"mobile-ep: warning: plugin {error.plugin!r} {error.message}", err=True)
        return self._plugins


@click.group(cls=Group, epilog=EXIT_CODES_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mobile-ep")
@click.option("--debug", is_flag=True, help="Show full tracebacks instead of one-line errors.")
@click.option("-v", "--verbose", count=True, help="More detail (every node left on CPU; -vv: log messages).")
@click.option("-q", "--quiet", is_flag=True, help="Print only errors (and --json output).")
@click.option("--strict", is_flag=True, help="Treat a plugin that fails to load or breaks its contract as an error (exit 5).")
@click.option("--rule-budget", type=float, metavar="SECONDS", help="Time a backend's rules may spend on one model "
              "(default 5; past it the backend is dropped for that model).")
@click.pass_context
def main(ctx: click.Context, debug: bool, verbose: int, quiet: bool, strict: bool, rule_budget: float | None) -> None:
    """Get ONNX models onto mobile accelerators: Android NNAPI, Apple Core ML, and backend plugins.

    \b
    Examples:
      mobile-ep list                                   installed backends
      mobile-ep check model.onnx                       what ORT Mobile's EPs would do with it
      mobile-ep check model.onnx --ep nnapi --json     the same, as JSON
      mobile-ep convert model.onnx --ep nnapi -o out/  EP-aware .onnx + .ort + report.json
      mobile-ep convert --ep coreml                    convert the built-in sample CNN
      mobile-ep quantize model.onnx --ep nnapi --random 8   a QDQ model for NNAPI (smoke test)
      mobile-ep llm decoder.onnx --ep qnn -o out/      prefill + decode graphs of a language model
      mobile-ep check model.onnx --html report.html    the graph, coloured by where each node runs
      mobile-ep check models/ --jobs 4                 every model of a folder, one summary line each
      mobile-ep explain model.onnx n14 --ep nnapi      why that node is on the CPU, and what would help
      mobile-ep ops --ep nnapi --format md             supported ops and their conditions
      mobile-ep completion bash >> ~/.bashrc           tab completion (bash, zsh, fish)

    Progress bars are drawn on stderr when it is a terminal (never with --quiet).
    """
    crash.supervise()  # (as the program: a native crash in the command becomes one line, exit code 8)
    # An embedding application may pass its own plugin manager as the context object.
    given = None
    if ctx.obj is not None:
        from mobile_ep.contract.plugins import Plugins

        given = ctx.obj if isinstance(ctx.obj, Plugins) else None
    ctx.obj = _State(debug, verbose, quiet, strict)
    if rule_budget is not None:
        import os

        from mobile_ep.contract.plugins import RULE_BUDGET_ENV

        os.environ[RULE_BUDGET_ENV] = str(rule_budget)
    ctx.obj._plugins = given
    level = logging.DEBUG if verbose >= 2 else logging.WARNING
    handler = logging.StreamHandler()  # (log lines name models' nodes and files: escaped)
    handler.setFormatter(EscapingFormatter("mobile-ep: %(levelname)s: %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])


_EP_HELP = "Backend(s), comma-separated, in priority order (default: all installed)."
_OPTION_HELP = ("Backend option BACKEND.KEY=VALUE, repeatable (e.g. -O nnapi.api_level=29, "
                "-O coreml.model_format=NeuralNetwork); `mobile-ep list -v` shows every option.")


def _set_consts(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> None:
    ctx.find_object(_State).consts = value


def _pipeline_options(f):
    """--shape, --dim, --max-partitions, --min-nodes, --no-legalize, --no-cost-model."""
    options = [
        click.option("--shape", "shapes", multiple=True, metavar="NAME=D1,D2,...",
                     help="Fix an input's shape (repeatable); NAME= may be left out for a one-input model."),
        click.option("--dim", "dims", multiple=True, metavar="PARAM=VALUE",
                     help="Fix every dim named PARAM (repeatable), e.g. --dim batch=1."),
        click.option("--const", multiple=True, metavar="NAME=VALUE", expose_value=False, callback=_set_consts,
                     help="Fix an input to a constant (repeatable), e.g. --const sr=16000: arithmetic on it folds "
                          "away; convert verifies against the original with that value."),
        click.option("--max-partitions", type=click.IntRange(min=1), default=None,
                     help="Keep at most N partitions, those with the largest estimated saving."),
        click.option("--min-nodes", type=click.IntRange(min=1), default=None,
                     help="Drop partitions with fewer than N nodes."),
        click.option("--legalize/--no-legalize", default=True, show_default=True,
                     help="Rewrite nodes the backend cannot take into equivalent nodes it can."),
        click.option("--cost-model/--no-cost-model", default=True, show_default=True,
                     help="Judge partitions by estimated compute saved versus bytes copied."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _options(state: _State, eps: str | None, option_values: Sequence[str], shapes: Sequence[str] = (),
             dims: Sequence[str] = (), max_partitions: int | None = None, min_nodes: int | None = None,
             legalize: bool = True, cost_model: bool = True) -> Options:
    """The command line's values as the one :class:`~mobile_ep.options.Options` object."""
    if eps is not None and not [name for name in eps.split(",") if name.strip()]:
        raise UsageError(f"--ep {eps!r} names no backend: give one or more (e.g. --ep nnapi), or leave --ep out "
                         "for every installed backend")
    return Options.build(eps, options=option_values, shape=shapes, dim=dims, max_partitions=max_partitions,
                         min_nodes=min_nodes, legalize=legalize, cost_model=cost_model, strict=state.strict,
                         const=state.consts)


def _sample(directory: pathlib.Path, state: _State) -> pathlib.Path:
    from mobile_ep.samples import write_sample

    path = write_sample(directory)
    if not state.quiet:
        click.echo(f"no model given: using the built-in sample CNN ({path})", err=True)
    return path


def _progress(state: _State, plan: Sequence[str] = ()):
    """Progress bars on stderr while the command runs: only on a terminal, never with --quiet."""
    from mobile_ep import progress

    reporter = progress.TerminalProgress(plan=plan) if progress.wants_progress(quiet=state.quiet) else None
    return progress.reporting(reporter)


def _complete_backends(ctx: click.Context, param: click.Parameter, incomplete: str) -> list:
    """Shell completion of --ep: the installed backend plugins (entry points), comma-separated."""
    import importlib.metadata

    from click.shell_completion import CompletionItem

    from mobile_ep.contract.hookspecs import PROJECT_NAME

    head, _, tail = incomplete.rpartition(",")
    chosen = set(head.split(",")) if head else set()
    names = sorted({ep.name for ep in importlib.metadata.entry_points(group=PROJECT_NAME)})
    return [CompletionItem(f"{head},{n}" if head else n) for n in names if n.startswith(tail) and n not in chosen]


_HTML_HELP = ("Also write the HTML report: the graph node by node, coloured by where each node runs, as is and "
              "after convert side by side (one self-contained file).  With several models: a folder, one "
              "report per model and index.html.")
_JOBS_HELP = "With several models: how many to process at once (0: one per CPU core)."
_NODE_DATA_HELP = ("Also write a node-data file for Google's Model Explorer: for each node, the backend and "
                   "partition that take it or why it stays on CPU (several backends: FILE.<backend>.json; several "
                   "models: a folder).  Open it with: model-explorer MODEL --extensions=model_explorer_onnx "
                   "--node_data_paths=FILE.json")


def _more_verbose(ctx: click.Context, param: click.Parameter, value: int) -> None:
    if value:
        ctx.find_object(_State).verbose += value


def _set_node_data(ctx: click.Context, param: click.Parameter, value: pathlib.Path | None) -> None:
    ctx.find_object(_State).node_data = value


def _report_options(f):
    """--json, --html, --node-data, --jobs, -v: check's and convert's reports, for one model or several."""
    options = [
        click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout."),
        click.option("--html", "html_path", type=click.Path(dir_okay=True, path_type=pathlib.Path),
                     metavar="FILE", help=_HTML_HELP),
        click.option("--node-data", type=click.Path(dir_okay=True, path_type=pathlib.Path), metavar="FILE.json",
                     expose_value=False, callback=_set_node_data, help=_NODE_DATA_HELP),
        click.option("-j", "--jobs", type=click.IntRange(min=0), default=1, show_default=True, help=_JOBS_HELP),
        click.option("-v", "--verbose", count=True, expose_value=False, callback=_more_verbose,
                     help="Every node left on CPU, one row each, and each backend's options (as mobile-ep -v)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _write_html(state: _State, result: CheckReport | ConvertReport, path: pathlib.Path) -> None:
    from mobile_ep.reports import html

    written = html.write_html(result, path)
    if not state.quiet:
        click.echo(f"wrote {written}", err=True)


def _show(state: _State, result: CheckReport | ConvertReport, html_path: pathlib.Path | None,
          as_json: bool, text: Callable[..., str]) -> None:
    """One model's report: the HTML file if asked for, then JSON or *text* on stdout."""
    from mobile_ep.reports import text as report

    if html_path is not None:
        _write_html(state, result, html_path)
    if state.node_data is not None:
        from mobile_ep.reports import node_data

        for written in node_data.write_node_data(result, state.node_data):
            if not state.quiet:
                click.echo(f"wrote {written}", err=True)
    if as_json:
        click.echo(report.to_json(result))
    elif not state.quiet:
        click.echo(escape(text(result, verbose=state.verbose > 0)), nl=False)


def _html_folder(path: pathlib.Path | None) -> pathlib.Path | None:
    if path is None:
        return None
    if path.suffix.lower() in (".html", ".htm"):
        raise UsageError(f"--html {path}: with several models --html names a folder (one report per model, "
                         "and index.html)")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _node_data_folder(path: pathlib.Path | None) -> pathlib.Path | None:
    if path is None:
        return None
    if path.suffix.lower() == ".json":
        raise UsageError(f"--node-data {path}: with several models --node-data names a folder (one file per model)")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _run_batch(state: _State, paths: Sequence[pathlib.Path], work, jobs: int) -> list[batch.ModelResult]:
    """Run *work* on each model; errors and (-v) reports are printed as they come, the table at the end."""

    from mobile_ep import progress
    from mobile_ep.cli import batch

    state.plugins  # noqa: B018 -- load (and warn about) plugins once, before any job starts
    jobs = jobs or os.cpu_count() or 1

    def on_result(result: batch.ModelResult) -> None:
        with progress.paused():
            if not result.ok:
                click.echo(escape(f"mobile-ep: error: {result.error}" if result.model in result.error
                                  else f"mobile-ep: error: {result.model}: {result.error}", one_line=True), err=True)
            elif result.text:
                click.echo(escape(f"== {result.model}", one_line=True), nl=True)
                click.echo(escape(result.text), nl=False)

    with _progress(state):
        return batch.run_many(paths, work, jobs=jobs, debug=state.debug, on_result=on_result)


def _many(state: _State, arguments: Sequence[pathlib.Path], kind: str, as_json: bool,
          html_path: pathlib.Path | None, jobs: int, run: Callable[[pathlib.Path, str, Plugins], CheckReport | ConvertReport],
          text: Callable[..., str], row: Callable[..., dict]) -> None:
    """check or convert several models: *run* (a model, its unique stem, the plugins) gives each report,
    *text* and *row* describe it for -v and the summary table."""
    from mobile_ep.cli import batch
    from mobile_ep.reports import html, nodegraph

    paths = batch.expand_models(arguments)
    stems = batch.unique_stems(paths)
    html_dir = _html_folder(html_path)
    node_data_dir = _node_data_folder(state.node_data)
    plugins = state.plugins

    def work(i: int) -> batch.ModelResult:
        with nodegraph.recording(html_dir is not None or node_data_dir is not None):
            result = run(paths[i], stems[i], plugins)
        written = str(html.write_html(result, html_dir / f"{stems[i]}.html")) if html_dir is not None else None
        if node_data_dir is not None:
            from mobile_ep.reports import node_data

            node_data.write_node_data(result, node_data_dir / f"{stems[i]}.json")
        described = text(result, verbose=state.verbose > 1) if state.verbose and not as_json else ""
        return batch.ModelResult(str(paths[i]), True, row=row(result),
                                 report=result.as_dict() if as_json else None, text=described, html=written)

    results = _run_batch(state, paths, work, jobs)
    _finish_batch(state, results, kind, as_json, html_dir)


def _finish_batch(state: _State, results: Sequence[batch.ModelResult], kind: str, as_json: bool,
                  html_dir: pathlib.Path | None) -> None:
    import json

    from mobile_ep.cli import batch

    if html_dir is not None:
        from mobile_ep.reports import html

        index = html_dir / "index.html"
        index.write_text(html.batch_index(kind, results), encoding="utf-8")
        if not state.quiet:
            click.echo(f"wrote {index}", err=True)
    if as_json:
        click.echo(json.dumps(batch.batch_json(results), indent=2))
    elif not state.quiet:
        click.echo(escape(batch.summary_table(results, kind)), nl=False)
    failed = [r for r in results if not r.ok]
    if failed:
        raise batch.SomeModelsFailed(f"{len(failed)} of {len(results)} models failed: "
                                     + ", ".join(r.model for r in failed[:5]) + (", …" if len(failed) > 5 else ""))


@main.command()
@click.argument("models", nargs=-1, type=click.Path(path_type=pathlib.Path), metavar="[MODEL]...")
@click.option("--ep", "eps", metavar="NAMES", help=_EP_HELP, shell_complete=_complete_backends)
@click.option("-O", "--option", "option_values", multiple=True, metavar="B.KEY=VALUE", help=_OPTION_HELP)
@_pipeline_options
@_report_options
@click.option("--against-ep", is_flag=True,
              help="Also ask the real EP each backend's rules predict (qnn: onnxruntime-qnn's QNN EP, through the "
                   "ort:QNNExecutionProvider backend of mobile-ep-ort) and list every node the two place "
                   "differently.")
@click.pass_obj
def check(state: _State, models: tuple[pathlib.Path, ...], eps: str | None, option_values: tuple[str, ...],
          shapes: tuple[str, ...], dims: tuple[str, ...], max_partitions: int | None, min_nodes: int | None,
          legalize: bool, cost_model: bool, as_json: bool, html_path: pathlib.Path | None, jobs: int,
          against_ep: bool) -> None:
    """Predict how ORT Mobile's execution providers will partition MODEL.

    The model is analysed as an ONNX Runtime session sees it after the basic-level optimizations every
    session applies.  For each backend: the partitions, the nodes claimed, every node left on the CPU
    with the reason, and ORT's verdict (YES / MAYBE / NO) -- as ORT Mobile sees the model today, and
    after `mobile-ep convert` (with the given --shape/--dim fixes and the backend's rewrites).

    Several models (paths, folders of *.onnx, quoted globs such as 'models/**/*.onnx') are checked one
    after the other (or --jobs at a time); a model that fails is reported and the others go on; a table
    ends the run, one line per model: nodes, and per backend the partitions, the share of nodes claimed
    and the verdict, as is and after convert.  Exit code 6 if a model failed.

    \b
    Examples:
      mobile-ep check resnet50.onnx --ep nnapi
      mobile-ep check model.onnx --ep nnapi,coreml -O nnapi.api_level=28 --json > report.json
      mobile-ep check ocr.onnx --ep nnapi --shape x=1,3,48,320
      mobile-ep check densenet.onnx --ep nnapi,coreml --html report.html
      mobile-ep check models/ --ep nnapi --jobs 4 --html reports/
      mobile-ep -v check 'zoo/**/*.onnx' --ep coreml      (every report, then the table)
      mobile-ep check model.onnx --ep qnn --against-ep     (the rules against the real QNN EP, node by node)
      mobile-ep check model.onnx --ep ort:QNNExecutionProvider   (an installed plugin EP's own placement)
    """
    from mobile_ep import pipeline as api
    from mobile_ep.cli import batch
    from mobile_ep.reports import nodegraph
    from mobile_ep.reports import text as report

    options = _options(state, eps, option_values, shapes, dims, max_partitions, min_nodes, legalize, cost_model)
    if batch.is_batch(models):
        if against_ep:
            raise UsageError("--against-ep takes one model")
        _check_many(state, models, options, as_json, html_path, jobs)
        return
    with tempfile.TemporaryDirectory(prefix="mobile-ep-sample-") as tmp:
        path = models[0] if models else _sample(pathlib.Path(tmp), state)
        with _progress(state, ["load", "partition", "after_convert"]), \
                nodegraph.recording(html_path is not None or state.node_data is not None):
            result = api.check(path, options=options, plugins=state.plugins, against_ep=against_ep)
    _show(state, result, html_path, as_json, functools.partial(report.check_text, combined=len(options.backends) > 1))


def _check_many(state: _State, arguments: Sequence[pathlib.Path], options: Options, as_json: bool,
                html_path: pathlib.Path | None, jobs: int) -> None:
    from mobile_ep import pipeline as api
    from mobile_ep.cli import batch
    from mobile_ep.reports import text as report

    def run(path: pathlib.Path, stem: str, plugins: Plugins) -> CheckReport:
        return api.check(path, options=options, plugins=plugins)

    _many(state, arguments, "check", as_json, html_path, jobs, run,
          functools.partial(report.check_text, combined=len(options.backends) > 1), batch.check_row)


@main.command()
@click.argument("models", nargs=-1, type=click.Path(path_type=pathlib.Path), metavar="[MODEL]...")
@click.option("--ep", "ep", required=True, metavar="NAME", help="The target backend (nnapi, coreml, or a plugin's).",
              shell_complete=_complete_backends)
@click.option("-o", "--output", "output", type=click.Path(path_type=pathlib.Path), default=pathlib.Path("out"),
              show_default=True, help="Folder for the converted model and report.json (with several models: "
                                      "one subfolder per model).")
@click.option("-O", "--option", "option_values", multiple=True, metavar="KEY=VALUE", help=_OPTION_HELP)
@click.option("--verify/--no-verify", default=True, show_default=True,
              help="Run original and converted models on the same inputs and compare every output.")
@click.option("--seed", default=0, show_default=True, help="Seed for the generated verification inputs.")
@click.option("--compile", "compile_", is_flag=True,
              help="Also lower each partition with the backend itself: <model>.<ep>.compiled.onnx (EPContext nodes), "
                   "its app bundle and the runtime adapter's sources in adapter/.")
@_pipeline_options
@_report_options
@click.pass_obj
def convert(state: _State, models: tuple[pathlib.Path, ...], ep: str, output: pathlib.Path,
            option_values: tuple[str, ...], verify: bool, seed: int, compile_: bool, shapes: tuple[str, ...],
            dims: tuple[str, ...], max_partitions: int | None, min_nodes: int | None, legalize: bool, cost_model: bool,
            as_json: bool, html_path: pathlib.Path | None, jobs: int) -> None:
    """Convert MODEL into an EP-aware model for ORT Mobile with backend EP.

    Before export: input shapes are fixed (--shape/--dim), onnxruntime folds constants, and nodes the
    backend cannot take are rewritten into equivalent ones it can (only where it then claims them).

    \b
    Writes into the output folder (atomically):
      <model>.<ep>.onnx   nodes the EP claims kept as plain ONNX ops, as few partitions as possible
      <model>.<ep>.ort    the same in ORT format, for ORT Mobile (CPU fusions recorded for CPU nodes)
      report.json         partitions, every node left on CPU with the reason, verification
    and with --compile:
      <model>.<ep>.compiled.onnx  each partition replaced by a com.microsoft:EPContext node holding the
                                  backend's payload (verified with the backend's emulator)
      <model>.<ep>.compiled/      the same split for an app: plan.json, CPU segments, payloads
      adapter/                    the backend's runtime adapter sources (NNAPI: C++, JNI, Kotlin)

    Without MODEL, converts the built-in sample CNN (written to the output folder).  Several models
    (paths, folders, quoted globs) are converted into one subfolder each of the output folder, --jobs at a
    time, with a summary table at the end; exit code 6 if a model failed.

    \b
    Examples:
      mobile-ep convert model.onnx --ep nnapi -o out/
      mobile-ep convert model.onnx --ep coreml -O coreml.model_format=NeuralNetwork
      mobile-ep convert model.onnx --ep nnapi --compile -O nnapi.compile_ops=extended
      mobile-ep convert model.onnx --ep nnapi --html out/report.html
      mobile-ep convert models/ --ep coreml -o out/ --jobs 2
    """
    from mobile_ep import pipeline as api
    from mobile_ep.cli import batch
    from mobile_ep.reports import nodegraph
    from mobile_ep.reports import text as report

    options = _options(state, ep, option_values, shapes, dims, max_partitions, min_nodes, legalize, cost_model)
    _refuse_model_name(output)
    if batch.is_batch(models):
        _convert_many(state, models, output, options, verify, seed, compile_, as_json, html_path, jobs)
        return
    path = models[0] if models else _sample(output, state)
    plan = ["load", "partition", "export_onnx", "export_ort"] + (["compile"] if compile_ else []) \
        + (["verify"] if verify else [])
    with _progress(state, plan), nodegraph.recording(html_path is not None or state.node_data is not None):
        result = api.convert(path, ep, output, options=options, plugins=state.plugins, verify=verify, seed=seed,
                             compile=compile_)
    _show(state, result, html_path, as_json, report.convert_text)
    if not _compile_warning(state, result):  # (one warning: a --compile of nothing says why already)
        _compile_warning(state, result, report.nothing_gained)


_MODEL_SUFFIXES = (".onnx", ".ort", ".pb", ".mlmodel", ".mlpackage", ".tflite")


def _refuse_model_name(output: pathlib.Path) -> None:
    """``-o vad.onnx``: -o names a folder; a name ending in a model suffix is a mistake (unless that folder exists)."""
    if output.suffix.lower() in _MODEL_SUFFIXES and not output.is_dir():
        raise UsageError(f"-o {output}: -o names the output folder (convert writes <model>.<ep>.onnx, .ort and "
                         f"report.json into it), not a model file; give a folder, e.g. -o {output.parent / 'out'}")


def _compile_warning(state: _State, result: ConvertReport, warn: Callable[..., str | None] | None = None) -> bool:
    """``--compile`` that compiled nothing or fewer nodes than predicted (or *warn*'s warning): a warning (an error with --strict); whether
    there was one."""
    from mobile_ep.errors import BackendError
    from mobile_ep.reports import text as report

    warning = (warn or report.compile_warning)(result)
    if warning is None:
        return False
    if state.strict:
        raise BackendError(f"{warning} (--strict)")
    click.echo(f"mobile-ep: warning: {escape(warning, one_line=True)}", err=True)
    return True


def _convert_many(state: _State, arguments: Sequence[pathlib.Path], output: pathlib.Path, options: Options,
                  verify: bool, seed: int, compile_: bool, as_json: bool, html_path: pathlib.Path | None,
                  jobs: int) -> None:
    from mobile_ep import pipeline as api
    from mobile_ep.cli import batch
    from mobile_ep.reports import text as report

    def run(path: pathlib.Path, stem: str, plugins: Plugins) -> ConvertReport:
        return api.convert(path, options.backends[0], output / stem, options=options, plugins=plugins,
                           verify=verify, seed=seed, compile=compile_)

    _many(state, arguments, "convert", as_json, html_path, jobs, run, report.convert_text, batch.convert_row)


@main.command()
@click.argument("model", type=click.Path(path_type=pathlib.Path))
@click.option("--ep", "ep", required=True, metavar="NAME", help="The backend to quantize for (nnapi, or a plugin's).",
              shell_complete=_complete_backends)
@click.option("--calibration", type=click.Path(path_type=pathlib.Path), metavar="DIR",
              help="Folder of calibration samples: one .npz per sample (an array per input name), or one .npy "
                   "per sample for a one-input model.")
@click.option("--random", "random_count", type=click.IntRange(min=1), metavar="N",
              help="Calibrate on N random inputs instead: a smoke test, labelled as such in the report.")
@click.option("-o", "--output", "output", type=click.Path(path_type=pathlib.Path), default=None,
              help="The quantized model to write (default: <model>.<ep>.qdq.onnx beside MODEL).")
@click.option("-O", "--option", "option_values", multiple=True, metavar="KEY=VALUE", help=_OPTION_HELP)
@click.option("--shape", "shapes", multiple=True, metavar="NAME=D1,D2,...",
              help="Shape of the random inputs for a dynamic input (repeatable).")
@click.option("--dim", "dims", multiple=True, metavar="PARAM=VALUE", help="Fix every dim named PARAM (repeatable).")
@click.option("--seed", default=0, show_default=True, help="Seed of the --random inputs.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
@click.pass_obj
def quantize(state: _State, model: pathlib.Path, ep: str, calibration: pathlib.Path | None, random_count: int | None,
             output: pathlib.Path | None, option_values: tuple[str, ...], shapes: tuple[str, ...],
             dims: tuple[str, ...], seed: int, as_json: bool) -> None:
    """Quantize float MODEL for backend EP: a QDQ model by onnxruntime.quantization (static, calibrated).

    The backend declares what it can run quantized and onnxruntime.quantization does the rest: NNAPI
    takes uint8 activations and int8 weights per tensor, per channel for Conv weights from API 29
    (-O nnapi.api_level=29 or later); Core ML gets int8 weights only (activations stay float; convert
    it with -O coreml.fold_qdq=true).  Calibration data should look like what the app will feed: give a
    folder of samples with --calibration; --random N only checks that the workflow runs.

    \b
    Prints (or with --json, writes as JSON):
      the quantization the backend chose and the calibration used
      the accuracy cost per output: max abs error and SQNR (dB) against the float model, on the samples
      what the backend takes of the quantized model, as is and after mobile-ep convert

    \b
    Then the usual workflow:
      mobile-ep quantize model.onnx --ep nnapi --calibration calib/ -o model.qdq.onnx
      mobile-ep check model.qdq.onnx --ep nnapi
      mobile-ep convert model.qdq.onnx --ep nnapi -o out/    (verified in quantization steps)
    See docs/quantized.md.
    """
    import json

    from mobile_ep.quantize import quantize as run_quantize

    options = _options(state, ep, option_values, shapes, dims)
    with _progress(state):
        result = run_quantize(model, ep, output, calibration=calibration, random=random_count, seed=seed,
                              options=options, plugins=state.plugins)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
    elif not state.quiet:
        click.echo(escape(result.text()), nl=False)


@main.command()
@click.argument("model", type=click.Path(path_type=pathlib.Path))
@click.argument("node")
@click.option("--ep", "eps", metavar="NAMES", help=_EP_HELP, shell_complete=_complete_backends)
@click.option("-O", "--option", "option_values", multiple=True, metavar="B.KEY=VALUE", help=_OPTION_HELP)
@_pipeline_options
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON on stdout.")
@click.pass_obj
def explain(state: _State, model: pathlib.Path, node: str, eps: str | None, option_values: tuple[str, ...],
            shapes: tuple[str, ...], dims: tuple[str, ...], max_partitions: int | None, min_nodes: int | None,
            legalize: bool, cost_model: bool, as_json: bool) -> None:
    """Explain why NODE of MODEL runs where it does, and what would change that.

    NODE is a node name as `check -v` and the HTML report show it (the graph an ORT session partitions),
    or the name of a value the node produces.  For each backend: the partition it joins (and the cost
    model's view of it) or the reason it stays on the CPU; then every change that would move it, each
    computed by re-running the rules and the partitioner: another value of each backend option (a higher
    api_level, another model_format or deployment_target, ...), the dynamic input shapes fixed (your
    --shape/--dim, or a guess it says is one), what `mobile-ep convert` does to it (the rewrite that
    replaces it), and the other installed backends.

    \b
    Examples:
      mobile-ep explain resnet50.onnx n14 --ep nnapi          a Sum left on CPU: convert rewrites it
      mobile-ep explain model.onnx conv_3 --ep coreml -O coreml.model_format=NeuralNetwork
      mobile-ep explain ocr.onnx logits --ep nnapi --shape x=1,3,48,320 --json
    """
    import json

    from mobile_ep.reports import explain as explaining

    options = _options(state, eps, option_values, shapes, dims, max_partitions, min_nodes, legalize, cost_model)
    with _progress(state, ["load", "partition", "after_convert"]):
        result = explaining.explain(model, node, options=options, plugins=state.plugins)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
    elif not state.quiet:
        click.echo(escape(result.text(verbose=state.verbose > 0)), nl=False)


@main.command(name="list")
@click.option("-v", "--verbose", "verbose", count=True, help="Also show each backend's options.")
@click.pass_obj
def list_(state: _State, verbose: int) -> None:
    """List installed backends: name, version, preferred layout, number of op rules, package.

    With -v, also each backend's options with their defaults.  Set MOBILE_EP_DISABLE_PLUGINS=1 to load
    no plugins (or a comma-separated list of plugin names to block).

    \b
    Examples:
      mobile-ep list
      mobile-ep list -v                               options and their defaults
      MOBILE_EP_DISABLE_PLUGINS=coreml mobile-ep list  as if Core ML were not installed
    """
    from mobile_ep.contract.plugins import DISABLE_ENV

    plugins = state.plugins
    backends = plugins.backends()
    if not backends:
        click.echo("no backends installed" + (f" ({DISABLE_ENV} is set)" if _env_blocked() else ""))
    for name, backend in backends.items():
        click.echo(f"{name:<10} {backend.version:<8} {backend.preferred_layout:<5} {len(backend.rules):>4} ops  "
                   f"{plugins.origin(name)}")
        if state.verbose or verbose:
            click.echo(_backend_details(backend), nl=False)
    for error in plugins.errors:
        click.echo(f"broken plugin {error.plugin!r}: {error.message}", err=True)


def _backend_details(backend) -> str:
    """``list -v``: a backend's description, platform, the onnxruntime its rules follow and its options (the
    option column aligned, the help wrapped under it; values as -O takes them)."""
    import importlib.metadata
    import shutil
    import textwrap

    width = max(60, shutil.get_terminal_size((100, 24)).columns)
    lines = textwrap.wrap(backend.description, width, initial_indent="    ", subsequent_indent="    ")
    platform = getattr(backend, "platform", "any") or "any"
    lines.append(f"    platform: {platform}")
    rules_from = getattr(backend, "rules_from", "")
    if rules_from:
        writer = importlib.metadata.version("onnxruntime")
        lines.extend(textwrap.wrap(
            f"rules taken from the EP of {rules_from}: an app's ORT Mobile of that release or newer claims at "
            f"least these nodes (a newer EP may claim more); the .ort is written by onnxruntime {writer}, so the "
            f"app needs ORT Mobile {writer} or newer", width, initial_indent="    ", subsequent_indent="      "))
    options = [(f"-O {backend.name}.{option}={default}", help_text)
               for option, default, help_text in backend.describe_options()]
    column = min(max((len(o) for o, _ in options), default=0), 34)
    for option, help_text in options:
        if len(option) > column:  # (a long value: its help starts on the next line)
            lines.append(f"    {option}")
            option = ""
        lines.extend(textwrap.wrap(help_text, width, initial_indent=f"    {option:<{column}}  ",
                                   subsequent_indent=" " * (column + 6)) or [f"    {option}"])
    return "\n".join(lines) + "\n"


def _env_blocked() -> bool:

    from mobile_ep.contract.plugins import DISABLE_ENV

    return bool(os.environ.get(DISABLE_ENV, "").strip())


@main.command()
@click.option("--ep", "eps", metavar="NAMES", help=_EP_HELP)
@click.option("-O", "--option", "option_values", multiple=True, metavar="B.KEY=VALUE", help=_OPTION_HELP)
@click.option("--format", "fmt", type=click.Choice(["text", "md"]), default="text", show_default=True,
              help="Plain text, or a Markdown table (as in the README).")
@click.pass_obj
def ops(state: _State, eps: str | None, option_values: tuple[str, ...], fmt: str) -> None:
    """Show the ops each backend supports, with their conditions, generated from its rules.

    \b
    Examples:
      mobile-ep ops --ep nnapi
      mobile-ep ops --ep coreml -O coreml.model_format=NeuralNetwork
      mobile-ep ops --format md > docs/ops.md
    """
    from mobile_ep import pipeline as api
    from mobile_ep.reports import text as report

    backends = api.resolve_backends(_options(state, eps, option_values), state.plugins)
    click.echo(report.ops_markdown(backends) if fmt == "md" else report.ops_text(backends), nl=False)


@main.command()
@click.option("--ep", "eps", metavar="NAMES", help=_EP_HELP)
@click.option("-O", "--option", "option_values", multiple=True, metavar="B.KEY=VALUE", help=_OPTION_HELP)
@click.option("--model", "models", multiple=True, type=click.Path(path_type=pathlib.Path),
              help="Also partition, compile and emulate this model (repeatable).")
@click.option("--shape", "shapes", multiple=True, metavar="NAME=D1,D2,...",
              help="Fix an input's shape of the --model models (repeatable), as check and convert do.")
@click.option("--dim", "dims", multiple=True, metavar="PARAM=VALUE",
              help="Fix every dim named PARAM of the --model models (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
@click.pass_obj
def conformance(state: _State, eps: str | None, option_values: tuple[str, ...], models: tuple[pathlib.Path, ...],
                shapes: tuple[str, ...], dims: tuple[str, ...], as_json: bool) -> None:
    """Run ONNX's own node tests through each backend: claim, compile, emulate, compare.

    Every node test case whose ops all have a rule in the backend is claimed (or declined, with the
    reason); a compiling backend then lowers the claimed case, emulates the payload and must reproduce
    ONNX's expected outputs.  Exit code 4 when a claimed case fails.  Plugin authors get the same suite
    in pytest from mobile_ep.testing (see docs/plugins.md).

    \b
    Examples:
      mobile-ep conformance --ep example
      mobile-ep -v conformance --ep nnapi --model model.onnx --json > conformance.json
      mobile-ep conformance --ep coreml --model det.onnx --shape x=1,3,640,640
    """
    import json

    from mobile_ep import pipeline as api
    from mobile_ep import testing
    from mobile_ep.errors import VerificationError

    options = _options(state, eps, option_values, shapes, dims)
    backends = api.resolve_backends(options, state.plugins)
    with _progress(state):
        results = [_conformance(testing, backend, models, options.shapes, options.dims) for backend in backends]
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in results], indent=2))
    elif not state.quiet:
        for result in results:
            click.echo(escape(result.text(verbose=state.verbose > 0)), nl=False)
    failed = [r for r in results if not r.ok]
    if failed:
        cases = sum(r.count("failed") for r in failed) + sum(m.status != "passed" for r in failed for m in r.models)
        raise VerificationError(f"{', '.join(r.backend for r in failed)}: {cases} conformance case(s) failed")


def _conformance(testing, backend, models: Sequence[pathlib.Path], shapes=None, dims=None):
    """``testing.run_conformance``, case by case when a progress bar follows it."""
    from mobile_ep import progress

    if not progress.active():
        return testing.run_conformance(backend, models=models, shapes=shapes, dims=dims)
    cases = testing.candidate_cases(backend)
    result = testing.run_conformance(backend, cases=[])
    for case in progress.track(cases, f"conformance {backend.name}: node tests"):
        result.cases.extend(testing.run_conformance(backend, cases=[case]).cases)
    for model in progress.track(list(models), f"conformance {backend.name}: models"):
        result.models.extend(testing.run_conformance(backend, cases=[], models=[model], shapes=shapes,
                                                     dims=dims).models)
    return result


@main.command()
@click.argument("shell", required=False, type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str | None) -> None:
    """Print the shell completion script for SHELL (default: from $SHELL).

    Completes commands, options, file names and --ep backend names.

    \b
    Enable it once:
      bash:  mobile-ep completion bash >> ~/.bashrc
      zsh:   mobile-ep completion zsh >> ~/.zshrc
      fish:  mobile-ep completion fish > ~/.config/fish/completions/mobile-ep.fish
    (or, without this command: eval "$(_MOBILE_EP_COMPLETE=bash_source mobile-ep)")
    """

    from click.shell_completion import get_completion_class

    if shell is None:
        shell = os.path.basename(os.environ.get("SHELL", "")) or "bash"
        if shell not in ("bash", "zsh", "fish"):
            raise UsageError(f"cannot tell your shell from SHELL={os.environ.get('SHELL', '')!r}: "
                             "name it (bash, zsh or fish)")
    cls = get_completion_class(shell)
    assert cls is not None
    click.echo(cls(main, {}, "mobile-ep", "_MOBILE_EP_COMPLETE").source())


main.add_command(_llm_command)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
