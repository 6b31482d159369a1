"""Errors that reach the user as one line and a documented exit code."""

from __future__ import annotations

__all__ = [
    "EXIT_OK",
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "EXIT_BAD_MODEL",
    "EXIT_VERIFY",
    "EXIT_BACKEND",
    "EXIT_IO",
    "MobileEpError",
    "UsageError",
    "ModelError",
    "VerificationError",
    "BackendError",
    "OutputError",
]

#: Everything worked.
EXIT_OK = 0
#: An unexpected internal error (a bug: please report it with ``--debug`` output).
EXIT_FAILURE = 1
#: The command line was wrong (unknown option, unknown backend, bad ``--option`` value).
EXIT_USAGE = 2
#: The model could not be read: missing, truncated, not ONNX, invalid, or rejected by onnxruntime.
EXIT_BAD_MODEL = 3
#: The converted model does not reproduce the original's results.
EXIT_VERIFY = 4
#: A backend plugin failed to load or misbehaved.
EXIT_BACKEND = 5
#: An output could not be written: ``-o`` names a file, a read-only file system, a full disk.
EXIT_IO = 7


class MobileEpError(Exception):
    """An error the user can act on; the CLI prints ``str(error)`` as one line and exits with ``exit_code``."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str) -> None:
        # One line, always: multi-line messages from libraries are folded.
        super().__init__(" ".join(str(message).split()))


class UsageError(MobileEpError):
    exit_code = EXIT_USAGE


class ModelError(MobileEpError):
    """The input model cannot be used."""

    exit_code = EXIT_BAD_MODEL


class VerificationError(MobileEpError):
    """A converted model's outputs differ from the original's."""

    exit_code = EXIT_VERIFY


class BackendError(MobileEpError):
    """A backend plugin is missing, broken or violated its contract."""

    exit_code = EXIT_BACKEND


class OutputError(MobileEpError):
    """An output could not be written (the path and the cause are named)."""

    exit_code = EXIT_IO
