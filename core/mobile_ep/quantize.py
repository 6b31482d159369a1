"""``mobile-ep quantize``: static QDQ quantization for one backend, by ``onnxruntime.quantization``.

mobile-ep has no quantizer of its own.  The backend says how its models must be quantized (the
``mobile_ep_quantization_config`` hook returns an ``onnxruntime.quantization.StaticQuantConfig``: activation
and weight types, per-tensor or per-channel); onnxruntime pre-processes the model (shape inference), calibrates
on the samples and writes the QDQ model.  Then the quantized model is compared with the float one on the same
samples (max error and SQNR per output) and partitioned as ``check`` does it.

Calibration samples come from a folder (:func:`read_calibration`) or, for smoke tests only, from ``--random N``
generated inputs, which the report labels as such: their accuracy numbers say nothing about real data.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import pathlib
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from mobile_ep import model_io, runtime
from mobile_ep.contract.plugins import Plugins, make_plugins
from mobile_ep.errors import ModelError, UsageError
from mobile_ep.options import Options
from mobile_ep.passes.export import file_label

__all__ = ["quantize", "read_calibration", "QuantizeReport", "OutputAccuracy", "WeightsOnly"]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class WeightsOnly:
    """What a ``mobile_ep_quantization_config`` hook returns for weight-only quantization: onnxruntime quantizes
    the model with *config* (its calibration included; ``QDQKeepRemovableActivations`` set, so no Relu or Clip is
    dropped), then only the weights' DequantizeLinear nodes are kept: every QuantizeLinear → DequantizeLinear
    pair on an activation is removed, so activations stay float."""

    config: Any


@dataclasses.dataclass(frozen=True)
class OutputAccuracy:
    """What quantizing cost one output, over every sample: the largest absolute difference from the float
    model and the signal-to-quantization-noise ratio ``10·log10(Σ float² / Σ (float - quantized)²)`` in dB
    (``inf``: no difference)."""

    name: str
    max_abs: float
    sqnr_db: float

    def as_dict(self) -> dict:
        return {"output": self.name, "max_abs_error": self.max_abs,
                "sqnr_db": self.sqnr_db if math.isfinite(self.sqnr_db) else "inf"}


@dataclasses.dataclass
class QuantizeReport:
    model: str
    output: str
    backend: str
    #: Where the calibration samples came from, in words ("folder calib/: 16 samples", "16 random inputs ...").
    calibration: str
    samples: int
    random: bool
    #: The quantization the backend declared (onnxruntime's StaticQuantConfig, summarized).
    config: dict[str, Any]
    accuracy: list[OutputAccuracy]
    #: ``check`` of the quantized model for this backend (:class:`mobile_ep.reports.model.CheckReport`).
    check: Any = None

    def as_dict(self) -> dict:
        result: dict[str, Any] = {
            "model": self.model, "output": self.output, "backend": self.backend,
            "calibration": {"source": self.calibration, "samples": self.samples, "random": self.random},
            "config": self.config, "accuracy": [a.as_dict() for a in self.accuracy],
        }
        if self.check is not None:
            result["partitioning"] = {
                "as_is": self.check.backends[self.backend].as_dict(),
                **({"after_convert": self.check.after_convert[self.backend].as_dict()}
                   if self.backend in self.check.after_convert else {}),
            }
        return result

    def text(self) -> str:
        lines = [f"{self.model} -> {self.output} (quantized for {self.backend} by onnxruntime.quantization)",
                 f"  calibration: {self.calibration}"]
        config = ", ".join(f"{k}={v}" for k, v in self.config.items())
        lines.append(f"  quantization: {config}")
        what = "on the random inputs (a smoke test: not an accuracy measure)" if self.random \
            else "on the calibration samples"
        lines.append(f"  accuracy against the float model, {what}:")
        for a in self.accuracy:
            sqnr = f"{a.sqnr_db:.1f} dB" if math.isfinite(a.sqnr_db) else "inf (no difference)"
            lines.append(f"    {a.name}: max abs error {a.max_abs:.3g}, SQNR {sqnr}")
        if self.check is not None:
            for label, report in (("as is", self.check.backends.get(self.backend)),
                                  ("after mobile-ep convert", self.check.after_convert.get(self.backend))):
                if report is not None:
                    sizes = ", ".join(str(len(p.nodes)) for p in report.partitions)
                    lines.append(f"  {self.backend} {label}: {report.supported_nodes}/{report.nodes} nodes "
                                 f"({report.coverage:.1%}) in {len(report.partitions)} partition"
                                 f"{'s' if len(report.partitions) != 1 else ''}{f' ({sizes})' if sizes else ''}, "
                                 f"verdict {report.verdict.split(' ')[0]}")
        return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# Calibration samples
# --------------------------------------------------------------------------------------------------
def _input_specs(path: pathlib.Path) -> list[tuple[str, list, str]]:
    session = runtime._session(path)
    return [(arg.name, list(arg.shape or []), arg.type) for arg in session.get_inputs()]


_NUMPY_OF = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
             "tensor(uint8)": np.uint8, "tensor(int8)": np.int8, "tensor(int32)": np.int32,
             "tensor(int64)": np.int64, "tensor(bool)": np.bool_}


def read_calibration(folder: str | os.PathLike, model: str | os.PathLike) -> list[dict[str, np.ndarray]]:
    """The calibration samples in *folder*, one per file, in name order.

    A ``.npz`` file holds one sample: an array per model input, by input name.  A ``.npy`` file holds the
    one input of a one-input model.  Each array has the input's shape (any size where the model's dim is
    symbolic) and is cast to the input's element type.  A bad file is a one-line :class:`UsageError`.
    """
    folder = pathlib.Path(folder)
    if not folder.is_dir():
        raise UsageError(f"--calibration {folder}: not a folder (give a folder of .npy/.npz files)")
    files = sorted(p for p in folder.iterdir() if p.suffix in (".npy", ".npz") and p.is_file())
    if not files:
        raise UsageError(f"--calibration {folder}: no .npy or .npz files in it")
    specs = _input_specs(pathlib.Path(model))
    samples = []
    for file in files:
        try:
            loaded = np.load(file, allow_pickle=False)
        except Exception as exc:
            raise UsageError(f"{file}: not a numpy file ({type(exc).__name__}: {exc})") from None
        if isinstance(loaded, np.ndarray):
            if len(specs) != 1:
                names = ", ".join(s[0] for s in specs)
                raise UsageError(f"{file}: a .npy file holds one input, but the model has {len(specs)} ({names}); "
                                 "use .npz files with one array per input name")
            arrays = {specs[0][0]: loaded}
        else:
            with loaded:
                arrays = {key: loaded[key] for key in loaded.files}
        sample = {}
        for name, shape, type_name in specs:
            if name not in arrays:
                raise UsageError(f"{file}: no array for input {name!r} (it has {', '.join(arrays) or 'none'})")
            array = np.asarray(arrays[name])
            if len(shape) != array.ndim or any(isinstance(d, int) and d >= 0 and d != n
                                               for d, n in zip(shape, array.shape, strict=True)):
                raise UsageError(f"{file}: input {name!r} has shape {list(array.shape)}; the model takes "
                                 f"{[d if isinstance(d, int) else str(d) for d in shape]}")
            dtype = _NUMPY_OF.get(type_name)
            sample[name] = array.astype(dtype) if dtype is not None else array
        samples.append(sample)
    return samples


def _random_samples(model: pathlib.Path, count: int, seed: int, options: Options) -> list[dict[str, np.ndarray]]:
    shapes = dict(options.shapes)
    if None in shapes:
        shapes[_input_specs(model)[0][0]] = shapes.pop(None)
    return [runtime.make_inputs(model, seed=seed + i, dims=options.dims, shapes=shapes)  # type: ignore[arg-type]
            for i in range(count)]


class _Reader:
    """An ``onnxruntime.quantization.CalibrationDataReader`` over a list of samples."""

    def __init__(self, samples: Sequence[Mapping[str, np.ndarray]]) -> None:
        self.samples = list(samples)
        self._iter: Iterator[Mapping[str, np.ndarray]] = iter(self.samples)

    def get_next(self) -> Mapping[str, np.ndarray] | None:
        return next(self._iter, None)

    def rewind(self) -> None:
        self._iter = iter(self.samples)

    def __iter__(self):
        return self

    def __next__(self):
        sample = self.get_next()
        if sample is None:
            raise StopIteration
        return sample

    def __len__(self) -> int:
        return len(self.samples)


def _reader(samples: Sequence[Mapping[str, np.ndarray]]) -> Any:
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(_Reader, CalibrationDataReader):
        pass

    return Reader(samples)


# --------------------------------------------------------------------------------------------------
# quantize
# --------------------------------------------------------------------------------------------------
def quantize(model: str | os.PathLike, ep: str, output: str | os.PathLike | None = None, *,
             calibration: str | os.PathLike | None = None, random: int | None = None, seed: int = 0,
             check: bool = True, plugins: Plugins | None = None, **options: Any) -> QuantizeReport:
    """``mobile-ep quantize``: the QDQ model of *model* for backend *ep*, written to *output*
    (default: ``<model>.<ep>.qdq.onnx`` beside it).

    Calibration samples: the ``.npy``/``.npz`` files of folder *calibration* (:func:`read_calibration`), or
    *random* generated inputs (a smoke test).  With *check*, the report also holds ``check``'s result for
    the quantized model.  *options*: an ``options=`` :class:`Options` or its fields (backend options, shapes).
    """
    from mobile_ep.passes import load
    from mobile_ep.pipeline import check as check_model
    from mobile_ep.pipeline import resolve_backends

    if (calibration is None) == (random is None):
        raise UsageError("give calibration data: --calibration DIR (a folder of .npy/.npz samples) or --random N")
    if random is not None and random < 1:
        raise UsageError(f"--random needs at least 1 sample, got {random}")
    opts = Options.build(ep, **options)
    if len(opts.backends) != 1:
        raise UsageError(f"quantize targets one backend, got {ep!r}")
    source = pathlib.Path(model)
    load.validate(source)
    plugins = plugins or make_plugins()
    (backend,) = resolve_backends(opts, plugins)
    target = pathlib.Path(output) if output is not None else source.with_name(f"{source.stem}.{file_label(backend.name)}.qdq.onnx")
    if target.exists() and target.resolve() == source.resolve():
        raise UsageError(f"output {target} would overwrite the input model; choose another -o")
    if calibration is not None:
        samples = read_calibration(calibration, source)
        described = f"folder {calibration}: {len(samples)} sample{'s' if len(samples) != 1 else ''}"
    else:
        samples = _random_samples(source, int(random), seed, opts)  # type: ignore[arg-type]
        described = (f"{len(samples)} random input{'s' if len(samples) != 1 else ''} (--random, seed {seed}): a smoke "
                     "test only, real calibration data gives other scales")
    with tempfile.TemporaryDirectory(prefix="mobile-ep-quantize-") as work_dir:
        work = pathlib.Path(work_dir)
        prepared = _preprocess(source, work)
        reader = _reader(samples)
        config = plugins.manager.hook.mobile_ep_quantization_config(
            backend=backend, model_path=str(prepared), calibration_reader=reader)
        if config is None:
            raise UsageError(f"backend {backend.name!r} declares no quantization (its plugin implements no "
                             "mobile_ep_quantization_config hook); quantize with onnxruntime.quantization directly")
        weights_only = isinstance(config, WeightsOnly)
        if weights_only:  # a Relu/Clip the activation's quantization would make redundant must stay
            config.config.extra_options = {**(config.config.extra_options or {}), "QDQKeepRemovableActivations": True}
        quantized = work / "quantized.onnx"
        _run_quantizer(prepared, quantized, config.config if weights_only else config, source)
        result = model_io.load(quantized, check=False)
        if weights_only:
            _drop_activation_quantization(result.graph)
        target.parent.mkdir(parents=True, exist_ok=True)
        model_io.save(result, target)
    accuracy = _accuracy(source, target, samples)
    checked = check_model(target, backend.name, options=opts, plugins=plugins) if check else None
    described_config = _describe(config.config if weights_only else config)
    if weights_only:
        described_config = {**described_config, "activations": "float (weights only)"}
    return QuantizeReport(str(source), str(target), backend.name, described, len(samples), random is not None,
                          described_config, accuracy, checked)


def _preprocess(source: pathlib.Path, work: pathlib.Path) -> pathlib.Path:
    """onnxruntime's recommended pre-processing (shape inference, its basic optimizations); the model as it
    is when that fails."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    prepared = work / "prepared.onnx"
    try:
        quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
        return prepared
    except Exception as exc:  # (pre-processing is advice, not a requirement of the quantizer)
        log.info("onnxruntime's quantization pre-processing failed (%s): quantizing the model as it is", exc)
        return source


def _run_quantizer(prepared: pathlib.Path, quantized: pathlib.Path, config: Any, source: pathlib.Path) -> None:
    from onnxruntime.quantization import quantize as ort_quantize

    logging.getLogger().disabled, was = True, logging.getLogger().disabled  # (its pre-processing advice)
    try:
        ort_quantize(str(prepared), str(quantized), config)
    except Exception as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        raise ModelError(f"{source}: onnxruntime.quantization failed: {message}") from None
    finally:
        logging.getLogger().disabled = was


def _drop_activation_quantization(graph: Any) -> None:
    """Remove every QuantizeLinear of a computed (non-constant) tensor with the DequantizeLinear nodes reading
    it: their consumers read the float tensor again.  The weights' DequantizeLinear nodes stay."""
    for q in [n for n in graph if n.op_type == "QuantizeLinear" and n.domain in ("", "ai.onnx")]:
        source = q.inputs[0]
        if source is None or source.const_value is not None or q.outputs[0].is_graph_output():
            continue
        readers = [use.node for use in q.outputs[0].uses()]
        if not readers or any(r.op_type != "DequantizeLinear" for r in readers):
            continue
        outputs = [r.outputs[0] for r in readers if r.outputs[0].is_graph_output()]
        if len(outputs) > 1 or (outputs and (source.is_graph_input() or source.is_graph_output())):
            continue  # (the model's interface keeps its names)
        for dq in readers:
            old = dq.outputs[0]
            if old.is_graph_output():
                name, old.name = old.name, f"{old.name}/dequantized"
                old.replace_all_uses_with(source, replace_graph_outputs=True)
                source.name = name
            else:
                old.replace_all_uses_with(source)
            graph.remove(dq, safe=True)
        graph.remove(q, safe=True)


def _describe(config: Any) -> dict[str, Any]:
    """The settings of an onnxruntime StaticQuantConfig worth showing."""
    extra = dict(getattr(config, "extra_options", None) or {})
    per_channel_tensors = sum(1 for v in (extra.get("TensorQuantOverrides") or {}).values()
                              if v and "axis" in v[0])
    result: dict[str, Any] = {
        "format": getattr(getattr(config, "quant_format", None), "name", str(getattr(config, "quant_format", ""))),
        "activations": getattr(getattr(config, "activation_type", None), "name", ""),
        "weights": getattr(getattr(config, "weight_type", None), "name", ""),
        "per_channel": bool(getattr(config, "per_channel", False)),
    }
    if per_channel_tensors:
        result["per_channel_tensors"] = per_channel_tensors
    return result


def _accuracy(float_model: pathlib.Path, quantized: pathlib.Path,
              samples: Sequence[Mapping[str, np.ndarray]]) -> list[OutputAccuracy]:
    errors: dict[str, float] = {}
    signal: dict[str, float] = {}
    noise: dict[str, float] = {}
    for sample in samples:
        reference = runtime.run(float_model, sample)
        got = runtime.run(quantized, sample)
        for name, ref in reference.items():
            if name not in got or not np.issubdtype(np.asarray(ref).dtype, np.number):
                continue
            r = np.asarray(ref, np.float64)
            diff = r - np.asarray(got[name], np.float64)
            errors[name] = max(errors.get(name, 0.0), float(np.max(np.abs(diff))) if diff.size else 0.0)
            signal[name] = signal.get(name, 0.0) + float(np.sum(r * r))
            noise[name] = noise.get(name, 0.0) + float(np.sum(diff * diff))
    result = []
    for name, error in errors.items():
        sqnr = math.inf if noise[name] == 0 else (10 * math.log10(signal[name] / noise[name]) if signal[name] > 0
                                                  else -math.inf)
        result.append(OutputAccuracy(name, error, sqnr))
    return result
