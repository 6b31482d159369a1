"""ONNX's own node tests through the NNAPI backend (mobile-ep's conformance kit): every claimed case is
lowered, serialized, emulated and compared with ONNX's expected outputs -- with ORT's claims, and with the
claims of compile_ops=extended.  ``mobile-ep conformance --ep nnapi`` runs the same."""

from __future__ import annotations

from mobile_ep.testing import BackendConformance, candidate_cases, run_case
from mobile_ep_nnapi import NnapiBackend


class TestNnapiConformance(BackendConformance):
    backend = NnapiBackend
    models = ("mobilenet_sample",)


class TestNnapiExtendedConformance(BackendConformance):
    backend = staticmethod(lambda: NnapiBackend().configure({"compile_ops": "extended"}))
    models = ("mobilenet_sample",)


def test_at_least_200_cases_are_claimed_in_compile_mode():
    """The kit's per-case tests above check each claimed case; this pins how many there are."""
    counts = {}
    for label, backend in (("ort", NnapiBackend()), ("extended", NnapiBackend().configure({"compile_ops": "extended"}))):
        results = [run_case(backend, case) for case in candidate_cases(backend)]
        counts[label] = sum(r.status in ("passed", "failed") for r in results)
        assert not [r for r in results if r.status == "failed"], label
    assert counts["ort"] >= 170 and counts["extended"] >= 200, counts
