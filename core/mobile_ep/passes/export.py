"""Export: the EP-aware model's files — ``<model>.<ep>.onnx`` (written by :mod:`mobile_ep.passes.fuse_cpu`)
and ``<model>.<ep>.ort``, converted by onnxruntime itself (:func:`mobile_ep.export.ort_format.write_ort`).

The ORT-format conversion builds an onnxruntime session, which releases the GIL: it runs on a thread while
the pipeline goes on (compiling partitions, say).  Models whose weights exceed ORT format's 2 GB limit, or that
hold what the format has no type for (optional values, 4-bit tensors), get the ``.onnx`` only, with a one-line
note.
"""

from __future__ import annotations

import logging
import pathlib
import re
import threading
from collections.abc import Callable

from mobile_ep.errors import UsageError
from mobile_ep.export import ort_format

__all__ = ["output_paths", "file_label", "OrtExport", "refuse_overwriting"]

log = logging.getLogger(__name__)


def file_label(backend: str) -> str:
    """A backend's name as written in file names: characters other than letters, digits, ``_``, ``-`` and ``.``
    become ``-`` (``ort:QNNExecutionProvider`` -> ``ort-QNNExecutionProvider``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", backend)


def output_paths(model_path: pathlib.Path, backend: str, out_dir: pathlib.Path) -> dict[str, pathlib.Path]:
    """``model.nnapi.onnx``, ``model.nnapi.ort`` and ``report.json`` in *out_dir*."""
    stem = model_path.name[:-5] if model_path.name.endswith(".onnx") else model_path.stem
    label = file_label(backend)
    return {
        "onnx": out_dir / f"{stem}.{label}.onnx",
        "ort": out_dir / f"{stem}.{label}.ort",
        "report": out_dir / "report.json",
    }


class OrtExport:
    """The ORT-format file of a written ``.onnx``, converted on a thread: :meth:`start`, then :meth:`result`."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._outcome: tuple[bool, object] | None = None

    def start(self, onnx_path: pathlib.Path, ort_path: pathlib.Path) -> None:
        """Start converting (reading the model to see whether the ORT format can hold it is on the thread too)."""
        self._run(_convert, onnx_path, ort_path)

    def _run(self, func: Callable, *args: object) -> None:
        def run() -> None:
            try:
                self._outcome = (True, func(*args))
            except BaseException as exc:  # handed to the caller by result()
                self._outcome = (False, exc)

        self._thread = threading.Thread(target=run, name="mobile-ep-ort-format", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def result(self) -> object:
        """The written path, or None when the ORT format cannot hold the model (a warning says why); raises
        what the conversion raised."""
        self.wait()
        assert self._outcome is not None, "start() was not called"
        ok, value = self._outcome
        if not ok:
            raise value  # type: ignore[misc]
        return value


def _convert(onnx_path: pathlib.Path, ort_path: pathlib.Path) -> pathlib.Path | None:
    if not ort_format.ort_format_fits(onnx_path):
        log.warning("%s: weights too large for ORT format (2 GB limit); no .ort written", onnx_path.name)
        return None
    refusal = ort_format.ort_format_refusal(onnx_path)
    if refusal is not None:
        log.warning("%s: the ORT format cannot hold %s; no .ort written", onnx_path.name, refusal)
        return None
    return ort_format.write_ort(onnx_path, ort_path)


def refuse_overwriting(source: pathlib.Path, outputs) -> None:
    """A usage error when an output would replace the input model itself."""
    resolved = source.resolve() if source.exists() else source
    for p in outputs:
        if p.exists() and p.resolve() == resolved:
            raise UsageError(f"output {p} would overwrite the input model; choose another --output folder")
