"""Quantization of a decoder's prefill and decode graphs for the NPU: w8a16 and w4a16 QDQ, by ``onnxruntime.quantization``.

The HTP runs 16-bit activations with 8-bit (or 4-bit) weights fast; the QDQ form it takes is what
``onnxruntime.quantization.execution_providers.qnn.get_qnn_qdq_config`` writes, on the graphs converted to opset 21
first, so that uint16 activations go through the standard QuantizeLinear/DequantizeLinear (below 21 the quantizer
writes ``com.microsoft`` ones, which mobile-ep reads as the standard ops only from opset 21: :mod:`mobile_ep.passes.contrib_qdq`); w8a16 MatMul weights int8 per tensor,
as that helper writes them; w4a16 int4 in blocks of 32 per output channel, opset 21's blocked DequantizeLinear,
which the QNN EP of onnxruntime-qnn 2.7 takes too, int4 per tensor costing too much).  mobile-ep has no quantizer of its own; what it adds for a decoder is consistency
across the two graphs:

- **weights**: a weight's scale and zero point come from its values only, so the same weight gets the same
  quantized tensor in both graphs; the two QDQ graphs are written beside ONE external-data file in which each
  shared tensor is stored once (:func:`write_sharing`);
- **KV cache**: the cache a graph writes (``present...``) is what the next graph reads (``past...``): every
  tensor of one layer's key (or value) cache, in and out of both graphs, is given the same range (the union of
  what calibration saw), so the two graphs' caches have one scale and zero point and can be handed over as
  they are;
- **activations**: a tensor of both graphs (same name) gets one range, the union of both graphs' (measured on
  a 2-layer, hidden-256 decoder: the QNN context holding both graphs went from 1.15x to 1.11x one graph's,
  logits SQNR unchanged);
- **masks**: calibration leaves NaN (a fully masked row's softmax) and mask values (``-inf``, ``finfo.min``)
  out of a tensor's range (:func:`activation_ranges`), which would otherwise make the attention scores'
  scale infinite;
- **calibration**: prompts' token ids (a folder of them: :func:`read_prompts`, or random ids, which the report
  calls a smoke test), each run through the float prefill graph and then greedy decode steps
  (:func:`float_runs`, as an app runs the graphs); the same runs are the evaluation: the report gives the logits' SQNR and the top-1
  agreement of the quantized graphs against the float ones, per graph.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import pathlib
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from mobile_ep import sessions
from mobile_ep.errors import ModelError, UsageError
from mobile_ep.llm.decoder import Interface, interface

__all__ = ["SCHEMES", "Scheme", "Run", "LlmQuantReport", "GraphAccuracy", "read_prompts", "random_prompts",
           "float_runs", "kv_groups", "activation_ranges", "quantize_graphs", "write_sharing", "logits_accuracy"]


@dataclasses.dataclass(frozen=True)
class Scheme:
    """A quantization scheme: activation and weight types (``onnxruntime.quantization.QuantType`` names),
    whether weights are symmetric, and what it is for."""

    name: str
    activations: str
    weights: str
    symmetric_weights: bool
    about: str
    #: MatMul weights quantized per output channel (axis 1 of a [K, N] weight) rather than per tensor
    per_channel: bool = False
    #: MatMul weights quantized in blocks of this many along K (opset 21's blocked DequantizeLinear); 0: not blocked
    block_size: int = 0
    #: The graphs are converted to this opset first when below it (0: as they are); blocks need 21
    opset: int = 0


SCHEMES: Mapping[str, Scheme] = {
    "w8a16": Scheme("w8a16", "QUInt16", "QInt8", True,
                    "uint16 activations, int8 symmetric weights per tensor (the HTP's fast 16-bit path)", opset=21),
    "w4a16": Scheme("w4a16", "QUInt16", "QInt4", True,
                    "uint16 activations, int4 symmetric MatMul weights in blocks of 32 along K per output channel",
                    per_channel=True, block_size=32, opset=21),
}


# -- prompts ----------------------------------------------------------------------------------------
def read_prompts(folder: str | os.PathLike) -> list[np.ndarray]:
    """The prompts in *folder*, one per file in name order: ``.npy`` (a 1-D integer array), ``.json`` (a list
    of integers) or ``.txt`` (integers separated by white space), each a prompt's token ids."""
    folder = pathlib.Path(folder)
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a folder (give a folder of token-id files: .npy, .json or .txt)")
    files = sorted(p for p in folder.iterdir() if p.suffix in (".npy", ".json", ".txt") and p.is_file())
    if not files:
        raise UsageError(f"{folder}: no .npy, .json or .txt token-id files in it")
    prompts = []
    for file in files:
        try:
            if file.suffix == ".npy":
                ids = np.load(file, allow_pickle=False)
            elif file.suffix == ".json":
                ids = np.asarray(json.loads(file.read_text()))
            else:
                ids = np.asarray([int(t) for t in file.read_text().split()])
        except (ValueError, OSError) as exc:
            raise UsageError(f"{file}: not a list of token ids ({type(exc).__name__}: {exc})") from None
        ids = np.asarray(ids)
        if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
            raise UsageError(f"{file}: not a list of token ids (a non-empty 1-D list of integers)")
        prompts.append(ids.astype(np.int64))
    return prompts


def random_prompts(count: int, vocabulary: int, length: int, seed: int = 0) -> list[np.ndarray]:
    """*count* prompts of random token ids (a smoke test: they say nothing of accuracy on real text)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocabulary, size=length, dtype=np.int64) for _ in range(count)]


# -- the graphs' interface ----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Graph:
    """A prefill or decode graph: its decoder interface (:func:`mobile_ep.llm.decoder.interface`), its token
    window and its context (the mask's length)."""

    path: pathlib.Path
    face: Interface
    seq: int
    context: int


def _graph(path: pathlib.Path) -> _Graph:
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    face = interface(proto, path)
    inputs = {v.name: [d.dim_value if d.HasField("dim_value") else 0 for d in v.type.tensor_type.shape.dim]
              for v in proto.graph.input}
    seq, context = inputs[face.input_ids][-1], inputs[face.attention_mask][-1]
    if min(seq, context) <= 0:
        raise ModelError(f"{path}: the token window and the mask need fixed sizes (input_ids {seq or '?'}, "
                         f"attention_mask {context or '?'}): write the graphs with mobile-ep llm first")
    return _Graph(path, face, seq, context)


# -- float runs ---------------------------------------------------------------------------------------
@dataclasses.dataclass
class Run:
    """One graph's calibration and evaluation data: its feeds, the float logits, and which logits rows are
    real tokens (the prefill window is padded after the prompt)."""

    graph: str
    feeds: list[dict[str, np.ndarray]] = dataclasses.field(default_factory=list)
    logits: list[np.ndarray] = dataclasses.field(default_factory=list)
    rows: list[np.ndarray] = dataclasses.field(default_factory=list)


def _cpu(path: pathlib.Path) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    return sessions.open_session(path, so)


class _Recording:
    """A session that keeps every feed it is given (copied: the generation loop reuses its cache arrays) and
    every result."""

    def __init__(self, session: Any, logits: str) -> None:
        self.session = session
        self.feeds: list[dict[str, np.ndarray]] = []
        self.logits: list[np.ndarray] = []
        self._index = [o.name for o in session.get_outputs()].index(logits)

    def get_outputs(self) -> Any:
        return self.session.get_outputs()

    def run(self, names: Any, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        self.feeds.append({k: np.array(v, copy=True) for k, v in feeds.items()})
        results = self.session.run(names, dict(feeds))
        self.logits.append(results[self._index])
        return results


def float_runs(prefill: str | os.PathLike, decode: str | os.PathLike, prompts: Sequence[np.ndarray],
               steps: int = 8) -> dict[str, Run]:
    """Each prompt through the float graphs by ``mobile-ep llm``'s own generation loop
    (:mod:`mobile_ep.llm.generate`, as the app runs them): its first ``prefill`` tokens in the window, then
    *steps* greedy decode steps.  By graph (``"prefill"``, ``"decode"``): every feed and its logits."""
    from mobile_ep.llm.generate import _Graphs

    p, d = _graph(pathlib.Path(prefill)), _graph(pathlib.Path(decode))
    if p.context != d.context or p.face.past != d.face.past or d.seq != 1:
        raise ModelError(f"{d.path}: not the decode graph of {p.path} (context {d.context} vs {p.context}, "
                         "other cache names, or more than one new token)")
    face, context, window = p.face, p.context, p.seq
    sessions = {"prefill": _Recording(_cpu(p.path), face.logits), "decode": _Recording(_cpu(d.path), face.logits)}
    runner = _Graphs(face, context, window, sessions["prefill"], sessions["decode"])
    runs = {"prefill": Run("prefill"), "decode": Run("decode")}
    for prompt in prompts:
        tokens = [int(t) for t in np.asarray(prompt).reshape(-1)[:window]]
        if not tokens or (face.vocab and not 0 <= min(tokens) <= max(tokens) < face.vocab):
            raise UsageError(f"a calibration prompt has token ids outside the vocabulary of {face.vocab} "
                             f"({min(tokens, default='none')}..{max(tokens, default='none')})")
        token = int(np.argmax(runner.start(tokens)))
        runs["prefill"].rows.append(np.arange(len(tokens)))
        for _ in range(min(steps, context - 1 - len(tokens))):
            token = int(np.argmax(runner.step(token)))
            runs["decode"].rows.append(np.arange(1))
    for role, session in sessions.items():
        runs[role].feeds = session.feeds
        runs[role].logits = [logits.reshape(-1, logits.shape[-1]) for logits in session.logits]
    return runs


def kv_groups(graphs: Mapping[str, str | os.PathLike]) -> dict[tuple[int, str], list[tuple[str, str]]]:
    """The cache tensors of each layer's key (and value) cache across *graphs* (role -> path): (role, tensor
    name) of every input and output that holds it."""
    groups: dict[tuple[int, str], list[tuple[str, str]]] = {}
    for role, path in graphs.items():
        face = _graph(pathlib.Path(path)).face
        for pairs in (face.past, face.present):
            for layer, (key, value) in enumerate(pairs):
                groups.setdefault((layer, "key"), []).append((role, key))
                groups.setdefault((layer, "value"), []).append((role, value))
    return groups


# -- accuracy --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class GraphAccuracy:
    """What quantizing cost one graph's logits over the calibration runs: SQNR in dB
    (``10·log10(Σ float² / Σ (float - quantized)²)``), the share of token positions whose arg-max agrees, and
    the largest absolute difference."""

    graph: str
    positions: int
    sqnr_db: float
    top1: float
    max_abs: float

    def as_dict(self) -> dict:
        return {"graph": self.graph, "positions": self.positions,
                "sqnr_db": round(self.sqnr_db, 2) if math.isfinite(self.sqnr_db) else "inf",
                "top1_agreement": round(self.top1, 4), "max_abs_error": self.max_abs}


def logits_accuracy(graph: str, reference: Sequence[np.ndarray], got: Sequence[np.ndarray],
                    rows: Sequence[np.ndarray]) -> GraphAccuracy:
    """SQNR and top-1 agreement of *got* against *reference* logits (``[positions, vocabulary]`` each), over
    the *rows* of each that are real tokens."""
    ref = np.concatenate([np.asarray(r, np.float64)[i] for r, i in zip(reference, rows, strict=True)])
    out = np.concatenate([np.asarray(g, np.float64).reshape(r.shape)[i]
                          for g, r, i in zip(got, reference, rows, strict=True)])
    noise = float(np.sum((ref - out) ** 2))
    sqnr = math.inf if noise == 0 else 10 * math.log10(float(np.sum(ref ** 2)) / noise)
    top1 = float(np.mean(ref.argmax(-1) == out.argmax(-1))) if len(ref) else 1.0
    return GraphAccuracy(graph, len(ref), sqnr, top1, float(np.max(np.abs(ref - out))) if len(ref) else 0.0)


# -- writing two graphs over one weights file ---------------------------------------------------------
#: Initializers at least this large go to the shared external-data file.
EXTERNAL_BYTES = 1024


def write_sharing(models: Mapping[str, Any], folder: str | os.PathLike, weights: str) -> dict[str, int]:
    """Write *models* (file name -> ``onnx.ModelProto``) into *folder* with every initializer of
    ``EXTERNAL_BYTES`` or more in the one external-data file *weights*, a tensor of the same name and bytes
    stored once for all of them.  Returns the bytes each model's initializers take and the file's size."""
    import onnx
    from onnx import numpy_helper

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stored: dict[tuple[str, str], tuple[int, int]] = {}
    sizes: dict[str, int] = {}
    with open(folder / weights, "wb") as data:
        for file_name, model in models.items():
            total = 0
            for tensor in model.graph.initializer:
                raw = (tensor.raw_data if tensor.HasField("raw_data")  # (from_array packs 4-bit types two a byte)
                       else numpy_helper.from_array(numpy_helper.to_array(tensor)).raw_data)
                if len(raw) < EXTERNAL_BYTES:
                    continue
                total += len(raw)
                key = (tensor.name, hashlib.sha256(raw).hexdigest())
                if key not in stored:
                    offset = data.seek(0, os.SEEK_END)
                    pad = (-offset) % 64
                    data.write(b"\0" * pad)
                    data.write(raw)
                    stored[key] = (offset + pad, len(raw))
                offset, length = stored[key]
                kept = onnx.TensorProto()
                kept.CopyFrom(tensor)
                kept.ClearField("raw_data")
                for field in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
                    kept.ClearField(field)
                kept.data_location = onnx.TensorProto.EXTERNAL
                del kept.external_data[:]
                for k, v in (("location", weights), ("offset", str(offset)), ("length", str(length))):
                    entry = kept.external_data.add()
                    entry.key, entry.value = k, v
                tensor.CopyFrom(kept)
            onnx.save(model, str(folder / file_name))
            sizes[file_name] = total
        sizes[weights] = data.tell()
    return sizes


# -- quantizing -----------------------------------------------------------------------------------------------
@dataclasses.dataclass
class LlmQuantReport:
    """What :func:`quantize_graphs` wrote and what it cost."""

    scheme: Scheme
    calibration: str
    prompts: int
    random: bool
    graphs: dict[str, str]
    weights: str
    weights_bytes: int
    graph_weights_bytes: dict[str, int]
    accuracy: list[GraphAccuracy]
    kv_ranges: dict[str, tuple[float, float]]

    def as_dict(self) -> dict:
        return {"scheme": self.scheme.name, "about": self.scheme.about,
                "calibration": {"source": self.calibration, "prompts": self.prompts, "random": self.random},
                "graphs": self.graphs, "weights": self.weights, "weights_bytes": self.weights_bytes,
                "graph_weights_bytes": self.graph_weights_bytes,
                "accuracy": [a.as_dict() for a in self.accuracy],
                "kv_ranges": {k: list(v) for k, v in self.kv_ranges.items()}}

    def text(self) -> str:
        what = ("random token ids (a smoke test: not an accuracy measure)" if self.random
                else "the calibration prompts")
        lines = [f"quantized {self.scheme.name}: {self.scheme.about}",
                 f"  calibration: {self.calibration}",
                 f"  weights: {self.weights} {self.weights_bytes / 1e6:.2f} MB, stored once for "
                 f"{len(self.graphs)} graphs ({' + '.join(f'{v / 1e6:.2f}' for v in self.graph_weights_bytes.values())} "
                 "MB as each graph uses them)",
                 f"  logits against the float graphs, over {what}:"]
        for a in self.accuracy:
            sqnr = f"{a.sqnr_db:.1f} dB" if math.isfinite(a.sqnr_db) else "inf"
            lines.append(f"    {a.graph}: SQNR {sqnr}, top-1 agreement {a.top1:.1%} of {a.positions} positions, "
                         f"max abs error {a.max_abs:.3g}")
        return "\n".join(lines) + "\n"


class _Reader:
    """An ``onnxruntime.quantization.CalibrationDataReader`` over a list of feeds."""

    def __init__(self, feeds: Sequence[Mapping[str, np.ndarray]]) -> None:
        self.feeds = list(feeds)
        self._iter: Iterator[Mapping[str, np.ndarray]] = iter(self.feeds)

    def get_next(self) -> Mapping[str, np.ndarray] | None:
        return next(self._iter, None)

    def rewind(self) -> None:
        self._iter = iter(self.feeds)


#: A value this far from zero is a mask (``-inf``, ``finfo.min``, ``-1e9``), not a signal: calibration leaves it
#: out of a tensor's range, and a tensor that holds one gets :data:`MASK_MARGIN` below its signal instead, where
#: the mask saturates (``exp(-100)``: a masked position still gets no attention).
MASK_LIMIT = 1e4
MASK_MARGIN = 100.0
#: Ops whose output the QNN EP takes only with fixed quantization parameters (get_qnn_qdq_config sets them).
_FIXED_OUTPUTS = frozenset({"Sigmoid", "Tanh"})


def activation_ranges(path: str | os.PathLike, feeds: Sequence[Mapping[str, np.ndarray]]) -> dict[str, tuple[float, float]]:
    """The calibrated range of every float activation of the graph at *path* over *feeds*: min and max of its
    values, leaving out NaN (a fully masked attention row's softmax, replaced by 0 after it) and mask values
    (:data:`MASK_LIMIT`, :data:`MASK_MARGIN`).  Outputs of ops with fixed parameters are left to the QNN
    config."""
    import onnx
    import onnxruntime as ort

    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    types = {v.name: v.type.tensor_type.elem_type for v in (*graph.input, *graph.value_info, *graph.output)}
    fixed = {o for n in graph.node if n.op_type in _FIXED_OUTPUTS for o in n.output}
    wanted = [name for name in dict.fromkeys([*(v.name for v in graph.input),
                                               *(o for n in graph.node for o in n.output)])
              if name and name not in initializers and name not in fixed
              and types.get(name) == onnx.TensorProto.FLOAT]
    outputs = {o.name for o in graph.output}
    graph.output.extend(onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None)
                        for n in wanted if n not in outputs)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    with tempfile.TemporaryDirectory(prefix="mobile-ep-llmq-") as work:
        augmented = pathlib.Path(work) / "augmented.onnx"
        onnx.save(model, str(augmented), save_as_external_data=True, location="augmented.data",
                  size_threshold=EXTERNAL_BYTES)  # (a model over 2 GB cannot be one protobuf)
        session = sessions.open_session(augmented, so)
        names = [o.name for o in session.get_outputs()]
        ranges: dict[str, tuple[float, float]] = {}
        for feed in feeds:
            values = dict(zip(names, session.run(names, dict(feed)), strict=True))
            values.update({k: v for k, v in feed.items() if k in wanted})
            for name in wanted:
                array = np.asarray(values[name], np.float64)
                signal = array[np.abs(array) < MASK_LIMIT]
                if signal.size == 0 and not np.any(array <= -MASK_LIMIT):
                    continue
                low = float(signal.min()) if signal.size else 0.0
                high = float(signal.max()) if signal.size else 0.0
                if np.any(array <= -MASK_LIMIT):
                    low -= MASK_MARGIN
                if np.any(array >= MASK_LIMIT):
                    high += MASK_MARGIN
                old = ranges.get(name, (low, high))
                ranges[name] = (min(old[0], low), max(old[1], high))
    return ranges


def _per_channel_weights(source: pathlib.Path, scheme: Scheme) -> dict[str, list[dict[str, Any]]]:
    """Overrides quantizing every 2-D MatMul weight of *source* per output channel with the scheme's weight type."""
    import onnx
    from onnxruntime.quantization import QuantType

    model = onnx.load(str(source), load_external_data=False)
    weights = {t.name for t in model.graph.initializer if len(t.dims) == 2}
    axis = 0 if scheme.block_size else 1  # (blocked: the axis the blocks run along)
    return {n.input[1]: [{"quant_type": QuantType[scheme.weights], "axis": axis, "symmetric": scheme.symmetric_weights}]
            for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in weights}


def _at_opset(source: pathlib.Path, target: pathlib.Path, opset: int) -> pathlib.Path:
    """*source* converted to *opset* by onnx's version converter (the same names: both graphs convert alike),
    written to *target* with its weights beside it; *source* itself when it is at *opset* already."""
    import onnx
    from onnx import version_converter

    model = onnx.load(str(source))
    current = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), opset)
    if current >= opset:
        return source
    try:
        converted = version_converter.convert_version(model, opset)
    except Exception as exc:
        raise ModelError(f"{source}: cannot be converted to opset {opset} for blocked weights: "
                         f"{' '.join(str(exc).split())[:200]}") from None
    converted.ir_version = max(converted.ir_version, 10)
    onnx.save(converted, str(target), save_as_external_data=True, location=f"{target.name}.data",
              size_threshold=EXTERNAL_BYTES)
    return target


def _quantize_one(source: pathlib.Path, target: pathlib.Path, feeds: Sequence[Mapping[str, np.ndarray]],
                  scheme: Scheme, overrides: dict[str, list[dict[str, Any]]]) -> None:
    import logging

    from onnxruntime.quantization import QuantType, quantize
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

    if scheme.per_channel:
        overrides = {**overrides, **_per_channel_weights(source, scheme)}
    config = get_qnn_qdq_config(str(source), _Reader(feeds), activation_type=QuantType[scheme.activations],
                                weight_type=QuantType[scheme.weights], weight_symmetric=scheme.symmetric_weights,
                                init_overrides=overrides)
    if scheme.block_size:
        config.extra_options["BlockSize"] = scheme.block_size
    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)  # (the tool logs each override it cannot apply)
    try:
        quantize(str(source), str(target), config)
    finally:
        logging.getLogger().setLevel(level)


def quantize_graphs(prefill: str | os.PathLike, decode: str | os.PathLike, folder: str | os.PathLike,
                    prompts: Sequence[np.ndarray], scheme: str = "w8a16", *, calibration: str = "",
                    random: bool = False, steps: int = 8, weights: str = "") -> LlmQuantReport:
    """Quantize the *prefill* and *decode* graphs of one decoder with *scheme* (:data:`SCHEMES`), calibrated
    on *prompts* (:func:`float_runs`), into *folder*: ``<stem>.<scheme>.onnx`` for each and one external-data
    file *weights* (default ``<prefill stem>.<scheme>.data``) holding each shared tensor once.  The KV cache of
    each layer gets one range in both graphs (:func:`kv_groups`).  Both graphs are then run on onnxruntime's
    CPU EP on the same runs and compared with the float ones (:class:`LlmQuantReport`)."""
    import onnx

    if scheme not in SCHEMES:
        raise UsageError(f"unknown quantization scheme {scheme!r} (choose from {', '.join(SCHEMES)})")
    chosen = SCHEMES[scheme]
    sources = {"prefill": pathlib.Path(prefill), "decode": pathlib.Path(decode)}
    if not prompts:
        raise UsageError("no calibration prompts")
    runs = float_runs(sources["prefill"], sources["decode"], prompts, steps=steps)
    folder = pathlib.Path(folder)
    names = {role: f"{path.stem}.{chosen.name}.onnx" for role, path in sources.items()}
    weights = weights or f"{sources['prefill'].stem}.{chosen.name}.data"
    models = {}
    with tempfile.TemporaryDirectory(prefix="mobile-ep-llmq-") as work:
        if chosen.opset:
            sources = {role: _at_opset(path, pathlib.Path(work) / f"{role}.opset{chosen.opset}.onnx", chosen.opset)
                       for role, path in sources.items()}
        measured = {role: activation_ranges(sources[role], runs[role].feeds) for role in sources}
        for name in set(measured["prefill"]) & set(measured["decode"]):  # (one encoding for a tensor of both)
            both = (measured["prefill"][name], measured["decode"][name])
            measured["prefill"][name] = measured["decode"][name] = (min(r[0] for r in both), max(r[1] for r in both))
        ranges: dict[str, tuple[float, float]] = {}
        for (layer, kind), members in sorted(kv_groups(sources).items()):
            seen = [measured[role][name] for role, name in members if name in measured[role]]
            low, high = min(0.0, *(r[0] for r in seen)), max(0.0, *(r[1] for r in seen))
            ranges[f"layer {layer} {kind}"] = (low, high)
            for role, name in members:
                measured[role][name] = (low, high)
        for role in sources:
            overrides = {name: [{"rmin": np.float32(low), "rmax": np.float32(high)}]
                         for name, (low, high) in measured[role].items()}
            target = pathlib.Path(work) / names[role]
            _quantize_one(sources[role], target, runs[role].feeds[:1], chosen, overrides)
            model = onnx.load(str(target))
            model.ir_version = min(model.ir_version, 10)
            models[names[role]] = model
        sizes = write_sharing(models, folder, weights)
    accuracy = []
    for role in sources:
        session = _cpu(folder / names[role])
        graph = _graph(folder / names[role])
        got = [session.run([graph.face.logits], feeds)[0].reshape(graph.seq, -1) for feeds in runs[role].feeds]
        accuracy.append(logits_accuracy(role, runs[role].logits, got, runs[role].rows))
    return LlmQuantReport(chosen, calibration or f"{len(prompts)} prompts", len(prompts), random,
                          {role: str(folder / n) for role, n in names.items()}, str(folder / weights),
                          sizes[weights], {names[r]: sizes[names[r]] for r in sources}, accuracy, ranges)
