"""No import cycles in the shipped packages, `TYPE_CHECKING` imports included.

The layers themselves are import-linter's contract in pyproject.toml (`make lint`); this
checks what a layers contract cannot see: two modules of one package that import each other.
"""

from __future__ import annotations

import grimp


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The finder itself reports a two-module and a three-module cycle, and no acyclic chain."""
    edges = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert [["a", "b"], ["c", "d", "e"]] == sorted(_cycles(edges))


def test_no_module_of_control_agent_or_hooks_imports_itself_back() -> None:
    """grimp's import graph of the three packages has no cycle of any length."""
    graph = grimp.build_graph("control", "agent", "hooks")
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert [] == _cycles(edges)
