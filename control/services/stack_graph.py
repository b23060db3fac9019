"""A stack's dependency graph: its resources with their state, and why each needs another.

The web view and `anneal stack graph` read it. An edge's ``kinds`` say what made it:
``depends_on``, ``get_attr``, ``get_resource``, ``server`` (a deployment's server) and
``reference`` (any other reference the template parser found).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from control.engine import stackdef
from control.hot.functions import calls
from control.hot.template import ResourceDef
from control.principal import Within
from control.services.stacks import get_stack
from control.store.orm import ResourceRow

#: Properties that name a deployment's server (SoftwareDeployment: server; groups: servers).
SERVER_PROPERTIES = ("server", "servers")


async def stack_graph(
    session: AsyncSession, defs: stackdef.Definitions, ref: str, *, within: Within
) -> dict[str, Any]:
    """``{stack, status, nodes, edges}``: active resources in dependency order, old ones after."""
    stack = await get_stack(session, ref, within=within)
    defn = defs.get(stack)
    rows = list(await session.scalars(select(ResourceRow).where(ResourceRow.stack_id == stack.id)))
    current = {r.name: r for r in rows if r.current}
    names = defn.order()
    nodes = [_node(name, defn.template.resources[name].type, current.get(name), True) for name in names]
    nodes += [_node(r.name, r.type, r, False) for r in rows if not r.current]
    edges = [
        {"from": name, "to": target, "kinds": kinds}
        for name in names
        for target, kinds in _needs(defn.template.resources[name], set(defn.requires(name))).items()
    ]
    return {"stack": stack.name, "status": f"{stack.action}_{stack.status}", "nodes": nodes, "edges": edges}


def _node(name: str, type_: str, row: ResourceRow | None, current: bool) -> dict[str, Any]:
    return {
        "name": name,
        "type": type_,
        "status": f"{row.action}_{row.status}" if row is not None else "INIT_COMPLETE",
        "physical_id": row.physical_id if row is not None else None,
        "current": current,
    }


def _needs(rdef: ResourceDef, required: set[str]) -> dict[str, list[str]]:
    """Each resource *rdef* needs (of *required*) with the reasons, sorted."""
    found: dict[str, set[str]] = {}
    for name in rdef.depends_on:
        found.setdefault(name, set()).add("depends_on")
    for key, value in rdef.properties.items():
        for _, fn, args in calls(value):
            target: Any = args if fn == "get_resource" else None
            if fn == "get_attr" and isinstance(args, list) and args:
                target = args[0]
            if not isinstance(target, str):
                continue
            kind = "server" if key in SERVER_PROPERTIES else fn
            found.setdefault(target, set()).add(kind)
    for _, fn, args in calls(rdef.metadata):
        if fn == "get_attr" and isinstance(args, list) and args and isinstance(args[0], str):
            found.setdefault(args[0], set()).add("get_attr")
        elif fn == "get_resource" and isinstance(args, str):
            found.setdefault(args, set()).add("get_resource")
    for name in required - found.keys():  # what the parser found elsewhere
        found[name] = {"reference"}
    return {t: sorted(k) for t, k in sorted(found.items()) if t in required}


async def resource_counts(
    session: AsyncSession, stack_id: str, traversal: int, planned: int = 0
) -> dict[str, int]:
    """How far the running traversal is: current resources, done in it, failed in it, in progress.

    ``total`` is what the definition has (*planned*, when known) or else the rows there are:
    a create makes its rows as it goes.
    """
    # Grouped by the traversal column itself: grouped by `traversal = :t`, PostgreSQL saw the select's
    # and the GROUP BY's bound parameters as two expressions and refused the query.
    rows = await session.execute(
        select(ResourceRow.status, ResourceRow.traversal, func.count())
        .where(ResourceRow.stack_id == stack_id, ResourceRow.current.is_(True))
        .group_by(ResourceRow.status, ResourceRow.traversal)
    )
    counts = {"resources": 0, "done": 0, "failed": 0, "in_progress": 0}
    for status, row_traversal, count in rows:
        counts["resources"] += count
        if status == "IN_PROGRESS":
            counts["in_progress"] += count
        elif row_traversal == traversal:
            counts["done" if status == "COMPLETE" else "failed"] += count
    counts["total"] = max(planned, counts["resources"])
    return counts
