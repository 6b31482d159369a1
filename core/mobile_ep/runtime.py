"""Host execution and verification: run models with onnxruntime's CPU EP and compare their outputs.

Compiled-partition models (``com.microsoft:EPContext`` nodes, see :mod:`mobile_ep.passes.to_epcontext`) run here too:
:func:`plan_compiled` splits such a model, in topological order, into steps -- CPU segments (sub-models
run as onnxruntime sessions) and partitions (each run by its backend's ``emulate``) -- and
:func:`run_compiled` executes them.  :func:`run` and :func:`verify` dispatch to it by themselves.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pathlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from mobile_ep import sessions
from mobile_ep.contract.compile import CompileError
from mobile_ep.errors import ModelError, VerificationError

__all__ = ["OutputDiff", "QuantizedOutput", "Verification", "InputError", "make_inputs", "run", "compare",
           "quantized_outputs", "verify", "VERIFY_LEVEL", "compiled_reference_level", "Step", "plan_compiled",
           "run_compiled", "is_compiled_model", "holds_integer_kernels", "compiled_tolerances"]

#: How long one verification run of a model may take, in seconds (``MOBILE_EP_RUN_TIMEOUT``).
RUN_TIMEOUT = float(os.environ.get("MOBILE_EP_RUN_TIMEOUT", "600"))

#: Default tolerances: |a - b| <= atol + rtol * |b|.
ATOL = 1e-4
RTOL = 1e-3


#: Below this |reference| the relative error is not measured (it says nothing there): ``atol``.
REL_FLOOR = ATOL
#: A quantized output passes within this many steps of its scale.
MAX_STEPS = 1
#: The optimization level :func:`verify` runs the original and the ONNX candidates at: the basic level, the
#: graph every session starts from (a command that looked at the model through that level runs it with the
#: same session, :mod:`mobile_ep.sessions`).  An ORT-format candidate runs as onnxruntime loads it (the QDQ
#: fusions it records are replayed only by ORT Mobile on the device: here it runs its QDQ groups in float, as
#: the basic level does); a compiled one at onnxruntime's default level.
VERIFY_LEVEL = "basic"
#: Ops whose groups onnxruntime's default level runs as integer kernels where the basic level computes them
#: in float (QDQ): a compiled candidate of a model with one (integer partitions, CPU parts at the default
#: level) is compared with the original run at the default level.
_INTEGER_AT_DEFAULT = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})
#: The integer kernels onnxruntime makes of QDQ groups (what ``convert`` records of the CPU's fusions in the
#: written model): a candidate holding one runs, and is compared with the original, at the default level.
_INTEGER_KERNELS = frozenset({"QLinearConv", "QLinearMatMul", "com.microsoft:QGemm", "com.microsoft:QAttention",
                              "com.microsoft:MatMulIntegerToFloat", "com.microsoft:DynamicQuantizeMatMul"})


@dataclasses.dataclass(frozen=True)
class OutputDiff:
    """How one output of a converted model differs from the original's.

    ``max_rel`` is measured only where |reference| > ``rel_floor`` (None when it is nowhere).  For an output
    that a QuantizeLinear produces, or that is dequantized from one, ``max_steps`` is the largest difference in
    steps of its quantization scale ``step`` (1 for the integer output of a QuantizeLinear): such an output
    passes at ``max_steps`` <= 1 whatever the float tolerances say.
    """

    name: str
    max_abs: float
    max_rel: float | None
    ok: bool
    note: str = ""
    rel_floor: float | None = None
    max_steps: float | None = None
    step: float | None = None

    def as_dict(self) -> dict:
        result = {"output": self.name, "max_abs_error": self.max_abs, "max_rel_error": self.max_rel, "ok": self.ok}
        if self.rel_floor is not None:
            result["rel_error_where_abs_reference_above"] = self.rel_floor
        if self.max_steps is not None:
            result["max_step_error"] = self.max_steps
            result["step"] = self.step
        if self.note:
            result["note"] = self.note
        return result


@dataclasses.dataclass(frozen=True)
class QuantizedOutput:
    """An output in quantization steps: ``scale`` (per tensor, or per channel along ``axis``); ``integer`` for
    the quantized integers themselves (the output of a QuantizeLinear), whose step is 1."""

    scale: np.ndarray
    axis: int = 1
    integer: bool = False

    def steps(self, ref: np.ndarray) -> np.ndarray:
        """The step of each element of an output shaped like *ref*."""
        if self.integer:
            return np.ones((), np.float64)
        scale = np.asarray(self.scale, np.float64)
        if scale.size == 1 or ref.ndim == 0:
            return scale.reshape(())
        shape = [1] * ref.ndim
        shape[self.axis % ref.ndim] = scale.size
        return scale.reshape(shape)


@dataclasses.dataclass
class Verification:
    candidate: str
    outputs: list[OutputDiff]
    seed: int
    #: What the candidate was compared with, when not the original as onnxruntime runs it by default: a
    #: sentence saying which run of the original and why (see :func:`verify`'s ``reference_level``).
    reference: str = ""

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    def as_dict(self) -> dict:
        result = {"model": self.candidate, "ok": self.ok, "seed": self.seed,
                  "outputs": [o.as_dict() for o in self.outputs]}
        if self.reference:
            result["reference"] = self.reference
        return result


def _session(path: str | os.PathLike, level: str | None = None):
    """A session that runs the model at *path* on onnxruntime's CPU EP, at optimization *level*
    (:data:`mobile_ep.sessions.LEVELS`; onnxruntime's default if None), kept while a command asks for the same
    file again (:func:`mobile_ep.sessions.runnable`)."""
    return sessions.runnable(path, lambda: _open(path, level), level=level)


def _open(path: str | os.PathLike, level: str | None = None):
    from mobile_ep.export.ort_format import ort_model_source

    so = sessions.options(level=level)
    try:
        try:  # (the file as it is; only a model onnxruntime refuses is read, in case its IR version is the cause)
            return sessions.open_session(path, so)
        except Exception:
            source = ort_model_source(path, so)
            if isinstance(source, str):
                raise
            return sessions.open_session(source, so)
    except Exception as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{path}: onnxruntime cannot load the model: {message}") from None


_ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int16)": np.int16, "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16, "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_,
}


class InputError(VerificationError):
    """Verification could not build inputs the model runs on: the test inputs failed, not the model."""


#: Values tried, smallest first, for dims neither the model nor ``--shape``/``--dim`` fix: a model may need
#: more than 1 (a reflect ``Pad`` needs an axis longer than its pads).
UNKNOWN_DIM_FILLS = (1, 8, 64, 512)
#: An input of more elements than this is not generated for a larger fill.
_MAX_FILL_ELEMENTS = 1 << 24


def _array(rng: np.random.Generator, kind: str, shape: Sequence[int]) -> Any:
    """A deterministic random value of ORT type *kind* (``tensor(float)``, ``tensor(string)``,
    ``seq(tensor(int64))``, ``optional(...)``); None for a type no value can be made for."""
    if kind.startswith("optional(") and kind.endswith(")"):
        return _array(rng, kind[len("optional("):-1], shape)
    if kind.startswith("seq(") and kind.endswith(")"):
        items = [_array(rng, kind[len("seq("):-1], shape or [1]) for _ in range(2)]
        return None if any(item is None for item in items) else items
    if kind == "tensor(string)":
        return np.array([f"s{v}" for v in rng.integers(0, 100, size=math.prod(shape))], dtype=object).reshape(shape)
    dtype = _ORT_TYPES.get(kind)
    if dtype is None:
        return None
    if np.issubdtype(dtype, np.floating):
        return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    if dtype is np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    return rng.integers(0, 3, size=shape).astype(dtype)


def make_inputs(
    path: str | os.PathLike, *, seed: int = 0, dims: Mapping[str, int] | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None, fill: int = 1, level: str | None = None,
) -> dict[str, np.ndarray]:
    """Deterministic random inputs for every graph input of the model at *path* (tensors of numbers, bools
    or strings, sequences and optionals of them).

    Symbolic dims take their value from *dims* (by name) and default to *fill*; *shapes* overrides whole
    input shapes by input name.  An input no value can be made for is an :class:`InputError`.  *level*: that
    of the session asked for the inputs (the one that will run the model, when a command keeps it).
    """
    session = _session(path, level)
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for arg in session.get_inputs():
        if shapes and arg.name in shapes:
            shape = [int(d) for d in shapes[arg.name]]
        else:
            shape = [d if isinstance(d, int) and d >= 0 else (dims or {}).get(str(d), fill) for d in arg.shape or []]
        value = _array(rng, arg.type, shape)
        if value is None:
            raise InputError(f"cannot generate values for input {arg.name!r} of type {arg.type}")
        feeds[arg.name] = value
    return feeds


def _references(original: str | os.PathLike, seed: int, dims: Mapping[str, int] | None,
                shapes: Mapping[str, Sequence[int]] | None,
                level: str | None = None) -> Iterator[tuple[dict[str, Any], dict[str, np.ndarray]]]:
    """Inputs the original model runs on, and its outputs (run at optimization *level*), for each of
    :data:`UNKNOWN_DIM_FILLS` in turn (filling the unknown dims) that it runs with.  An :class:`InputError`
    when it runs with none."""
    first: Exception | None = None
    ran = False
    dynamic = any(not isinstance(d, int) or d < 0
                  for arg in _session(original, level).get_inputs() for d in arg.shape or [])
    for fill in UNKNOWN_DIM_FILLS if dynamic else UNKNOWN_DIM_FILLS[:1]:  # (all dims fixed: one set of inputs)
        try:
            feeds = make_inputs(original, seed=seed, dims=dims, shapes=shapes, fill=fill, level=level)
        except InputError as exc:
            first = first or exc
            break
        if fill > 1 and any(np.size(v) > _MAX_FILL_ELEMENTS for v in feeds.values() if isinstance(v, np.ndarray)):
            break
        try:
            reference = run(original, feeds, level=level)
        except ModelError as exc:
            if "did not finish running" in str(exc):
                raise  # (a model that does not end: not the inputs' fault)
            first = first or exc
            continue
        ran = True
        yield feeds, reference
    if ran:
        return
    message = str(first).partition(": onnxruntime failed to run the model: ")[2] or str(first)
    raise InputError(f"{original}: verification could not run: the test inputs failed, not the model "
                     f"({message}); give the inputs' shapes with --shape, or skip verification with --no-verify")


def run(path: str | os.PathLike, feeds: Mapping[str, np.ndarray], *,
        backends: Mapping[str, Any] | None = None, level: str | None = None) -> dict[str, np.ndarray]:
    """The model's outputs on *feeds*: onnxruntime's CPU EP (at optimization *level*, by default onnxruntime's),
    with the backends' emulators for compiled partitions (*backends* by name; by default the installed ones)."""
    if is_compiled_model(path):
        return run_compiled(path, feeds, backends=backends)
    # (a file's outputs on these inputs at this level: once)
    return sessions.outputs(path, feeds, lambda: _run(path, feeds, level), level=level)


def _run(path: str | os.PathLike, feeds: Mapping[str, np.ndarray], level: str | None = None) -> dict[str, np.ndarray]:
    import threading

    import onnxruntime as ort

    session = _session(path, level)
    names = [o.name for o in session.get_outputs()]
    known = {i.name for i in session.get_inputs()}
    # A valid model may still never finish (a Loop of 2**62 iterations): stop it after RUN_TIMEOUT seconds.
    options = ort.RunOptions()
    options.log_severity_level = 4  # the termination is reported as one line below, not as ORT's log
    timer = threading.Timer(RUN_TIMEOUT, lambda: setattr(options, "terminate", True))
    timer.daemon = True
    timer.start()
    try:
        values = session.run(names, {k: v for k, v in feeds.items() if k in known}, options)
    except Exception as exc:
        if options.terminate:
            raise ModelError(f"{path}: the model did not finish running within {RUN_TIMEOUT:g} s "
                             f"(set MOBILE_EP_RUN_TIMEOUT, or skip verification with --no-verify)") from None
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{path}: onnxruntime failed to run the model: {message}") from None
    finally:
        timer.cancel()
    return dict(zip(names, values, strict=True))


def compare(reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray], *,
            atol: float = ATOL, rtol: float = RTOL, int_atol: int = 0,
            quantized: Mapping[str, QuantizedOutput] | None = None) -> list[OutputDiff]:
    """Every output of *reference* against *candidate*: floats within ``atol + rtol·|ref|``, integers
    equal (or within *int_atol*, e.g. one quantization step of a compiled quantized partition), and the
    outputs in *quantized* (see :func:`quantized_outputs`) within :data:`MAX_STEPS` steps of their scale.

    The relative error is measured only where |reference| > *atol* (:data:`REL_FLOOR` by default).
    """
    quantized = quantized or {}
    floor = atol if atol > 0 else REL_FLOOR
    diffs = []
    for name, ref in reference.items():
        if name not in candidate:
            diffs.append(OutputDiff(name, float("inf"), float("inf"), False, "missing in the converted model"))
            continue
        got = np.asarray(candidate[name])
        ref = np.asarray(ref)
        if got.shape != ref.shape:
            diffs.append(OutputDiff(name, float("inf"), float("inf"), False,
                                    f"shape {list(got.shape)} instead of {list(ref.shape)}"))
            continue
        if ref.size == 0:
            diffs.append(OutputDiff(name, 0.0, 0.0, True))
            continue
        q = quantized.get(name)
        if q is not None and (np.issubdtype(ref.dtype, np.floating) or np.issubdtype(ref.dtype, np.integer)):
            diffs.append(_compare_steps(name, ref, got, q, floor, int_atol))
        elif np.issubdtype(ref.dtype, np.floating):
            r = ref.astype(np.float64)
            g = got.astype(np.float64)
            same_nan = np.isnan(r) & np.isnan(g)
            err = np.where(same_nan, 0.0, np.abs(g - r))
            ok = bool(np.all(err <= atol + rtol * np.abs(np.nan_to_num(r))))
            diffs.append(OutputDiff(name, float(np.nanmax(err)), _max_rel(err, r, floor), ok, rel_floor=floor))
        elif not (np.issubdtype(ref.dtype, np.number) or ref.dtype == np.bool_):  # strings: equal or not
            equal = bool(np.array_equal(ref, got))
            diffs.append(OutputDiff(name, 0.0 if equal else float("inf"), 0.0 if equal else float("inf"), equal))
        else:
            equal = bool(np.array_equal(ref, got))
            err = float(np.max(np.abs(ref.astype(np.float64) - got.astype(np.float64)))) if ref.dtype != np.bool_ \
                else float(np.sum(ref != got))
            within = equal or (int_atol > 0 and ref.dtype != np.bool_ and err <= int_atol)
            diffs.append(OutputDiff(name, err, 0.0 if equal else float("inf"), within))
    return diffs


def _max_rel(err: np.ndarray, ref: np.ndarray, floor: float) -> float | None:
    """The largest relative error where |ref| > *floor*; None when |ref| is at or below it everywhere."""
    above = np.abs(np.nan_to_num(ref)) > floor
    if not np.any(above):
        return None
    return float(np.nanmax(err[above] / np.abs(ref[above])))


def _compare_steps(name: str, ref: np.ndarray, got: np.ndarray, q: QuantizedOutput, floor: float,
                   int_atol: int) -> OutputDiff:
    r = ref.astype(np.float64)
    g = got.astype(np.float64)
    err = np.abs(g - r)
    step = q.steps(ref)
    steps = float(np.max(err / step))
    if not q.integer:
        steps = float(np.round(steps, 3))  # (a dequantized value is a multiple of its scale up to float32 rounding)
    allowed = max(MAX_STEPS, int_atol if q.integer else 0)
    ok = bool(np.all(np.isfinite(err))) and steps <= allowed
    first = 1.0 if q.integer else float(np.asarray(q.scale, np.float64).reshape(-1)[0])
    per = " (per channel)" if not q.integer and np.asarray(q.scale).size > 1 else ""
    what = "quantized integers" if q.integer else f"steps of the output scale {first:.3g}{per}"
    note = f"compared in {what}, passes at <= {allowed} step{'s' if allowed != 1 else ''}"
    rel = _max_rel(err, r, floor) if not q.integer else None
    return OutputDiff(name, float(np.max(err)), rel, ok, note, rel_floor=None if q.integer else floor,
                      max_steps=steps, step=first)


def quantized_outputs(path: str | os.PathLike, proto: Any = None) -> dict[str, QuantizedOutput]:
    """The graph outputs of the model at *path* (*proto*: the file as read, if at hand) that a QuantizeLinear
    produces, or a DequantizeLinear (possibly through ops that only move data) computes from quantized data,
    with their constant scales."""
    import onnx
    from onnx import numpy_helper

    try:
        proto = proto if proto is not None else onnx.load(str(path), load_external_data=False)
    except Exception:
        return {}
    graph = proto.graph
    producers = {o: n for n in graph.node for o in n.output if o}
    inits = {t.name: t for t in graph.initializer}
    moving = {"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity"}
    result: dict[str, QuantizedOutput] = {}
    for output in graph.output:
        node = producers.get(output.name)
        while node is not None and node.op_type in moving and node.domain in ("", "ai.onnx") and node.input:
            if node.op_type == "Transpose":
                node = None  # (a per-channel axis would move: not followed)
                break
            node = producers.get(node.input[0])
        if node is None or node.domain not in ("", "ai.onnx") or node.op_type not in ("QuantizeLinear",
                                                                                     "DequantizeLinear"):
            continue
        if len(node.input) < 2 or node.input[1] not in inits or inits[node.input[1]].data_location == 1:
            continue
        scale = numpy_helper.to_array(inits[node.input[1]]).astype(np.float64)
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        if node.op_type == "QuantizeLinear":
            if producers.get(output.name) is node:
                result[output.name] = QuantizedOutput(scale, axis, integer=True)
        elif scale.size == 1 or producers.get(output.name) is node:
            result[output.name] = QuantizedOutput(scale, axis)
    return result


def verify(original: str | os.PathLike, candidates: Sequence[str | os.PathLike], *, seed: int = 0,
           dims: Mapping[str, int] | None = None, shapes: Mapping[str, Sequence[int]] | None = None,
           atol: float = ATOL, rtol: float = RTOL, backends: Mapping[str, Any] | None = None,
           proto: Any = None, reference_level: str | None = None, reference_why: str = "") -> list[Verification]:
    """Run *original* (*proto*: the file as read, if at hand) and each candidate on the same generated inputs
    and compare every output.

    The original and the ONNX candidates run at :data:`VERIFY_LEVEL`, ORT-format and compiled candidates at
    onnxruntime's default level; a compiled candidate of a model with QDQ groups is compared with the original
    at the default level, where they run as integer kernels, and so is a candidate holding the integer kernels
    onnxruntime makes of them (:func:`holds_integer_kernels`: the CPU's fusions recorded; it runs at the
    default level too, its other QDQ groups made integer kernels as well).  A compiled-partition candidate runs with its
    backends' emulators, compared with
    the larger of the given tolerances and those its payloads declare (``rtol``/``atol`` metadata).
    *reference_level*: the original runs at that optimization level (:data:`mobile_ep.sessions.LEVELS`) for
    every candidate -- for candidates that compute what the original's graph says where another level would
    run other arithmetic (a QDQ graph's float ops); *reference_why* says so, and each :class:`Verification`
    carries the sentence.  The tolerances stay.
    """
    from mobile_ep.export.ort_format import is_ort_format

    if proto is None:  # (read once: the quantized outputs and the compiled candidates' reference level)
        proto = _load_proto(original, external=False)
    quantized = quantized_outputs(original, proto)
    compiled = {c: is_compiled_model(c) for c in candidates}
    compiled_level = reference_level or compiled_reference_level(original, proto)
    integer_original = reference_level is None and compiled_level is None  # (QDQ groups: integer at the default)
    fused = {c: integer_original and not compiled[c] and holds_integer_kernels(c) for c in candidates}
    onnx_file = {c: not compiled[c] and not fused[c] and not is_ort_format(c) for c in candidates}
    failure: Exception | None = None
    reference_text = ""
    if reference_level is not None:
        run_as = ("with onnxruntime's graph optimizations disabled" if reference_level == "disable"
                  else f"at onnxruntime's {reference_level} optimization level")
        reference_text = f"compared with the original run {run_as}" + (f" because {reference_why}" if reference_why else "")
    for feeds, reference in _references(original, seed, dims, shapes, reference_level or VERIFY_LEVEL):
        results = []
        try:
            for c in candidates:
                c_atol, c_rtol, c_int = atol, rtol, 0
                if compiled[c]:
                    declared = compiled_tolerances(c)
                    c_atol, c_rtol, c_int = max(atol, declared[0]), max(rtol, declared[1]), int(declared[2])
                outputs = run(c, feeds, backends=backends, level=VERIFY_LEVEL if onnx_file[c] else None)
                against = run(original, feeds, level=compiled_level) if compiled[c] or fused[c] else reference
                results.append(Verification(str(pathlib.Path(c)),
                                            compare(against, outputs, atol=c_atol, rtol=c_rtol, int_atol=c_int,
                                                    quantized=quantized), seed, reference_text))
        except (ModelError, CompileError) as exc:  # a converted model that cannot run on unknown dims this
            if "did not finish running" in str(exc):  # small (a backend's reflect Pad): larger ones are tried
                raise
            failure = failure or exc
            continue
        return results
    assert failure is not None
    raise failure


# --------------------------------------------------------------------------------------------------
# Compiled-partition models
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Step:
    """One step of a compiled-partition model: a CPU segment (``kind="onnx"``, ``model`` a ModelProto) or a
    compiled partition (``kind="partition"``, ``payload`` a CompiledPartition, ``node`` its EPContext node)."""

    kind: str
    inputs: list[str]
    outputs: list[str]
    model: Any = None
    payload: Any = None
    node: Any = None


def _load_proto(path: str | os.PathLike, external: bool):
    import onnx

    return onnx.load(str(path), load_external_data=external)


def _context_nodes(graph) -> list:
    return [n for n in graph.node if n.domain == "com.microsoft" and n.op_type == "EPContext"]


def compiled_reference_level(path: str | os.PathLike, proto: Any = None) -> str | None:
    """The optimization level the model at *path* (*proto*: the file as read, if at hand) runs at to check a
    compiled model of it: :data:`VERIFY_LEVEL`, or onnxruntime's default (None) when it has QDQ groups, which
    that level runs as integer kernels as quantized partitions do."""
    graph = (proto if proto is not None else _load_proto(path, external=False)).graph
    return None if any(node.op_type in _INTEGER_AT_DEFAULT for node in graph.node) else VERIFY_LEVEL


def holds_integer_kernels(path: str | os.PathLike) -> bool:
    """Whether the model at *path* (ONNX or ORT format) holds one of the integer kernels onnxruntime makes of a
    QDQ group (``com.microsoft:QLinearAdd``, ``QLinearConv``, ``com.microsoft:QGemm``, ...)."""
    from mobile_ep.export.ort_format import is_ort_format, ort_format_ops

    if is_ort_format(path):
        ops = ort_format_ops(path)
    else:
        graph = _load_proto(path, external=False).graph
        ops = {n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}:{n.op_type}" for n in graph.node}
    return any(op in _INTEGER_KERNELS or op.startswith("com.microsoft:QLinear") for op in ops)


def is_compiled_model(path: str | os.PathLike) -> bool:
    """True for an ONNX model with ``com.microsoft:EPContext`` nodes (not for ORT format files)."""
    import mmap

    from mobile_ep.export.ort_format import is_ort_format

    p = pathlib.Path(path)
    try:
        if is_ort_format(p):
            return False
        with open(p, "rb") as f:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                if data.find(b"EPContext") < 0:  # cheap: most models are not compiled
                    return False
        return bool(_context_nodes(_load_proto(p, external=False).graph))
    except Exception:
        return False


def _payload(node, model_dir: pathlib.Path):
    from mobile_ep.contract.compile import CompiledPartition

    attributes = {a.name: a for a in node.attribute}
    if "ep_cache_context" not in attributes:
        raise ModelError(f"EPContext node {node.name!r} has no ep_cache_context")
    data = attributes["ep_cache_context"].s
    if "embed_mode" in attributes and attributes["embed_mode"].i == 0:
        data = read_context_file(data.decode("utf-8", errors="replace"), model_dir)
    return CompiledPartition.from_bytes(data)


def _reads(node) -> list[str]:
    """Names a node reads, including outer-scope names its subgraphs use."""
    names = [n for n in node.input if n]
    for attribute in node.attribute:
        graphs = [attribute.g] if attribute.HasField("g") else list(attribute.graphs)
        for graph in graphs:
            local = {i.name for i in graph.input} | {i.name for i in graph.initializer}
            for inner in graph.node:
                local.update(inner.output)
            for inner in graph.node:
                names.extend(n for n in _reads(inner) if n not in local)
    return names


def compiled_tolerances(path: str | os.PathLike) -> tuple[float, float, int]:
    """(atol, rtol, int_atol): the largest tolerances the model's payloads declare in their metadata
    (``atol``, ``rtol``; ``quantized="true"`` allows integer outputs one step off); 0 if none."""
    proto = _load_proto(path, external=False)
    atol = rtol = 0.0
    int_atol = 0
    for node in _context_nodes(proto.graph):
        metadata = _payload(node, pathlib.Path(path).parent).metadata
        atol = max(atol, float(metadata.get("atol", 0) or 0))
        rtol = max(rtol, float(metadata.get("rtol", 0) or 0))
        if metadata.get("quantized") == "true":
            int_atol = 1
    return atol, rtol, int_atol


def plan_compiled(model: Any, model_dir: str | os.PathLike | None = None) -> list[Step]:
    """Split a compiled-partition model (a path or a ModelProto) into CPU segments and partitions.

    Nodes are ordered topologically, preferring to continue the current kind, so that consecutive CPU
    nodes form as few segments as possible.  A segment's inputs are what it reads from graph inputs or
    earlier steps; its outputs what later steps or the graph's outputs read.
    """
    import onnx
    from onnx import helper

    if not isinstance(model, onnx.ModelProto):
        model_dir = pathlib.Path(model).parent if model_dir is None else model_dir
        model = _load_proto(model, external=True)
    base = pathlib.Path(model_dir) if model_dir is not None else pathlib.Path(".")
    graph = model.graph
    types = {vi.name: vi for vi in (*graph.value_info, *graph.input, *graph.output)}
    inferred: list = []  # shape inference (a copy of the model) only if a boundary has no type
    graph_inputs = {i.name for i in graph.input}
    initializers = {t.name: t for t in graph.initializer if t.name not in graph_inputs}
    nodes = list(graph.node)
    is_ctx = [n.domain == "com.microsoft" and n.op_type == "EPContext" for n in nodes]
    producer = {out: i for i, n in enumerate(nodes) for out in n.output if out}
    reads = [_reads(n) for n in nodes]
    deps = [{producer[v] for v in r if v in producer and producer[v] != i} for i, r in enumerate(reads)]
    users: list[list[int]] = [[] for _ in nodes]
    pending = [len(d) for d in deps]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    ready = {False: [i for i in range(len(nodes)) if not pending[i] and not is_ctx[i]],
             True: [i for i in range(len(nodes)) if not pending[i] and is_ctx[i]]}
    order: list[int] = []
    kind = False
    while ready[False] or ready[True]:
        if not ready[kind]:
            kind = not kind
        i = ready[kind].pop(0)
        order.append(i)
        for u in users[i]:
            pending[u] -= 1
            if not pending[u]:
                ready[is_ctx[u]].append(u)
    if len(order) != len(nodes):
        raise ModelError("the compiled model's graph has a cycle")
    groups: list[tuple[bool, list[int]]] = []
    for i in order:
        if groups and not is_ctx[i] and not groups[-1][0]:
            groups[-1][1].append(i)
        else:
            groups.append((is_ctx[i], [i]))
    graph_outputs = [o.name for o in graph.output]
    later_reads: list[set[str]] = []
    needed: set[str] = set(graph_outputs)
    for _, members in reversed(groups):
        later_reads.append(set(needed))
        for i in members:
            needed.update(reads[i])
    later_reads.reverse()
    steps: list[Step] = []
    for (context, members), wanted in zip(groups, later_reads, strict=True):
        if context:
            node = nodes[members[0]]
            payload = _payload(node, base)
            steps.append(Step("partition", [n for n in node.input if n], list(node.output), payload=payload, node=node))
            continue
        produced = [o for i in members for o in nodes[i].output if o]
        inside = set(produced)
        inputs: list[str] = []
        used_initializers: list[str] = []
        for i in members:
            for name in reads[i]:
                if name in inside:
                    continue
                if name in initializers:
                    if name not in used_initializers:
                        used_initializers.append(name)
                elif name not in inputs:
                    inputs.append(name)
        outputs = [o for o in produced if o in wanted]

        def info(name: str):
            if name not in types and not inferred:
                inferred.append(onnx.shape_inference.infer_shapes(model, strict_mode=False))
                types.update({vi.name: vi for vi in inferred[0].graph.value_info if vi.name not in types})
            if name in types:
                return types[name]
            raise ModelError(f"the compiled model gives no type for {name!r}, needed at a segment boundary")

        segment_graph = helper.make_graph([nodes[i] for i in members], f"{graph.name}_segment{len(steps)}",
                                          [info(n) for n in inputs], [info(n) for n in outputs],
                                          initializer=[initializers[n] for n in used_initializers])
        segment = helper.make_model(segment_graph, opset_imports=list(model.opset_import), ir_version=model.ir_version,
                                    functions=list(model.functions))
        steps.append(Step("onnx", inputs, outputs, model=segment))
    return steps


def _resolve_backend(name: str, backends: Mapping[str, Any] | None) -> Any:
    if backends is not None and name in backends:
        return backends[name]
    from mobile_ep.contract.plugins import make_plugins

    available = make_plugins().backends()
    if name not in available:
        raise ModelError(f"the model has a partition compiled for backend {name!r}, which is not installed")
    return available[name]


def run_compiled(path: str | os.PathLike, feeds: Mapping[str, np.ndarray], *,
                 backends: Mapping[str, Any] | None = None, steps: Sequence[Step] | None = None) -> dict[str, np.ndarray]:
    """Run a compiled-partition model: onnxruntime for its CPU segments, the backends' emulators for its
    partitions, in the order of :func:`plan_compiled`."""
    proto = _load_proto(path, external=True)
    graph = proto.graph
    steps = list(steps) if steps is not None else plan_compiled(proto, pathlib.Path(path).parent)
    env: dict[str, np.ndarray] = {}
    fed = {i.name for i in graph.input}
    for name in fed:
        if name in feeds:
            env[name] = np.asarray(feeds[name])
    if any(i.name not in env for i in graph.input):
        from onnx import numpy_helper

        defaults = {t.name: t for t in graph.initializer}
        for i in graph.input:
            if i.name not in env and i.name in defaults:
                env[i.name] = numpy_helper.to_array(defaults[i.name])
    missing = [i.name for i in graph.input if i.name not in env]
    if missing:
        raise ModelError(f"{path}: no value for inputs {missing}")
    for number, step in enumerate(steps):
        if step.kind == "onnx":
            try:
                session = sessions.open_session(step.model.SerializeToString(), sessions.options())
                values = session.run(step.outputs, {n: env[n] for n in step.inputs})
            except Exception as exc:
                message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ModelError(f"{path}: onnxruntime failed on CPU segment {number}: {message}") from None
            env.update(zip(step.outputs, values, strict=True))
        else:
            payload = step.payload
            backend = _resolve_backend(payload.backend, backends)
            outputs = backend.emulate(payload, {s.name: env[s.name] for s in payload.inputs})
            for name, spec in zip(step.outputs, payload.outputs, strict=True):
                if spec.name not in outputs:
                    raise ModelError(f"{path}: {payload.backend} emulator returned no output {spec.name!r}")
                env[name] = np.asarray(outputs[spec.name])
    return {o.name: env[o.name] for o in graph.output}


def read_context_file(location: str, model_dir: str | os.PathLike | None) -> bytes:
    """An ``embed_mode=0`` payload: a relative path inside the model's folder (never outside it)."""
    if model_dir is None:
        raise CompileError("an EPContext payload in a separate file needs the model's folder")
    base = pathlib.Path(model_dir).resolve()
    target = (base / location).resolve()
    if pathlib.PurePath(location).is_absolute() or base not in target.parents:
        raise CompileError(f"EPContext payload file {location!r} is not inside the model's folder")
    try:
        return target.read_bytes()
    except OSError as exc:
        raise CompileError(f"cannot read EPContext payload file {location!r}: {exc.strerror}") from None
