"""The package's structure, kept as ARCHITECTURE says: no import cycle, layers that hold.

The import contracts themselves (the engine never imports the facade; the command line uses
the public API and the read model) are import-linter's, in pyproject.toml, run by `make
check`; this test keeps the whole graph free of cycles, which no contract says by itself.
"""

from __future__ import annotations

import grimp


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
