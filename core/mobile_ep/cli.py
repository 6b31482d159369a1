"""The ``mobile-ep`` command."""

from __future__ import annotations

import logging
import pathlib
import sys
import tempfile
from collections.abc import Sequence

import click

from . import __version__, api, report
from .errors import EXIT_BACKEND, EXIT_FAILURE, MobileEpError, UsageError
from .plugins import DISABLE_ENV, Plugins, make_plugins

EXIT_CODES_HELP = """\b
Exit codes:
  0  success
  1  internal error (a bug: rerun with --debug and report it)
  2  usage error (bad option, unknown backend)
  3  the model cannot be used (missing, truncated, not ONNX, invalid, rejected by onnxruntime)
  4  verification failed: the converted model's outputs differ from the original's
  5  a backend plugin failed to load or misbehaved (with --strict)
"""


class _State:
    def __init__(self, debug: bool, verbose: int, quiet: bool, strict: bool) -> None:
        self.debug = debug
        self.verbose = verbose
        self.quiet = quiet
        self.strict = strict
        self._plugins: Plugins | None = None

    @property
    def plugins(self) -> Plugins:
        if self._plugins is None:
            self._plugins = make_plugins()
            self._plugins.backends()  # a plugin failing to register its backends is broken too
            for error in self._plugins.errors:
                if self.strict:
                    raise _PluginFailure(f"plugin {error.plugin!r} {error.message}")
                click.echo(f"mobile-ep: warning: plugin {error.plugin!r} {error.message}", err=True)
        return self._plugins


class _PluginFailure(MobileEpError):
    exit_code = EXIT_BACKEND


def _parse_eps(value: str | None) -> list[str]:
    if not value:
        return []
    return [name.strip() for name in value.split(",") if name.strip()]


def _parse_options(values: Sequence[str], eps: Sequence[str]) -> dict[str, dict[str, str]]:
    """``-O nnapi.api_level=29`` (or ``-O api_level=29`` when a single backend is selected)."""
    result: dict[str, dict[str, str]] = {}
    for item in values:
        if "=" not in item:
            raise UsageError(f"--option {item!r}: expected BACKEND.KEY=VALUE")
        key, value = item.split("=", 1)
        if "." in key:
            backend, key = key.split(".", 1)
        elif len(eps) == 1:
            backend = eps[0]
        else:
            raise UsageError(f"--option {item!r}: name the backend, e.g. nnapi.{key}={value}")
        result.setdefault(backend.strip(), {})[key.strip()] = value
    return result


class _Group(click.Group):
    """Turns every error into one line and a documented exit code (``--debug`` shows tracebacks)."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except MobileEpError as exc:
            if _debug(ctx):
                raise
            click.echo(f"mobile-ep: error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except KeyboardInterrupt:
            click.echo("mobile-ep: interrupted", err=True)
            ctx.exit(130)
        except Exception as exc:
            if _debug(ctx):
                raise
            message = " ".join(str(exc).split()) or "no message"
            click.echo(f"mobile-ep: internal error: {type(exc).__name__}: {message} "
                       "(rerun with --debug for the traceback)", err=True)
            ctx.exit(EXIT_FAILURE)
        return None


def _debug(ctx: click.Context) -> bool:
    state = ctx.obj
    return bool(state is not None and state.debug)


@click.group(cls=_Group, epilog=EXIT_CODES_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mobile-ep")
@click.option("--debug", is_flag=True, help="Show full tracebacks instead of one-line errors.")
@click.option("-v", "--verbose", count=True, help="More detail (every node left on CPU; -vv: log messages).")
@click.option("-q", "--quiet", is_flag=True, help="Print only errors (and --json output).")
@click.option("--strict", is_flag=True, help="Treat a plugin that fails to load as an error (exit 5).")
@click.pass_context
def main(ctx: click.Context, debug: bool, verbose: int, quiet: bool, strict: bool) -> None:
    """Get ONNX models onto mobile accelerators: Android NNAPI, Apple Core ML, and backend plugins.

    \b
    Examples:
      mobile-ep list                                   installed backends
      mobile-ep check model.onnx                       what ORT Mobile's EPs would do with it
      mobile-ep check model.onnx --ep nnapi --json     the same, as JSON
      mobile-ep convert model.onnx --ep nnapi -o out/  EP-aware .onnx + .ort + report.json
      mobile-ep convert --ep coreml                    convert the built-in sample CNN
      mobile-ep ops --ep nnapi --format md             supported ops and their conditions
    """
    # An embedding application may pass its own plugin manager as the context object.
    given = ctx.obj if isinstance(ctx.obj, Plugins) else None
    ctx.obj = _State(debug, verbose, quiet, strict)
    ctx.obj._plugins = given
    level = logging.DEBUG if verbose >= 2 else logging.WARNING
    logging.basicConfig(level=level, format="mobile-ep: %(levelname)s: %(name)s: %(message)s")


_EP_HELP = "Backend(s), comma-separated, in priority order (default: all installed)."
_OPTION_HELP = ("Backend option BACKEND.KEY=VALUE, repeatable (e.g. -O nnapi.api_level=29, "
                "-O coreml.model_format=NeuralNetwork); `mobile-ep list -v` shows every option.")


def _pipeline_options(f):
    """--shape, --dim, --max-partitions, --min-nodes, --no-legalize, --no-cost-model."""
    options = [
        click.option("--shape", "shapes", multiple=True, metavar="NAME=D1,D2,...",
                     help="Fix an input's shape (repeatable); NAME= may be left out for a one-input model."),
        click.option("--dim", "dims", multiple=True, metavar="PARAM=VALUE",
                     help="Fix every dim named PARAM (repeatable), e.g. --dim batch=1."),
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


def _pipeline(shapes: tuple[str, ...], dims: tuple[str, ...], max_partitions: int | None, min_nodes: int | None,
              legalize: bool, cost_model: bool) -> api.PipelineOptions:
    from .passes import parse_dim, parse_shape

    parsed_shapes: dict[str | None, tuple[int, ...]] = {}
    for text in shapes:
        name, value = parse_shape(text)
        if name in parsed_shapes:
            raise UsageError(f"--shape {name or '(the input)'} given twice")
        parsed_shapes[name] = value
    parsed_dims = dict(parse_dim(text) for text in dims)
    return api.PipelineOptions(parsed_shapes, parsed_dims, legalize, cost_model, max_partitions, min_nodes)


def _sample(directory: pathlib.Path, state: _State) -> pathlib.Path:
    from .samples import write_sample

    path = write_sample(directory)
    if not state.quiet:
        click.echo(f"no model given: using the built-in sample CNN ({path})", err=True)
    return path


@main.command()
@click.argument("model", required=False, type=click.Path(path_type=pathlib.Path))
@click.option("--ep", "eps", metavar="NAMES", help=_EP_HELP)
@click.option("-O", "--option", "option_values", multiple=True, metavar="B.KEY=VALUE", help=_OPTION_HELP)
@_pipeline_options
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
@click.pass_obj
def check(state: _State, model: pathlib.Path | None, eps: str | None, option_values: tuple[str, ...],
          shapes: tuple[str, ...], dims: tuple[str, ...], max_partitions: int | None, min_nodes: int | None,
          legalize: bool, cost_model: bool, as_json: bool) -> None:
    """Predict how ORT Mobile's execution providers will partition MODEL.

    The model is analysed as an ONNX Runtime session sees it after the basic-level optimizations every
    session applies.  For each backend: the partitions, the nodes claimed, every node left on the CPU
    with the reason, and ORT's verdict (YES / MAYBE / NO) -- as ORT Mobile sees the model today, and
    after `mobile-ep convert` (with the given --shape/--dim fixes and the backend's rewrites).

    \b
    Examples:
      mobile-ep check resnet50.onnx --ep nnapi
      mobile-ep check model.onnx --ep nnapi,coreml -O nnapi.api_level=28 --json > report.json
      mobile-ep check ocr.onnx --ep nnapi --shape x=1,3,48,320
    """
    names = _parse_eps(eps)
    options = _parse_options(option_values, names)
    pipeline = _pipeline(shapes, dims, max_partitions, min_nodes, legalize, cost_model)
    with tempfile.TemporaryDirectory(prefix="mobile-ep-sample-") as tmp:
        path = model if model is not None else _sample(pathlib.Path(tmp), state)
        result = api.check(path, names or None, options=options, plugins=state.plugins, strict=state.strict,
                           pipeline=pipeline)
    if as_json:
        click.echo(report.to_json(result))
    elif not state.quiet:
        click.echo(report.check_text(result, verbose=state.verbose > 0), nl=False)


@main.command()
@click.argument("model", required=False, type=click.Path(path_type=pathlib.Path))
@click.option("--ep", "ep", required=True, metavar="NAME", help="The target backend (nnapi, coreml, or a plugin's).")
@click.option("-o", "--output", "output", type=click.Path(path_type=pathlib.Path), default=pathlib.Path("out"),
              show_default=True, help="Folder for the converted model and report.json.")
@click.option("-O", "--option", "option_values", multiple=True, metavar="KEY=VALUE", help=_OPTION_HELP)
@click.option("--verify/--no-verify", default=True, show_default=True,
              help="Run original and converted models on the same inputs and compare every output.")
@click.option("--seed", default=0, show_default=True, help="Seed for the generated verification inputs.")
@click.option("--compile", "compile_", is_flag=True,
              help="Also lower each partition with the backend itself: <model>.<ep>.compiled.onnx (EPContext nodes), "
                   "its app bundle and the runtime adapter's sources in adapter/.")
@_pipeline_options
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
@click.pass_obj
def convert(state: _State, model: pathlib.Path | None, ep: str, output: pathlib.Path,
            option_values: tuple[str, ...], verify: bool, seed: int, compile_: bool, shapes: tuple[str, ...],
            dims: tuple[str, ...], max_partitions: int | None, min_nodes: int | None, legalize: bool, cost_model: bool,
            as_json: bool) -> None:
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

    Without MODEL, converts the built-in sample CNN (written to the output folder).

    \b
    Examples:
      mobile-ep convert model.onnx --ep nnapi -o out/
      mobile-ep convert model.onnx --ep coreml -O model_format=NeuralNetwork
      mobile-ep convert model.onnx --ep nnapi --compile -O compile_ops=extended
    """
    names = [ep]
    options = _parse_options(option_values, names)
    pipeline = _pipeline(shapes, dims, max_partitions, min_nodes, legalize, cost_model)
    path = model if model is not None else _sample(output, state)
    result = api.convert(path, ep, output, options=options, plugins=state.plugins, verify=verify, seed=seed,
                         strict=state.strict, pipeline=pipeline, compile=compile_)
    if as_json:
        click.echo(report.to_json(result))
    elif not state.quiet:
        click.echo(report.convert_text(result, verbose=state.verbose > 0), nl=False)


@main.command(name="list")
@click.option("-v", "--verbose", "verbose", count=True, help="Also show each backend's options.")
@click.pass_obj
def list_(state: _State, verbose: int) -> None:
    """List installed backends: name, version, preferred layout, number of op rules, package.

    With -v, also each backend's options with their defaults.  Set MOBILE_EP_DISABLE_PLUGINS=1 to load
    no plugins (or a comma-separated list of plugin names to block).
    """
    plugins = state.plugins
    backends = plugins.backends()
    if not backends:
        click.echo("no backends installed" + (f" ({DISABLE_ENV} is set)" if _env_blocked() else ""))
    for name, backend in backends.items():
        click.echo(f"{name:<10} {backend.version:<8} {backend.preferred_layout:<5} {len(backend.rules):>4} ops  "
                   f"{plugins.origin(name)}")
        if state.verbose or verbose:
            if backend.description:
                click.echo(f"    {backend.description}")
            for option, default, help_text in backend.describe_options():
                click.echo(f"    -O {name}.{option}={default:<12} {help_text}")
    for error in plugins.errors:
        click.echo(f"broken plugin {error.plugin!r}: {error.message}", err=True)


def _env_blocked() -> bool:
    import os

    return bool(os.environ.get(DISABLE_ENV, "").strip())


@main.command()
@click.option("--ep", "eps", metavar="NAMES", help=_EP_HELP)
@click.option("-O", "--option", "option_values", multiple=True, metavar="B.KEY=VALUE", help=_OPTION_HELP)
@click.option("--format", "fmt", type=click.Choice(["text", "md"]), default="text", show_default=True,
              help="Plain text, or a Markdown table (as in the README).")
@click.pass_obj
def ops(state: _State, eps: str | None, option_values: tuple[str, ...], fmt: str) -> None:
    """Show the ops each backend supports, with their conditions, generated from its rules."""
    names = _parse_eps(eps)
    backends = api.resolve_backends(names or None, _parse_options(option_values, names), state.plugins)
    click.echo(report.ops_markdown(backends) if fmt == "md" else report.ops_text(backends), nl=False)


@main.command()
@click.option("--ep", "eps", metavar="NAMES", help=_EP_HELP)
@click.option("-O", "--option", "option_values", multiple=True, metavar="B.KEY=VALUE", help=_OPTION_HELP)
@click.option("--model", "models", multiple=True, type=click.Path(path_type=pathlib.Path),
              help="Also partition, compile and emulate this model (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
@click.pass_obj
def conformance(state: _State, eps: str | None, option_values: tuple[str, ...], models: tuple[pathlib.Path, ...],
                as_json: bool) -> None:
    """Run ONNX's own node tests through each backend: claim, compile, emulate, compare.

    Every node test case whose ops all have a rule in the backend is claimed (or declined, with the
    reason); a compiling backend then lowers the claimed case, emulates the payload and must reproduce
    ONNX's expected outputs.  Exit code 4 when a claimed case fails.  Plugin authors get the same suite
    in pytest from mobile_ep.testing (see docs/plugins.md).

    \b
    Examples:
      mobile-ep conformance --ep example
      mobile-ep -v conformance --ep nnapi --model model.onnx --json > conformance.json
    """
    import json

    from . import testing
    from .errors import VerificationError

    names = _parse_eps(eps)
    backends = api.resolve_backends(names or None, _parse_options(option_values, names), state.plugins)
    results = [testing.run_conformance(backend, models=models) for backend in backends]
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in results], indent=2))
    elif not state.quiet:
        for result in results:
            click.echo(result.text(verbose=state.verbose > 0), nl=False)
    failed = [r for r in results if not r.ok]
    if failed:
        cases = sum(r.count("failed") for r in failed) + sum(m.status != "passed" for r in failed for m in r.models)
        raise VerificationError(f"{', '.join(r.backend for r in failed)}: {cases} conformance case(s) failed")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
