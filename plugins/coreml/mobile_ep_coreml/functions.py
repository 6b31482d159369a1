"""Several compiled partitions as the functions of one multifunction ``.mlpackage`` (iOS 18 / macOS 15).

:func:`package_functions` unpacks each ML Program payload, names its ``main`` function, and has coremltools'
``save_multifunction`` (``coremltools.models.utils``) write one package: one Model protobuf whose ML Program holds
every function, ``defaultFunctionName`` the first one, and one ``weights/weight.bin`` in which a constant that
several functions hold with the same values is one blob (coremltools' deduplication across functions), e.g. the
weights the prefill and decode graphs of a decoder share.  It needs no Core ML framework (the models are not
loaded), so it runs on Linux.

The package gets the metadata mobile-ep's emulator and adapter read: ``com.github.mobile-ep.io`` is
``{"functions": {name: mapping}}``, each function's ONNX <-> Core ML feature mapping as its own payload had it.
Each function comes back as a payload of format ``coreml-mlpackage/1`` whose ``data`` is the whole package and
whose metadata names the ``function``: :func:`mobile_ep_coreml.compiler.emulate` runs that function.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import tempfile
from collections.abc import Mapping

from mobile_ep import CompiledPartition, CompileError

from . import __version__
from .emulator import IO_METADATA_KEY, MODEL_PATH
from .mil import coremltools

__all__ = ["FUNCTION_NAME", "package_functions"]

#: What a function name may be (a MIL identifier).
FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Multifunction models are Core ML 8 (specification 9): iOS 18, macOS 15.
TARGET = "iOS18"


def package_functions(payloads: Mapping[str, CompiledPartition], path: str | os.PathLike
                      ) -> tuple[pathlib.Path, dict[str, CompiledPartition]]:
    """Write the ML Program *payloads* (by function name, the first the default function) as one multifunction
    package at *path* + ``.mlpackage`` (which must not exist); return its path and, per function, the payload
    that runs it."""
    from .compiler import FORMAT
    from .package import _quiet, make_reproducible, read_package, write_package, zip_package

    if not payloads:
        raise CompileError("coreml: a multifunction package needs at least one function")
    for name, payload in payloads.items():
        if not FUNCTION_NAME.fullmatch(name):
            raise CompileError(f"coreml: {name!r} is not a Core ML function name (letters, digits, _)")
        if payload.format != FORMAT:
            raise CompileError(f"coreml: function {name!r} is a {payload.format!r} payload, not {FORMAT}")
        if payload.metadata.get("model_format") != "MLProgram" or payload.metadata.get("function"):
            raise CompileError(f"coreml: function {name!r} is not a one-function ML Program (a multifunction "
                               "package holds ML Programs: -O model_format=MLProgram)")
    coremltools()
    from coremltools.models.utils import MultiFunctionDescriptor, save_multifunction
    from coremltools.proto import Model_pb2

    target = pathlib.Path(f"{path}.mlpackage")
    if target.exists():
        raise CompileError(f"coreml: {target} exists")
    io: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="mobile-ep-coreml-functions-") as tmp:
        descriptor = MultiFunctionDescriptor()
        for name, payload in payloads.items():
            source = write_package(payload.data, pathlib.Path(tmp) / f"{name}.mlpackage")
            model = Model_pb2.Model()
            model.ParseFromString(read_package(payload.data)[MODEL_PATH])
            io[name] = json.loads(model.description.metadata.userDefined[IO_METADATA_KEY])
            descriptor.add_function(str(source), "main", name)
        descriptor.default_function_name = next(iter(payloads))
        written = pathlib.Path(tmp) / "functions.mlpackage"
        try:
            with _quiet():
                save_multifunction(descriptor, str(written))
        except Exception as exc:
            message = " ".join(str(exc).split()) or type(exc).__name__
            raise CompileError(f"coreml: coremltools could not write the multifunction package: {message}") from exc
        model_file = written / MODEL_PATH
        model = Model_pb2.Model()
        model.ParseFromString(model_file.read_bytes())
        first = next(iter(payloads.values())).metadata
        user = model.description.metadata.userDefined
        user[IO_METADATA_KEY] = json.dumps({"functions": io}, sort_keys=True, separators=(",", ":"))
        user["com.github.mobile-ep.compiler"] = f"mobile-ep-coreml {__version__}"
        for key in ("model_format", "compute_precision", "compute_units"):
            user[f"com.github.mobile-ep.{key}"] = first.get(key, "")
        user["com.github.mobile-ep.deployment_target"] = TARGET
        model_file.write_bytes(model.SerializeToString())
        make_reproducible(written)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(written, target)
    for item in target.rglob("*"):  # (coremltools writes the model file owner-only: as save_package's files)
        if item.is_file():
            item.chmod(0o644)
    data = zip_package(target)
    functions = {}
    for name, payload in payloads.items():
        functions[name] = CompiledPartition(
            backend=payload.backend, format=FORMAT, data=data, inputs=payload.inputs, outputs=payload.outputs,
            metadata={**payload.metadata, "function": name, "deployment_target": TARGET,
                      "specification_version": str(model.specificationVersion)})
    return target, functions
