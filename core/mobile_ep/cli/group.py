"""The ``mobile-ep`` command group: every error becomes one line and a documented exit code, Ctrl-C a clean
"interrupted" (exit 130) once outputs are cleaned up."""

from __future__ import annotations

import os
import sys

import click

from mobile_ep.errors import EXIT_BACKEND, EXIT_FAILURE, MobileEpError
from mobile_ep.textsafe import escape

__all__ = ["EXIT_CODES_HELP", "Group", "PluginFailure"]

EXIT_CODES_HELP = """\b
Exit codes:
  0  success
  1  internal error (a bug: rerun with --debug and report it)
  2  usage error (bad option, unknown backend)
  3  the model cannot be used (missing, truncated, not ONNX, invalid, rejected by onnxruntime)
  4  verification failed: the converted model's outputs differ from the original's
  5  a backend plugin failed to load or misbehaved (with --strict)
  6  several models were given (folder, glob, list) and at least one failed;
     the summary says which and why, and the others were still processed
  7  an output could not be written (-o names a file, read-only file system,
     full disk); the output folder keeps its previous complete set
  8  onnxruntime, onnx or another native library crashed (a segmentation
     fault, an abort); the line names the model and the step, and the output
     folder keeps its previous complete set
  130  interrupted (Ctrl-C); the output folder keeps its previous complete set
"""



class PluginFailure(MobileEpError):
    exit_code = EXIT_BACKEND


class Group(click.Group):
    """Turns every error into one line and a documented exit code (``--debug`` shows tracebacks)."""

    def invoke(self, ctx: click.Context) -> object:
        _commands_handle_interrupts()
        try:
            return self._invoke(ctx)
        finally:
            _done_with_interrupts()

    def _invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except MobileEpError as exc:
            if _debug(ctx):
                raise
            click.echo(f"mobile-ep: error: {escape(str(exc), one_line=True)}", err=True)
            ctx.exit(exc.exit_code)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except OSError as exc:  # (writing an output: -o at a file, a read-only file system, a full disk)
            if _debug(ctx):
                raise
            from mobile_ep.writes import output_error

            error = output_error(exc, "output")
            click.echo(f"mobile-ep: error: {escape(str(error), one_line=True)}", err=True)
            ctx.exit(error.exit_code)
        except KeyboardInterrupt:
            _exit_interrupted(ctx)
        except Exception as exc:
            if _INTERRUPTED and not _debug(ctx):
                _exit_interrupted(ctx)
            if _debug(ctx):
                raise
            message = escape(" ".join(str(exc).split()), one_line=True) or "no message"
            click.echo(f"mobile-ep: internal error: {type(exc).__name__}: {message} "
                       "(rerun with --debug for the traceback)", err=True)
            ctx.exit(EXIT_FAILURE)
        return None


_INTERRUPTED: list[bool] = []


def _interrupt(signum, frame):
    _INTERRUPTED.append(True)  # (an interrupt inside an import can reach us as an ImportError)
    raise KeyboardInterrupt


def _exit_interrupted(ctx: click.Context) -> None:
    """``mobile-ep: interrupted``, exit code 130 (outputs were cleaned up on the way here).  As the program,
    the process ends at once: a second interrupt while the interpreter shuts down must not turn it into a
    death by SIGINT."""
    from mobile_ep import _startup

    click.echo("mobile-ep: interrupted", err=True)
    if _startup.PROGRAM:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    ctx.exit(130)


def _commands_handle_interrupts() -> None:
    """Ctrl-C as KeyboardInterrupt again, once a command runs (see :mod:`mobile_ep._startup`)."""
    import signal

    from mobile_ep import _startup

    if signal.getsignal(signal.SIGINT) is _startup.interrupted_while_starting:
        signal.signal(signal.SIGINT, _interrupt)


def _done_with_interrupts() -> None:
    """As the program, once the command has ended (its outputs written or cleaned up, its report printed), a
    Ctrl-C changes nothing: it is ignored from here to the exit, so the exit code stays the command's.  (The
    interpreter puts back the default action of a signal it handles while it shuts down: a Ctrl-C then would
    kill the process without a word.  One it ignores stays ignored.)"""
    import signal

    from mobile_ep import _startup

    if _startup.PROGRAM:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _debug(ctx: click.Context) -> bool:
    state = ctx.obj
    return bool(state is not None and state.debug)
