"""``convert --ep qnn --compile``: the real deployable artifact, made by onnxruntime-qnn itself.

A session of the model with the QNN EP (the backend's options: SoC, HTP architecture, precision) and ORT's
EPContext output on writes ``<model>.qnn.compiled.onnx``, where each partition the EP compiled is one
``com.microsoft:EPContext`` node (``source=QNNExecutionProvider``, ``ep_sdk_version`` = the QNN SDK it was
built with) and every other node stays, and its QNN context binary ``<model>.qnn.compiled_qnn.bin`` beside it
(``embed_mode=0``).  The payload is the vendor's: mobile-ep neither writes nor reads its bytes.

The artifact is then checked: the EPContext model is loaded back with the QNN EP (on x86-64 Linux the HTP
runs as a simulator) and run on deterministic random inputs, against onnxruntime's CPU EP on the model
before compiling, within the tolerance of the precision (:data:`TOLERANCES`).  The largest error is in the
result's metadata (``max_abs_error``); a larger one is a :class:`mobile_ep.VerificationError`.
"""

from __future__ import annotations

import pathlib

import numpy as np

from mobile_ep import VerificationError, runtime
from mobile_ep import model_io as mir
from mobile_ep.contract.compile import CompileError
from mobile_ep.passes import to_epcontext
from mobile_ep.passes.to_epcontext import CompiledNode, CompileResult

__all__ = ["TOLERANCES", "compile_with_ep", "context_binaries"]

#: (atol, rtol) of the HTP's outputs against onnxruntime's CPU result, by precision.  float32 models run on
#: the HTP in float16 arithmetic where the HTP has no float32 kernel; quantized ones are one or more
#: quantization steps off, so their tolerance is relative to each output's range (rtol is of the range).
TOLERANCES = {"float32": (1e-2, 1e-2), "fp16": (2e-2, 2e-2), "quantized": (0.0, 0.05)}


def context_binaries(model_path: pathlib.Path) -> list[pathlib.Path]:
    """The context files the EPContext nodes of *model_path* point to (``embed_mode=0``)."""
    files = []
    for node in _load(model_path).graph:
        if to_epcontext.is_context_node(node):
            path = model_path.parent / _text(node, "ep_cache_context")
            if path not in files:
                files.append(path)
    return files


def _load(path: pathlib.Path):
    with to_epcontext._binary_attributes_allowed():
        return mir.load(path, check=False, shapes=False)


def _text(node, name: str) -> str:
    attribute = node.attributes.get(name)
    value = None if attribute is None else attribute.value
    return value.decode() if isinstance(value, bytes) else "" if value is None else str(value)


def _error(reference: dict[str, np.ndarray], got: dict[str, np.ndarray], precision: str) -> tuple[float, bool]:
    atol, rtol = TOLERANCES[precision]
    worst, ok = 0.0, True
    for name, ref in reference.items():
        ref = np.asarray(ref)
        out = np.asarray(got[name])
        if ref.shape != out.shape:
            return float("inf"), False
        if not np.issubdtype(ref.dtype, np.floating):
            ok = ok and bool(np.array_equal(ref, out))
            continue
        diff = float(np.max(np.abs(ref.astype(np.float64) - out.astype(np.float64)))) if ref.size else 0.0
        worst = max(worst, diff)
        if precision == "quantized":
            span = float(np.max(ref) - np.min(ref)) if ref.size else 0.0
            ok = ok and diff <= rtol * max(span, 1e-6)
        else:
            ok = ok and bool(np.all(np.abs(ref - out) <= atol + rtol * np.abs(ref)))
    return worst, ok


def _compile(qnn, source: str, target: str, report: str) -> None:
    """(In a child process.) Create the session that writes the EPContext model; the error, if any, to *report*."""
    so = qnn.session_options()
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_file_path", target)
    so.add_session_config_entry("ep.context_embed_mode", "0")
    try:
        qnn.session(source, so)
    except Exception as exc:
        pathlib.Path(report).write_text(" ".join(str(exc).split()) or type(exc).__name__)


def _compile_in_child(qnn, source: pathlib.Path, target: pathlib.Path) -> str | None:
    """Compile in a child process: onnxruntime-qnn 2.7 crashes (a segmentation fault) on some models, which must not
    end mobile-ep.  Returns the error, or ``None``."""
    import multiprocessing

    report = target.parent / f".{target.stem}.compile-error"
    report.unlink(missing_ok=True)
    process = multiprocessing.get_context("spawn").Process(target=_compile, args=(qnn, str(source), str(target),
                                                                                  str(report)))
    process.start()
    process.join()
    if report.exists():
        message = report.read_text()
        report.unlink()
        return message
    if process.exitcode != 0:
        return f"onnxruntime-qnn crashed creating the session (exit code {process.exitcode})"
    return None


def compile_with_ep(backend, source: pathlib.Path, target: pathlib.Path, workdir: pathlib.Path) -> CompileResult:
    """Have the QNN EP compile *source* into *target* (and its context binary), then run both and compare."""
    source, target = pathlib.Path(source), pathlib.Path(target)
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    qnn = backend.execution_provider()
    for stale in [target, *target.parent.glob(f"{target.stem}_qnn*.bin")]:
        stale.unlink(missing_ok=True)
    original = _load(source)
    result = CompileResult(backend.name, nodes=len(original.graph))
    message = _compile_in_child(qnn, source, target)
    if message is not None:
        raise CompileError(f"{source}: the QNN EP could not compile the model: {message}")
    if not target.exists():  # the EP took nothing: no EPContext model
        return result
    result.path = str(target)
    written = _load(target)
    left = {n.name for n in written.graph}
    taken = [n.name or "" for n in original.graph if n.name not in left]
    binaries = context_binaries(target)
    result.bundle = ",".join(str(b) for b in binaries)
    result.adapter = str(to_epcontext.write_adapter(backend, target.parent / "adapter", files=backend.app_files()))

    # Check it: the EPContext model on the HTP (simulator) against the CPU EP on the model before compiling.
    feeds = runtime.make_inputs(source, seed=0)
    reference = runtime.run(source, feeds)
    compiled = qnn.session(str(target))
    names = [o.name for o in compiled.get_outputs()]
    got = dict(zip(names, compiled.run(names, feeds), strict=True))
    precision = backend.options.precision
    worst, ok = _error(reference, got, precision)
    atol, rtol = TOLERANCES[precision]
    for node in written.graph:
        if not to_epcontext.is_context_node(node):
            continue
        result.compiled.append(CompiledNode(
            node.name or "", _text(node, "partition_name") or node.name or "", backend.name, "qnn-context-binary",
            taken, [v.name or "" for v in node.inputs if v is not None], [v.name or "" for v in node.outputs],
            sum(b.stat().st_size for b in binaries if b.exists()),
            {"source": _text(node, "source"), "ep_sdk_version": _text(node, "ep_sdk_version"),
             "ep_cache_context": _text(node, "ep_cache_context"),
             "soc_model": str(backend.options.soc_model), "precision": precision,
             "max_abs_error": f"{worst:.3g}", "tolerance": f"atol {atol} rtol {rtol}" if precision != "quantized"
             else f"{rtol} of each output's range"}))
    if len(result.compiled) > 1:  # the nodes taken are those of all partitions together
        for entry in result.compiled[1:]:
            entry.nodes = []
    if not ok:
        raise VerificationError(f"{target}: the QNN context binary run on the HTP simulator differs from onnxruntime's "
                                f"CPU result on {source.name}: max abs error {worst:.3g} (precision {precision})")
    return result
