"""A definition's outline: how many resources of each type, which types need which, how many outputs.

It is stored with the stack (``stacks.outline``) when its definition is written, so the web view's
graph of a big stack (one node per type) and `stack show`'s question "any outputs to resolve?" are
answered without parsing the template again: both stay the same size at a million resources.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from control.hot.definition import Definition


def outline(defn: Definition) -> dict[str, Any]:
    """``{types: {type: count}, edges: [[needed type, needing type], ...], outputs: count,
    description}`` of the active resources; an edge joins two different types only."""
    resources = defn.template.resources
    type_of = {name: r.type for name, r in resources.items() if defn.active(name)}
    links: set[tuple[str, str]] = set()
    for name, kind in type_of.items():
        for needed in defn.template.dependencies(name):
            other = type_of.get(needed)  # None: inactive
            if other is not None and other != kind:
                links.add((other, kind))
    return {
        "types": dict(sorted(Counter(type_of.values()).items())),
        "edges": [list(link) for link in sorted(links)],
        "outputs": len(defn.template.outputs),
        "description": defn.template.description,
    }
