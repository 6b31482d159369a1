"""Writing ``convert``'s output set: the output folder holds the previous complete set or the new one.

Every output is written into a staging folder inside the output folder (``.mobile-ep-staging-<pid>-<n>``:
the same file system, so moving a file in is one rename).  Only when the set is complete is it moved in:
the old ``report.json`` is removed first, then each output replaces its old version, outputs of the old set
the new one lacks are removed, and the new ``report.json`` comes last, listing every file of the set with its
size and sha256.  So a ``report.json`` always describes the files beside it, whatever stopped a run (an
error, Ctrl-C, SIGKILL, a full disk): a run stopped before the move leaves the old set as it was; the staging
folder is removed on the way out, or, after SIGKILL, by the next run into that folder.  Ctrl-C never stops
the move half-way: one that came before the move started stops the run there, with the old set in place, and
one that comes during it (on the main thread, where Python handles signals) is raised once the new set is
complete.

Errors of the file system (``-o`` naming a file, a read-only file system, a full disk) are one-line
:class:`OutputError`\\ s naming the path and the cause (exit code 7).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import itertools
import json
import os
import pathlib
import shutil
import signal
import threading
from collections.abc import Iterator
from typing import Any

from mobile_ep import progress
from mobile_ep.errors import MobileEpError, OutputError

__all__ = ["STAGING_PREFIX", "Stage", "staged", "output_error", "file_digest"]

#: The name of a staging folder starts with this (followed by the process id).
STAGING_PREFIX = ".mobile-ep-staging-"
_COUNTER = itertools.count()


def output_error(exc: OSError, fallback: str | os.PathLike) -> OutputError:
    """A one-line :class:`OutputError` for *exc*: the path it names (else *fallback*) and the cause."""
    where = exc.filename if exc.filename is not None else fallback
    cause = {errno.ENOSPC: "no space left on the device", errno.EROFS: "read-only file system",
             errno.EDQUOT: "disk quota exceeded", errno.EFBIG: "file too large for the file system or limits",
             errno.ENOTDIR: "a part of the path is a file, not a folder",
             errno.EEXIST: "exists and is not a folder"}.get(exc.errno or 0, exc.strerror or str(exc))
    return OutputError(f"{where}: cannot write: {cause}")


def file_digest(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


@dataclasses.dataclass
class Stage:
    """The staging folder of one run writing into *out_dir*."""

    out_dir: pathlib.Path
    folder: pathlib.Path = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.out_dir = pathlib.Path(self.out_dir)
        self.folder = self.out_dir / f"{STAGING_PREFIX}{os.getpid()}-{next(_COUNTER)}"
        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise OutputError(f"{self.out_dir}: exists and is not a folder (-o names the output folder)")

    def create(self) -> None:
        """Make the output folder (if needed) and the staging folder; remove staging folders of runs that
        were killed."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for old in self.out_dir.glob(f"{STAGING_PREFIX}*"):
            pid = old.name[len(STAGING_PREFIX):].partition("-")[0]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                shutil.rmtree(old, ignore_errors=True)
        self.folder.mkdir()
        progress.notify("stage", str(self.folder))  # (removed by the command line's parent if this process crashes)

    def relocate(self, result: Any, checked: Any = (), compiled: Any = None) -> None:
        """Paths into the staging folder made paths into the output folder, where the files are once moved
        in: the report's ``outputs``, each verification's candidate, the compiled model's files."""
        for key, value in result.outputs.items():
            result.outputs[key] = self.final(value)
        for verification in checked:
            verification.candidate = self.final(verification.candidate)
        if compiled is not None:
            for field in ("path", "bundle", "adapter"):
                if isinstance(getattr(compiled, field, None), str):
                    setattr(compiled, field, self.final(getattr(compiled, field)))

    def final(self, path: str) -> str:
        """*path* (a string) into the staging folder, as the path it gets in the output folder."""
        old = str(self.folder)
        return str(self.out_dir) + path[len(old):] if path.startswith(old) else path

    def files(self) -> list[pathlib.Path]:
        return sorted(p for p in self.folder.rglob("*") if p.is_file())

    def commit(self, report: dict, report_name: str = "report.json") -> pathlib.Path:
        """Write *report* (with ``files``: each output's path, size and sha256) and move the set in."""
        report["files"] = [{"path": p.relative_to(self.folder).as_posix(), "bytes": p.stat().st_size,
                            "sha256": file_digest(p)} for p in self.files() if p.name != report_name
                           or p.parent != self.folder]
        staged_report = self.folder / report_name
        staged_report.write_text(json.dumps(report, indent=2) + "\n")
        with _interrupts_held():
            return self._move_in(staged_report, self.out_dir / report_name)

    def _move_in(self, staged_report: pathlib.Path, target_report: pathlib.Path) -> pathlib.Path:
        report_name = target_report.name
        stale = _previous_set(target_report, self.out_dir)
        with contextlib.suppress(FileNotFoundError):
            target_report.unlink()  # from here on, no report describes a set that is not complete
        new = [entry for entry in sorted(self.folder.iterdir()) if entry.name != report_name]
        for entry in new:
            target = self.out_dir / entry.name
            if entry.is_dir() and target.exists():
                old = self.folder / f".old-{entry.name}"
                os.replace(target, old) if target.is_dir() else target.unlink()
                os.replace(entry, target)
                shutil.rmtree(old, ignore_errors=True)
            else:
                if target.is_dir():
                    shutil.rmtree(target)
                os.replace(entry, target)
        for name in stale - {entry.name for entry in new}:
            path = self.out_dir / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        os.replace(staged_report, target_report)
        return target_report

    def cleanup(self) -> None:
        for _ in range(3):  # (a converter thread may still be adding a file while it goes)
            shutil.rmtree(self.folder, ignore_errors=True)
            if not self.folder.exists():
                return


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Ctrl-C held back for the body (on the main thread, where Python runs signal handlers): one that came
    before the body starts stops the run there; one that comes during it is raised when the body is done."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield  # (SIGINT ignored, or left to the system, by whoever runs us)
        return
    seen: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        _noop()  # (a call: a signal that came just before is handled here, by the handler above)
        if not seen:
            yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if seen:
            previous(signal.SIGINT, None)
            raise KeyboardInterrupt


def _noop() -> None:
    pass


@contextlib.contextmanager
def staged(out_dir: str | os.PathLike) -> Iterator[Stage]:
    """A :class:`Stage` for *out_dir*, removed on the way out; file-system errors become :class:`OutputError`."""
    stage = Stage(pathlib.Path(out_dir))
    try:
        yield stage
    except OSError as exc:
        raise output_error(exc, out_dir) from None
    except Exception as exc:  # (onnxruntime reports a full disk as its own failure to write a file)
        if stage.folder.exists() and _disk_full(stage.folder):
            raise OutputError(f"{out_dir}: cannot write: no space left on the device") from None
        if isinstance(exc, MobileEpError) and exc.args and str(stage.folder) in str(exc.args[0]):
            exc.args = (str(exc.args[0]).replace(str(stage.folder), str(stage.out_dir)),)  # (what it would be)
        raise
    finally:
        stage.cleanup()


def _disk_full(folder: pathlib.Path) -> bool:
    try:
        return shutil.disk_usage(folder).free < 64 * 1024
    except OSError:
        return False


def _alive(pid: int) -> bool:
    """Whether process *pid* runs (a zombie, killed and not yet reaped by its parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    try:  # (Linux: the state field of /proc/PID/stat, after the command name in parentheses)
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _previous_set(report: pathlib.Path, out_dir: pathlib.Path) -> set[str]:
    """Names (in *out_dir*) of the outputs the old *report* lists."""
    try:
        old = json.loads(report.read_text())
    except (OSError, ValueError):
        return set()
    if not isinstance(old, dict):
        return set()
    names = set()
    for entry in old.get("files") or []:
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            names.add(pathlib.PurePosixPath(entry["path"]).parts[0])
    for path in (old.get("outputs") or {}).values() if isinstance(old.get("outputs"), dict) else ():
        if isinstance(path, str) and pathlib.Path(path).parent.resolve() == out_dir.resolve():
            names.add(pathlib.Path(path).name)
    # (only plain names of files beside the report: never "/", "..", a path, or a staging folder)
    return {name for name in names if name not in ("", ".", "..") and "/" not in name and "\\" not in name
            and not name.startswith(STAGING_PREFIX) and name != report.name}
