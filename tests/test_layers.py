"""The package's structure, kept as ARCHITECTURE says: no import cycle, layers that hold.

The import contracts themselves (the engine never imports the facade; the command line uses
the public API and the read model) are import-linter's, in pyproject.toml, run by `make
check`; this test keeps the whole graph free of cycles, which no contract says by itself.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import grimp

import playline


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in edges[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def test_no_module_of_playline_takes_part_in_an_import_cycle() -> None:
    graph = grimp.build_graph("playline")  # type-checking imports included
    modules = graph.modules
    edges = {m: set(graph.find_modules_directly_imported_by(m)) & modules for m in modules}
    assert "playline._engine.attempt" in modules
    assert _cycles(edges) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# The engine's size rules (STYLE.md): a function a reader can hold at once, a class that
# does one thing. Each exception is named with its size; the list only shrinks.
_ENGINE = Path(playline.__file__).parent / "_engine"
_LONG_FUNCTIONS: dict[str, int] = {}
_BIG_CLASSES: dict[str, int] = {}


def _engine_trees() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(_ENGINE.glob("*.py")):
        yield path.name, ast.parse(path.read_text())


def test_no_engine_function_is_over_60_lines() -> None:
    long = {
        f"{name}:{node.name}": node.end_lineno - node.lineno + 1
        for name, tree in _engine_trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > 60
    }
    assert long == _LONG_FUNCTIONS


def _attributes(cls: ast.ClassDef) -> set[str]:
    """Fields declared in the class body and attributes set on ``self`` in its methods."""
    fields = {
        stmt.target.id
        for stmt in cls.body
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
    }
    assigned = {
        node.attr
        for node in ast.walk(cls)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }
    return fields | assigned


def test_no_engine_class_has_over_20_attributes() -> None:
    big = {
        f"{name}:{node.name}": len(_attributes(node))
        for name, tree in _engine_trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and len(_attributes(node)) > 20
    }
    assert big == _BIG_CLASSES
