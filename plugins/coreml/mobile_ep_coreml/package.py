"""From a MIL program to the bytes of a ``.mlpackage``, and back to its files.

:func:`convert` runs coremltools' converter (its MIL pass pipeline, then the ML Program or NeuralNetwork
backend) and :func:`save_package` writes the ``.mlpackage`` directory the way ``MLModel.save`` does,
made reproducible: the manifest's item identifiers are derived from the item paths instead of random
UUIDs, and the conversion date is left out of the model's metadata.  :func:`zip_package` packs a
package directory into a deterministic zip (sorted entries, fixed timestamps), the compiled
partition's payload; :func:`read_package` unpacks it in memory.

A package holds::

    Manifest.json
    Data/com.apple.CoreML/model.mlmodel        the Model protobuf (program or NeuralNetwork layers)
    Data/com.apple.CoreML/weights/weight.bin   ML Program weights (MIL blob storage)
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import logging
import os
import pathlib
import tempfile
import uuid
import warnings
import zipfile
from collections.abc import Iterator, Mapping
from typing import Any

from mobile_ep import CompileError

from .emulator import MODEL_PATH, WEIGHTS_PATH
from .mil import coremltools

__all__ = [
    "MODEL_PATH",
    "WEIGHTS_PATH",
    "convert",
    "save_package",
    "zip_package",
    "read_package",
    "write_package",
    "make_reproducible",
]

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
_UUID_NAMESPACE = uuid.UUID("6f0f5c1e-3a57-4d8e-9b0e-6d6f62696c65")


class _BelowErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """coremltools prints progress bars (stderr) and layer names (stdout), and warns about what mobile-ep
    does on purpose (bool I/O converted to float32, ...): keep only its errors."""
    logger = logging.getLogger("coremltools")
    quiet = _BelowErrors()
    logger.addFilter(quiet)
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.removeFilter(quiet)


@contextlib.contextmanager
def _young_objects_only() -> Iterator[None]:
    """``ct.convert`` ends with a full ``gc.collect()``, which in a process holding many objects (a test
    run, a large model) costs far more than the conversion: freeze what exists so it scans only what
    the conversion allocated.  (Left alone when the host froze objects itself: unfreezing is global.)"""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def convert(program: Any, *, mlprogram: bool, target: Any, float16: bool, compute_units: str) -> Any:
    """An ``MLModel`` (not loaded: Core ML itself only runs on Apple hardware) for a MIL program."""
    ct = coremltools()
    units = {"ALL": ct.ComputeUnit.ALL, "CPUOnly": ct.ComputeUnit.CPU_ONLY,
             "CPUAndGPU": ct.ComputeUnit.CPU_AND_GPU, "CPUAndNeuralEngine": ct.ComputeUnit.CPU_AND_NE}[compute_units]
    kwargs: dict[str, Any] = {"convert_to": "mlprogram" if mlprogram else "neuralnetwork",
                              "minimum_deployment_target": target, "compute_units": units,
                              "skip_model_load": True}
    if mlprogram:
        kwargs["compute_precision"] = ct.precision.FLOAT16 if float16 else ct.precision.FLOAT32
    try:
        with _quiet(), _young_objects_only():
            model = ct.convert(program, **kwargs)
    except Exception as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        raise CompileError(f"coreml: coremltools could not convert the partition: {message}") from exc
    if not mlprogram and float16:
        from coremltools.models.utils import _convert_neural_network_spec_weights_to_fp16

        with _quiet():
            spec = _convert_neural_network_spec_weights_to_fp16(model.get_spec())
            model = ct.models.MLModel(spec, skip_model_load=True)
    return model


def save_package(model: Any, path: str | os.PathLike, metadata: Mapping[str, str]) -> pathlib.Path:
    """Save *model* as a ``.mlpackage`` directory at *path*, reproducibly, with *metadata* added."""
    path = pathlib.Path(path)
    spec = model._spec if hasattr(model, "_spec") else model.get_spec()
    user = spec.description.metadata.userDefined
    for key in [k for k in user if k.endswith("conversion_date")]:
        del user[key]
    for key, value in metadata.items():
        user[key] = value
    with _quiet():
        model.save(str(path))
    make_reproducible(path)
    return path


def make_reproducible(package: pathlib.Path) -> None:
    """Make a saved package's bytes depend on its content only: sorted protobuf maps, manifest identifiers
    derived from the item paths."""
    _deterministic_specs(package)
    _normalize_manifest(package)


def _deterministic_specs(package: pathlib.Path) -> None:
    """Rewrite each ``.mlmodel`` of the package with its protobuf maps (the metadata, op attributes and
    inputs) in sorted order: coremltools serializes them in hash-map order, which changes between runs."""
    from coremltools.proto import Model_pb2

    for mlmodel in sorted(package.rglob("*.mlmodel")):
        spec = Model_pb2.Model()
        spec.ParseFromString(mlmodel.read_bytes())
        mlmodel.write_bytes(spec.SerializeToString(deterministic=True))


def _normalize_manifest(package: pathlib.Path) -> None:
    manifest_path = package / "Manifest.json"
    manifest = json.loads(manifest_path.read_text())
    entries = manifest.get("itemInfoEntries", {})
    renamed = {}
    mapping = {}
    for key, entry in entries.items():
        new_key = str(uuid.uuid5(_UUID_NAMESPACE, str(entry.get("path", key))))
        renamed[new_key] = entry
        mapping[key] = new_key
    manifest["itemInfoEntries"] = dict(sorted(renamed.items()))
    if manifest.get("rootModelIdentifier") in mapping:
        manifest["rootModelIdentifier"] = mapping[manifest["rootModelIdentifier"]]
    manifest_path.write_text(json.dumps(manifest, indent=4, sort_keys=True) + "\n")


def zip_package(package: str | os.PathLike) -> bytes:
    """The package directory as a deterministic zip (entries relative to the package root, stored
    uncompressed: weights barely compress, and deflating hundreds of MB takes longer than compiling)."""
    root = pathlib.Path(package)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for item in sorted(root.rglob("*")):
            relative = item.relative_to(root).as_posix()
            if item.is_dir():  # kept even when empty: the manifest lists weights/ for every ML Program
                info = zipfile.ZipInfo(relative + "/", date_time=_ZIP_DATE)
                info.external_attr = (0o40755 << 16) | 0x10
                archive.writestr(info, b"")
                continue
            info = zipfile.ZipInfo(relative, date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            archive.writestr(info, item.read_bytes())
    return buffer.getvalue()


def read_package(data: bytes) -> dict[str, bytes]:
    """The files of a zipped package, by relative POSIX path (directories are left out)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            files = {}
            for info in archive.infolist():
                name = info.filename
                parts = pathlib.PurePosixPath(name).parts
                if name.startswith("/") or ".." in parts:
                    raise CompileError(f"coreml: the payload holds an unsafe path {name!r}")
                if not info.is_dir():
                    files[name] = archive.read(info)
            return files
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise CompileError(f"coreml: the payload is not a zipped .mlpackage ({exc})") from None


def write_package(data: bytes, path: str | os.PathLike) -> pathlib.Path:
    """Unpack a zipped package into the directory *path* (which must not exist)."""
    path = pathlib.Path(path)
    files = read_package(data)
    path.mkdir(parents=True)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            if info.is_dir():
                path.joinpath(*pathlib.PurePosixPath(info.filename).parts).mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return path


def package_bytes(model: Any, metadata: Mapping[str, str]) -> bytes:
    """Save *model* into a temporary ``.mlpackage`` and return it zipped."""
    with tempfile.TemporaryDirectory(prefix="mobile-ep-coreml-") as tmp:
        path = save_package(model, pathlib.Path(tmp) / "partition.mlpackage", metadata)
        return zip_package(path)
