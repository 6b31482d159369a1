"""ONNX's own node tests (``onnx.backend.test.case.node``) as :class:`NodeCase` objects: generated once,
cached on disk per onnx version (``$MOBILE_EP_CACHE_DIR``), selected for a backend and loaded as IR models.
Part of :mod:`mobile_ep.testing`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pathlib
import pickle
import sys
import tempfile
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np
import onnx_ir as ir

from mobile_ep.contract import Backend

__all__ = ["CACHE_ENV", "NodeCase", "onnx_node_cases", "candidate_cases", "load_case", "as_array"]

log = logging.getLogger(__name__)

#: Where the generated ONNX node cases are cached (``none`` to disable).
CACHE_ENV = "MOBILE_EP_CACHE_DIR"


@dataclasses.dataclass(frozen=True)
class NodeCase:
    """One of ONNX's node tests: a one-node (or expanded function) model and its expected outputs."""

    name: str
    model_bytes: bytes
    #: ``(inputs, expected outputs)`` pairs, in graph input and output order.
    data_sets: tuple[tuple[tuple[Any, ...], tuple[Any, ...]], ...]
    rtol: float
    atol: float
    #: (domain, op_type) of every node, with the domain ``""`` for ai.onnx.
    ops: frozenset[tuple[str, str]]

    @property
    def model(self) -> Any:
        """The case as an ``onnx.ModelProto``."""
        import onnx

        return onnx.load_from_string(self.model_bytes)

    def __repr__(self) -> str:
        return f"NodeCase({self.name})"


_CASES: tuple[NodeCase, ...] | None = None
#: Bumped whenever NodeCase changes, so that an old cache is never read.
_CACHE_SCHEMA = 1


def _cache_file() -> pathlib.Path | None:
    import onnx

    raw = os.environ.get(CACHE_ENV, "").strip()
    if raw.lower() in ("none", "off", "0", "false", "no"):
        return None
    if raw:
        base = pathlib.Path(raw)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
        base = (pathlib.Path(xdg) if xdg else pathlib.Path.home() / ".cache") / "mobile-ep"
    key = f"v{_CACHE_SCHEMA}-onnx-{onnx.__version__}-numpy{np.__version__.split('.')[0]}-py{sys.version_info[0]}{sys.version_info[1]}"
    return base / f"node-cases-{key}.pickle"


def _generate_cases() -> list[NodeCase]:
    import onnx.backend.test.case.node as node_cases

    if getattr(node_cases, "_TargetOpType", None):
        log.warning("ONNX node cases were collected for one op type only before; the list may be partial")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reference implementations overflow on purpose
        collected = node_cases.collect_testcases(None)
    cases = []
    for case in collected:
        if case.model is None:
            continue
        ops = frozenset(("" if n.domain == "ai.onnx" else n.domain, n.op_type) for n in case.model.graph.node)
        data_sets = tuple((tuple(inputs), tuple(outputs)) for inputs, outputs in case.data_sets)
        cases.append(NodeCase(case.name, case.model.SerializeToString(), data_sets, float(case.rtol),
                              float(case.atol), ops))
    return cases


def onnx_node_cases() -> tuple[NodeCase, ...]:
    """Every ONNX node test case (about 1,900), generated once per process and cached on disk."""
    global _CASES
    if _CASES is not None:
        return _CASES
    path = _cache_file()
    cases: list[NodeCase] | None = None
    if path is not None and path.is_file():
        try:
            with path.open("rb") as f:
                loaded = pickle.load(f)
            if isinstance(loaded, list) and all(isinstance(c, NodeCase) for c in loaded):
                cases = loaded
        except Exception as exc:  # a stale or damaged cache is rebuilt
            log.info("ignoring the node-case cache %s: %s", path, exc)
    if cases is None:
        cases = _generate_cases()
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".node-cases-")
                with os.fdopen(fd, "wb") as f:
                    pickle.dump(cases, f, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(tmp, path)
            except OSError as exc:
                log.info("cannot cache the node cases in %s: %s", path, exc)
    _CASES = tuple(cases)
    return _CASES


def candidate_cases(backend: Backend, cases: Iterable[NodeCase] | None = None) -> list[NodeCase]:
    """The cases every op of which has a rule in *backend* (the ones its claims decide)."""
    rules = backend.rules
    return [c for c in (onnx_node_cases() if cases is None else cases) if all(op in rules for op in c.ops)]


def as_array(value: Any) -> np.ndarray | None:
    """A node case's input or output as a numpy array; ``None`` for sequences, maps, optionals."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    if type(value).__name__ == "TensorProto":
        from onnx import numpy_helper

        return numpy_helper.to_array(value)
    return None


def load_case(case: NodeCase, constant_inputs: bool = False) -> ir.Model:
    """*case* as an IR model; with *constant_inputs*, every graph input but the first becomes a constant
    initializer holding the case's first data set (how the suite retries a case declined for weights that
    are not constant)."""
    from mobile_ep import model_io as mir

    model = mir.from_proto(case.model)
    if constant_inputs:
        graph = model.graph
        inputs, _ = case.data_sets[0]
        for value, data in list(zip(list(graph.inputs), inputs, strict=False))[1:]:
            graph.inputs.remove(value)
            value.const_value = ir.tensor(as_array(data), name=value.name)
            graph.register_initializer(value)
    return model
