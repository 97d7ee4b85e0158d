"""The import arrows of DESIGN.md, read from the source with ``ast`` (nothing is imported).

- ``navi`` → (``actors``, ``projections``, ``tools``, ``profiles``) → ``events``: a lower
  package never imports a higher one, ``events`` and ``profiles`` import nothing of ours.
- No import circle between modules of ``navi/``: an import inside ``if TYPE_CHECKING:``
  does not count (it never runs), an import inside a function does (it runs).
- No circle between the parts of ``navi/`` (its subpackages and top-level modules) either,
  counting only imports of modules that import something of ``navi`` themselves: a leaf
  such as ``navi/session/errors.py`` may be imported from anywhere.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Which of our packages each package may import.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "events": frozenset(),
    "profiles": frozenset(),
    "actors": frozenset({"events"}),
    "projections": frozenset({"events"}),
    "tools": frozenset({"events"}),
    "navi": frozenset({"events", "actors", "projections", "tools", "profiles"}),
}

# Imports between parts of navi/ that close a circle, each with the reason it is let be.
ALLOWED_PART_CIRCLES: dict[tuple[str, str], str] = {
    # The driver reads the session's state (navi.run ↔ navi.session): removed by the
    # run-table branch; drop this entry once it is merged.
    ("navi.run.driver", "navi.session.state"): "removed by the run-table branch",
}

Edge = tuple[str, str, int, bool]  # importer, imported module, line, type-only


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in MAY_IMPORT:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _imports(tree: ast.AST, type_only: bool = False) -> Iterator[tuple[ast.stmt, bool]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from _imports_in(child, True)
            for child in node.orelse:
                yield from _imports_in(child, type_only)
        else:
            yield from _imports_in(node, type_only)


def _imports_in(node: ast.AST, type_only: bool) -> Iterator[tuple[ast.stmt, bool]]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node, type_only
    else:
        yield from _imports(node, type_only)


def _known(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _edges(modules: dict[str, Path]) -> list[Edge]:
    edges: list[Edge] = []
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node, type_only in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                assert isinstance(node, ast.ImportFrom)
                base = node.module or ""
                if node.level:
                    parent = package[: len(package) - node.level + 1]
                    base = ".".join([*parent, base] if base else parent)
                # ``from a import b``: b is a module of a, or a name defined in a.
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            for target in targets:
                known = _known(target, modules)
                if known is not None and known != name:
                    edges.append((name, known, node.lineno, type_only))
    return edges


MODULES = _modules()
EDGES = _edges(MODULES)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` (its nodes in order, the first repeated last), if any."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)) is not None:
            return found
    return None


def test_the_walk_sees_the_packages() -> None:
    # A walk that found nothing would pass every test below.
    assert {"navi.app", "navi.run.driver", "events.types", "tools.registry"} <= MODULES.keys()
    found = {(importer, target) for importer, target, _, _ in EDGES}
    assert {("navi.app", "navi.config"), ("navi.server.app", "navi.server.routes")} <= found


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_a_package_imports_only_lower_packages(package: str) -> None:
    wrong = [
        f"{importer}:{line} imports {target}"
        for importer, target, line, _ in EDGES
        if importer.split(".")[0] == package
        and (other := target.split(".")[0]) != package
        and other not in MAY_IMPORT[package]
    ]
    assert not wrong, f"{package} may import only {sorted(MAY_IMPORT[package])}: {wrong}"


def test_no_import_circle_between_modules_of_navi() -> None:
    graph: dict[str, set[str]] = {}
    for importer, target, _, type_only in EDGES:
        if not type_only and importer.startswith("navi") and target.startswith("navi"):
            graph.setdefault(importer, set()).add(target)
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def _part(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_import_circle_between_the_parts_of_navi() -> None:
    runtime = [
        (importer, target)
        for importer, target, _, type_only in EDGES
        if not type_only and importer.startswith("navi.") and target.startswith("navi.")
    ]
    imports_navi = {importer for importer, _ in runtime}
    graph: dict[str, set[str]] = {}
    for importer, target in runtime:
        if (
            _part(importer) != _part(target)
            and target in imports_navi  # a leaf closes no circle
            and (importer, target) not in ALLOWED_PART_CIRCLES
        ):
            graph.setdefault(_part(importer), set()).add(_part(target))
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_each_allowed_circle_still_exists() -> None:
    # Once an allowed import is gone, its entry must go too (it would hide a new one).
    runtime = {(importer, target) for importer, target, _, type_only in EDGES if not type_only}
    assert set(ALLOWED_PART_CIRCLES) <= runtime
