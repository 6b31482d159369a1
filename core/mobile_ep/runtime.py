"""Host execution and verification: run models with onnxruntime's CPU EP and compare their outputs."""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Mapping, Sequence

import numpy as np

from .errors import ModelError

__all__ = ["OutputDiff", "Verification", "make_inputs", "run", "compare", "verify"]

#: Default tolerances: |a - b| <= atol + rtol * |b|.
ATOL = 1e-4
RTOL = 1e-3


@dataclasses.dataclass(frozen=True)
class OutputDiff:
    name: str
    max_abs: float
    max_rel: float
    ok: bool
    note: str = ""

    def as_dict(self) -> dict:
        return {"output": self.name, "max_abs_error": self.max_abs, "max_rel_error": self.max_rel, "ok": self.ok,
                **({"note": self.note} if self.note else {})}


@dataclasses.dataclass
class Verification:
    candidate: str
    outputs: list[OutputDiff]
    seed: int

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    def as_dict(self) -> dict:
        return {"model": self.candidate, "ok": self.ok, "seed": self.seed,
                "outputs": [o.as_dict() for o in self.outputs]}


def _session(path: str | os.PathLike):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    try:
        return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    except Exception as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{path}: onnxruntime cannot load the model: {message}") from None


_ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int16)": np.int16, "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16, "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_,
}


def make_inputs(
    path: str | os.PathLike, *, seed: int = 0, dims: Mapping[str, int] | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, np.ndarray]:
    """Deterministic random inputs for every graph input of the model at *path*.

    Symbolic dims take their value from *dims* (by name) and default to 1; *shapes* overrides whole
    input shapes by input name.
    """
    session = _session(path)
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for arg in session.get_inputs():
        dtype = _ORT_TYPES.get(arg.type)
        if dtype is None:
            raise ModelError(f"cannot generate values for input {arg.name!r} of type {arg.type}")
        if shapes and arg.name in shapes:
            shape = [int(d) for d in shapes[arg.name]]
        else:
            shape = [d if isinstance(d, int) and d >= 0 else (dims or {}).get(str(d), 1) for d in arg.shape]
        if np.issubdtype(dtype, np.floating):
            value = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
        elif dtype is np.bool_:
            value = rng.integers(0, 2, size=shape).astype(np.bool_)
        else:
            value = rng.integers(0, 3, size=shape).astype(dtype)
        feeds[arg.name] = value
    return feeds


def run(path: str | os.PathLike, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = _session(path)
    names = [o.name for o in session.get_outputs()]
    known = {i.name for i in session.get_inputs()}
    try:
        values = session.run(names, {k: v for k, v in feeds.items() if k in known})
    except Exception as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{path}: onnxruntime failed to run the model: {message}") from None
    return dict(zip(names, values, strict=True))


def compare(reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray], *,
            atol: float = ATOL, rtol: float = RTOL) -> list[OutputDiff]:
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
        if np.issubdtype(ref.dtype, np.floating):
            r = ref.astype(np.float64)
            g = got.astype(np.float64)
            same_nan = np.isnan(r) & np.isnan(g)
            err = np.where(same_nan, 0.0, np.abs(g - r))
            rel = err / np.maximum(np.abs(r), 1e-12)
            ok = bool(np.all(err <= atol + rtol * np.abs(np.nan_to_num(r))))
            diffs.append(OutputDiff(name, float(np.nanmax(err)), float(np.nanmax(np.where(same_nan, 0, rel))), ok))
        else:
            equal = bool(np.array_equal(ref, got))
            err = float(np.max(np.abs(ref.astype(np.float64) - got.astype(np.float64)))) if ref.dtype != np.bool_ \
                else float(np.sum(ref != got))
            diffs.append(OutputDiff(name, err, 0.0 if equal else float("inf"), equal))
    return diffs


def verify(original: str | os.PathLike, candidates: Sequence[str | os.PathLike], *, seed: int = 0,
           dims: Mapping[str, int] | None = None, shapes: Mapping[str, Sequence[int]] | None = None,
           atol: float = ATOL, rtol: float = RTOL) -> list[Verification]:
    """Run *original* and each candidate on the same generated inputs and compare every output."""
    feeds = make_inputs(original, seed=seed, dims=dims, shapes=shapes)
    reference = run(original, feeds)
    return [
        Verification(str(pathlib.Path(c)), compare(reference, run(c, feeds), atol=atol, rtol=rtol), seed)
        for c in candidates
    ]
