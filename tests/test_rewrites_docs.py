"""docs/rewrites.md lists every rewrite of the library, the backends that ask for it, and the error bound of
every approximate one."""

from __future__ import annotations

import pathlib

import pytest

from mepkit import has_backend
from mobile_ep.passes import rewrites

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "rewrites.md"


def _rows() -> dict[str, list[str]]:
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 5:
            rows[cells[0].strip("`")] = cells
    return rows


def _library():
    return [getattr(rewrites, name)() for name in rewrites.__all__]


def test_every_rewrite_has_one_row_and_every_row_a_rewrite():
    assert sorted(_rows()) == sorted(r.name for r in _library())


def test_approximate_rewrites_state_their_bound():
    rows = _rows()
    for rewrite in _library():
        exactness = rows[rewrite.name][3]
        if rewrite.max_abs_error is None:
            assert "approximate" not in exactness and not rewrite.name.endswith("-approx")
        else:
            bound = f"{rewrite.max_abs_error:.0e}".replace("e-0", "e-")  # 4e-7
            assert exactness.startswith("approximate") and bound in exactness and bound in rewrite.describe()
            assert rewrite.name.endswith("-approx") and "APPROXIMATE" in rewrite.describe()


#: The built-in and first-party backends the table's last column covers.
DOCUMENTED_BACKENDS = ("nnapi", "coreml", "qnn")


@pytest.mark.skipif(not any(has_backend(name) for name in DOCUMENTED_BACKENDS), reason="no backend installed")
def test_backends_column_is_what_each_installed_backend_asks_for():
    from mobile_ep.contract.plugins import make_plugins

    plugins = make_plugins()
    installed = [name for name in DOCUMENTED_BACKENDS if has_backend(name)]
    wanted = {name: {r.name for r in plugins.backend(name).rewrites()} for name in installed}
    for name, cells in _rows().items():
        listed = {b.strip() for b in cells[4].split(",")} & set(installed)
        assert listed == {backend for backend, names in wanted.items() if name in names}, name
