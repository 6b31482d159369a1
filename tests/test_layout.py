"""The core's layout stays readable: no import cycles among its modules (imports inside functions count), no
module over 800 lines, no C or C++, and every stage of the pipeline a module of ``passes/``."""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "core" / "mobile_ep"
MAX_LINES = 800


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id.lstrip("_") == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(name: str, path: pathlib.Path) -> set[str]:
    """The mobile_ep modules *name* imports when it runs: at the top, in functions and classes, but not under
    ``if TYPE_CHECKING:``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in MODULES else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return {m for m in found if m in MODULES and m != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return components


def test_the_walk_sees_imports_inside_functions():
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    assert "mobile_ep.pipeline" in graph["mobile_ep.cli.main"]  # (imported only inside its commands)
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    inside = [name for name, path in MODULES.items()
              if any(isinstance(n, ast.FunctionDef) and any(isinstance(i, ast.ImportFrom) for i in ast.walk(n))
                     for n in ast.walk(ast.parse(path.read_text())))]
    assert inside, "no module imports inside a function: the walk would not be tested"


def test_no_import_cycles():
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    assert _cycles(graph) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_over_800_lines(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines"


def test_no_c_or_cpp_in_the_core():
    compiled = [p for p in PACKAGE.rglob("*") if p.suffix in (".c", ".cc", ".cpp", ".h", ".so", ".pyx")]
    assert compiled == []


def test_every_stage_is_a_module_of_passes():
    stages = ["load", "fix_shapes", "fold_constants", "legalize", "partition", "fuse_cpu", "export",
              "to_epcontext", "verify"]
    assert [s for s in stages if f"mobile_ep.passes.{s}" not in MODULES] == []
    pipeline = MODULES["mobile_ep.pipeline"].read_text()
    assert len(pipeline.splitlines()) <= 250
