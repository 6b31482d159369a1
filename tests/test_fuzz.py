"""Fuzzing loading and ``check`` (targets in ``fuzz_targets.py``).

The default run tries a bounded number of examples.  ``tox -e fuzz`` sets ``MOBILE_EP_FUZZ_SECONDS``:
each target then runs in rounds of fresh random examples until that time is spent.
"""

from __future__ import annotations

import os
import time

import fuzz_targets as ft
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FUZZ_SECONDS = float(os.environ.get("MOBILE_EP_FUZZ_SECONDS", "0"))
QUICK_EXAMPLES = int(os.environ.get("MOBILE_EP_FUZZ_EXAMPLES", "25"))


def _run(target, strategies, label: str) -> None:
    """Once with QUICK_EXAMPLES, or in rounds until FUZZ_SECONDS have passed (a third each target)."""
    base = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck), derandomize=False)
    if not FUZZ_SECONDS:
        settings(base, max_examples=QUICK_EXAMPLES)(given(*strategies)(target))()
        return
    start = time.monotonic()
    end = start + FUZZ_SECONDS / 3
    rounds = 0
    while time.monotonic() < end:
        settings(base, max_examples=200)(given(*strategies)(target))()  # a fresh random round
        rounds += 1
    print(f"fuzz {label}: {rounds * 200} examples in {time.monotonic() - start:.0f} s, no crash")


def test_seed_models_pass():
    for data in ft.seed_models():
        ft.check_bytes(data)


def test_fuzz_arbitrary_bytes():
    def target(data):
        ft.check_bytes(data)

    _run(target, [st.one_of(st.binary(max_size=512), st.binary(max_size=64).map(lambda b: b"\x08\x08\x3a" + b))],
         "bytes")


def test_fuzz_byte_mutated_models():
    def target(seed, mutations):
        ft.check_bytes(ft.mutate_bytes(seed, mutations), ft.EXTRA_FILES)

    _run(target, [st.sampled_from(ft.seed_models()), st.lists(ft.byte_mutation, min_size=1, max_size=6)],
         "byte mutations")


def test_fuzz_field_mutated_models():
    def target(seed, mutations):
        ft.check_bytes(ft.mutate_fields(seed, mutations), ft.EXTRA_FILES)

    _run(target, [st.sampled_from(ft.seed_models()), st.lists(ft.field_mutation, min_size=1, max_size=5)],
         "field mutations")


@pytest.mark.skipif(not FUZZ_SECONDS, reason="only in tox -e fuzz")
def test_fuzz_ran_for_the_time_asked():
    assert FUZZ_SECONDS > 0
