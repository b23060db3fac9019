"""A definition's outline: how many resources of each type, which types need which, how many outputs.

It is stored with the stack (``stacks.outline``) when its definition is written, so the web view's
graph of a big stack (one node per type) and `stack show`'s question "any outputs to resolve?" are
answered without parsing the template again: both stay the same size at a million resources.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from control.hot.definition import Definition
from control.hot.functions import calls
from control.hot.template import OutputDef


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


def resources_named(outputs: Iterable[OutputDef]) -> set[str] | None:
    """The resources the outputs' get_resource and get_attr name (what resolving them reads); None
    when one names a resource by a computed value (every resource may be read then)."""
    names: set[str] = set()
    for odef in outputs:
        for _, fn, args in calls(odef.value):
            target = args if fn == "get_resource" else None
            if fn == "get_attr" and isinstance(args, list) and args:
                target = args[0]
            if fn in ("get_resource", "get_attr") and not isinstance(target, str):
                return None
            if isinstance(target, str):
                names.add(target)
    return names
