"""The supported-op tables in docs/ are generated from the rule registries: keep them current."""

from __future__ import annotations

import pathlib

import pytest
from click.testing import CliRunner

from mobile_ep.cli.main import main
from mobile_ep.contract.plugins import make_plugins

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
INSTALLED = make_plugins().backends()


@pytest.mark.parametrize("backend", ["nnapi", "coreml"])
def test_generated_op_tables_are_current(backend):
    if backend not in INSTALLED:
        pytest.skip(f"{backend} backend not installed")
    result = CliRunner().invoke(main, ["ops", "--ep", backend, "--format", "md"])
    assert result.exit_code == 0, result.output
    committed = (DOCS / f"ops-{backend}.md").read_text()
    assert result.stdout == committed, (
        f"docs/ops-{backend}.md is out of date: run `mobile-ep ops --ep {backend} --format md > docs/ops-{backend}.md`")
