"""The held-out corpus: the same generators with seeds never used while the checks were written.

Every case must end exactly as in the development corpus (``test_hostile.py``, seeds 0-2): the same
one-line error, the same exit code, for ``check`` through the toy backend and, for a sample of cases, in a
real ``mobile-ep`` process with the installed backends.
"""

from __future__ import annotations

import os
import subprocess
import sys

import hostile_corpus
import pytest
from test_hostile import POSIX, assert_one_line_error

HELD_OUT_SEEDS = (7919, 104729, 1299709)


@pytest.fixture(scope="module")
def heldout(tmp_path_factory):
    root = tmp_path_factory.mktemp("heldout")
    return {seed: {c.name: c for c in hostile_corpus.generate(root / f"seed{seed}", seed)} for seed in HELD_OUT_SEEDS}


@pytest.mark.parametrize("seed", HELD_OUT_SEEDS)
@pytest.mark.parametrize("name", sorted(hostile_corpus.CASES))
def test_heldout_case_gives_the_expected_error(heldout, plugins, seed, name, mobile_ep_cli):
    case = heldout[seed][name]
    if case.posix_only and not POSIX:
        pytest.skip("POSIX only")
    assert_one_line_error(mobile_ep_cli("check", str(case.path), "--ep", "toy", plugins=plugins), case)


def test_heldout_cases_in_a_real_process(heldout):
    cases = heldout[HELD_OUT_SEEDS[0]]
    for name in sorted(cases)[::4]:  # every 4th case, with the installed backends
        case = cases[name]
        if case.posix_only and not POSIX:
            continue
        proc = subprocess.run([sys.executable, "-m", "mobile_ep.cli", "check", str(case.path)], capture_output=True,
                              text=True, timeout=300, env=dict(os.environ))
        assert proc.returncode == case.exit_code, (name, proc.stderr)
        assert proc.stderr.startswith("mobile-ep: error: " + " ".join(case.message.split())), (name, proc.stderr)
        assert proc.stderr.count("\n") == 1 and proc.stdout == "", (name, proc.stderr)
