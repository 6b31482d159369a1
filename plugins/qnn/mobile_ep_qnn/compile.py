"""``convert --ep qnn --compile``: the real deployable artifact, made by onnxruntime-qnn itself.

A session of the model with the QNN EP (the backend's options: SoC, HTP architecture, precision) and ORT's
EPContext output on writes ``<model>.qnn.compiled.onnx``, where each partition the EP compiled is one
``com.microsoft:EPContext`` node (``source=QNNExecutionProvider``, ``ep_sdk_version`` = the QNN SDK it was
built with) and every other node stays, and its QNN context binary ``<model>.qnn.compiled_qnn.bin`` beside it
(``embed_mode=0``).  The payload is the vendor's: mobile-ep neither writes nor reads its bytes.

The artifact is then checked: the EPContext model is loaded back with the QNN EP (on x86-64 Linux the HTP
runs as a simulator) and run on deterministic random inputs, against onnxruntime's CPU EP on the model
before compiling, within the tolerance of the arithmetic the HTP uses (:data:`ARITHMETIC`, :data:`TOLERANCES`:
float32 graphs run in fp16).  The largest error, the arithmetic and the tolerance are in the result's
metadata; a larger error is a :class:`mobile_ep.VerificationError`.
"""

from __future__ import annotations

import pathlib

import numpy as np

from mobile_ep import VerificationError, runtime
from mobile_ep import model_io as mir
from mobile_ep.contract.compile import CompileError
from mobile_ep.passes import to_epcontext
from mobile_ep.passes.to_epcontext import CompiledNode, CompileResult

__all__ = ["ARITHMETIC", "TOLERANCES", "compare", "compile_with_ep", "context_binaries", "tolerance_text"]

#: What the HTP computes float graphs in, by the backend's ``precision``: the QNN EP runs float32 graphs in
#: fp16 arithmetic unless ``enable_htp_fp16_precision=0`` (its default is 1, which ``precision=float32`` keeps;
#: this wheel's HTP simulator gave bit-identical results with 0 and 1, so fp16 is what runs either way).
ARITHMETIC = {"float32": "fp16", "fp16": "fp16", "quantized": "quantized"}
#: (atol, rtol) of the HTP's outputs against onnxruntime's CPU result, by arithmetic, with rtol relative to
#: each output's largest magnitude (its scale), not to each element: fp16 rounding errors (2^-11 relative
#: per operation) add up with depth and are of the output's scale wherever an element is near zero.
#: Measured: a 24-layer residual MLP 0.7% of its scale, a 2-layer decoder's logits 1.9%, a 24-layer 0.5B one
#: 0.051 (about 1%); a wrong lowering is off by the order of the scale.  Quantized models are steps of their
#: output scale off: rtol of each output's range.
TOLERANCES = {"fp16": (1e-2, 3e-2), "quantized": (0.0, 0.05)}


def tolerance_text(precision: str) -> str:
    """The tolerance ``--compile`` checks *precision* with, as the report states it."""
    arithmetic = ARITHMETIC[precision]
    atol, rtol = TOLERANCES[arithmetic]
    if arithmetic == "quantized":
        return f"{rtol} of each output's range (quantized)"
    return f"atol {atol} + {rtol} of each output's largest magnitude (fp16 arithmetic on the HTP)"


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


def compare(reference: dict[str, np.ndarray], got: dict[str, np.ndarray], precision: str) -> tuple[float, bool]:
    """The largest absolute error of *got* against *reference* (by output name) and whether every output is
    within the tolerance of the arithmetic the HTP uses for *precision* (:data:`ARITHMETIC`,
    :data:`TOLERANCES`); outputs that are not floats must be equal."""
    arithmetic = ARITHMETIC[precision]
    atol, rtol = TOLERANCES[arithmetic]
    worst, ok = 0.0, True
    for name, ref in reference.items():
        ref = np.asarray(ref)
        out = np.asarray(got[name])
        if ref.shape != out.shape:
            return float("inf"), False
        if not np.issubdtype(ref.dtype, np.floating):
            ok = ok and bool(np.array_equal(ref, out))
            continue
        if not ref.size:
            continue
        reference64 = ref.astype(np.float64)
        diff = float(np.max(np.abs(reference64 - out.astype(np.float64))))
        worst = max(worst, diff) if not np.isnan(diff) else float("inf")
        if arithmetic == "quantized":
            ok = ok and diff <= rtol * max(float(np.max(ref) - np.min(ref)), 1e-6)
        else:
            ok = ok and diff <= atol + rtol * float(np.max(np.abs(reference64)))
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
    result.adapter = str(to_epcontext.write_adapter(backend, target.parent / "adapter", files=backend.app_files(),
                                                    names=to_epcontext.adapter_names(target, target)))

    # Check it: the EPContext model on the HTP (simulator) against the CPU EP on the model before compiling.
    # (a float model at the level verification runs it: the session that looked at it, when a command kept it)
    level = runtime.compiled_reference_level(source)
    feeds = runtime.make_inputs(source, seed=0, level=level)
    reference = runtime.run(source, feeds, level=level)
    compiled = qnn.session(str(target))
    names = [o.name for o in compiled.get_outputs()]
    got = dict(zip(names, compiled.run(names, feeds), strict=True))
    precision = backend.options.precision
    worst, ok = compare(reference, got, precision)
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
             "arithmetic": ARITHMETIC[precision], "max_abs_error": f"{worst:.3g}",
             "tolerance": tolerance_text(precision)}))
    if len(result.compiled) > 1:  # the nodes taken are those of all partitions together
        for entry in result.compiled[1:]:
            entry.nodes = []
    if not ok:
        raise VerificationError(f"{target}: the QNN context binary run on the HTP simulator differs from onnxruntime's "
                                f"CPU result on {source.name}: max abs error {worst:.3g}, beyond the tolerance of "
                                f"precision {precision}: {tolerance_text(precision)}")
    return result
