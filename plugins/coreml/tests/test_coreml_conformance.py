"""ONNX's own node tests through the Core ML backend (mobile-ep's conformance kit): every claimed case is
lowered to MIL, saved as an .mlpackage, run by the emulator of the saved model and compared with ONNX's
expected outputs -- ML Program in float32 (every case, and the sample model), NeuralNetwork and ML Program
in float16 (a case per op combination; every case with ``MOBILE_EP_ALL_CONFORMANCE=1``, tox env
``coreml-models``).  ``mobile-ep conformance --ep coreml`` runs the first; add ``-O model_format=NeuralNetwork``
or ``-O compute_precision=float16`` for the others."""

from __future__ import annotations

import os

from mobile_ep.testing import BackendConformance, NodeCase, candidate_cases, run_case
from mobile_ep_coreml import CoreMLBackend

ALL = os.environ.get("MOBILE_EP_ALL_CONFORMANCE", "").strip() not in ("", "0")


class TestCoreMLConformance(BackendConformance):
    backend = CoreMLBackend
    models = ("mobilenet_sample",)


_SUBSET: set[str] = set()


def _one_case_per_op(case: NodeCase) -> bool:
    """The first case of each op combination (keeps the NeuralNetwork and float16 runs short)."""
    if ALL:
        return True
    if not _SUBSET:
        seen = set()
        for candidate in candidate_cases(CoreMLBackend()):
            if candidate.ops not in seen and "expanded" not in candidate.name:
                seen.add(candidate.ops)
                _SUBSET.add(candidate.name)
    return case.name in _SUBSET


class TestCoreMLNeuralNetworkConformance(BackendConformance):
    backend = staticmethod(lambda: CoreMLBackend().configure({"model_format": "NeuralNetwork"}))
    cases = staticmethod(_one_case_per_op)
    models = ("mobilenet_sample",)


class TestCoreMLFloat16Conformance(BackendConformance):
    backend = staticmethod(lambda: CoreMLBackend().configure({"compute_precision": "float16"}))
    cases = staticmethod(_one_case_per_op)
    models = ()
    rtol = 2e-2
    atol = 2e-2
    known_failures = {  # float16 itself, as on the device (only in the full run)
        "test_reduce_prod_default_axes_keepdims_example": "the product (1.1e8) overflows float16",
        "test_softmax_large_number": "inputs near 10000 are 8 apart in float16",
    } if ALL else {}


class _ClaimsOnly(CoreMLBackend):
    """The backend's claims without compiling (the kit then only counts them)."""

    compile = emulate = runtime_adapter = None  # type: ignore[assignment]


def test_at_least_250_cases_are_claimed_for_ml_program():
    """The per-case tests above compile and check each claimed case; this pins how many there are."""
    results = [run_case(_ClaimsOnly(), case) for case in candidate_cases(CoreMLBackend())]
    claimed = sum(r.status == "claimed" for r in results)
    assert claimed >= 250, claimed
