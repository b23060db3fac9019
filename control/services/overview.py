"""What the web view draws: a stack's resources as a dependency graph, its counts, a page of its list.

Nested stacks and groups are one node carrying the counts of their own resources; a stack
with more than GRAPH_LIMIT resources is drawn as one node per resource type, so a stack of
10,000 stays readable. Only the light columns are read (no properties, no attributes).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import Row, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from control.errors import BadRequestError
from control.principal import Within
from control.services.stacks import STATE_ONLY, get_stack, stack_view
from control.store.orm import DeploymentRow, EventRow, ResourceRow, StackRow

#: Above this many resources the graph shows one node per resource type.
GRAPH_LIMIT = 300
#: The largest page of the resource list.
MAX_PAGE = 500
#: The order a group's state is chosen in: the first of these any member has.
WORST_FIRST = ("FAILED", "IN_PROGRESS", "INIT", "COMPLETE")
LIGHT = (
    ResourceRow.id,
    ResourceRow.stack_id,
    ResourceRow.name,
    ResourceRow.type,
    ResourceRow.action,
    ResourceRow.status,
    ResourceRow.status_reason,
    ResourceRow.physical_id,
    ResourceRow.current,
    ResourceRow.requires,
)


def state_of(action: str, status: str) -> str:
    """The colour class of a resource: INIT before its first action, else its status."""
    return "INIT" if action == "INIT" else status


def worst(counts: Counter[str] | dict[str, int]) -> str:
    return next((s for s in WORST_FIRST if counts.get(s)), "COMPLETE")


async def state_counts(session: AsyncSession, stack_ids: list[str]) -> dict[str, Counter[str]]:
    """Stack id -> how many of its current resources are in each state, in one query."""
    found: dict[str, Counter[str]] = {i: Counter() for i in stack_ids}
    if not stack_ids:
        return found
    rows = await session.execute(
        select(ResourceRow.stack_id, ResourceRow.action, ResourceRow.status, func.count())
        .where(ResourceRow.stack_id.in_(stack_ids), ResourceRow.current.is_(True))
        .group_by(ResourceRow.stack_id, ResourceRow.action, ResourceRow.status)
    )
    for stack_id, action, status, n in rows:
        found[stack_id][state_of(action, status)] += n
    return found


async def stacks_overview(session: AsyncSession, project: str | None = None) -> list[dict[str, Any]]:
    """Every top-level stack (of *project*; None: every project) with its resource counts by state."""
    query = (
        select(StackRow)
        .options(*STATE_ONLY)
        .where(StackRow.parent_id.is_(None))
        .order_by(StackRow.created_at)
    )
    if project is not None:
        query = query.where(StackRow.project == project)
    stacks = list(await session.scalars(query))
    counts = await state_counts(session, [s.id for s in stacks])
    return [{**stack_view(s), "counts": dict(counts[s.id])} for s in stacks]


async def stack_graph(session: AsyncSession, ref: str, *, within: Within) -> dict[str, Any]:
    """The stack, its counts, and its graph: nodes (one per resource, or per type above GRAPH_LIMIT) and edges.

    The counts come from the state index alone and a big stack's edges from its outline: only a
    stack of GRAPH_LIMIT rows or fewer has its rows read (or a big one written before outlines).
    """
    stack = await get_stack(session, ref, *STATE_ONLY, within=within)
    tally = await type_counts(session, stack.id)
    own: Counter[str] = Counter()
    for counts in tally.values():
        own.update(counts)
    aggregated = await _more_rows_than(session, stack.id, GRAPH_LIMIT)
    if aggregated:
        # A stack written before outlines were: its rows say which types need which.
        links = (
            {(a, b) for a, b in stack.outline["edges"]}
            if stack.outline
            else await _row_links(session, stack.id)
        )
        nodes, edges = _by_type(tally, stack.outline, links)
    else:
        rows = list(
            await session.execute(
                select(*LIGHT).where(ResourceRow.stack_id == stack.id).order_by(ResourceRow.id)
            )
        )
        children = await _children(session, stack.id)
        nodes, edges = _by_resource(rows, children, await state_counts(session, list(children)))
    view = stack_view(stack)
    view.update(counts=dict(own), total=sum(own.values()), aggregated=aggregated)
    view.update(nodes=nodes, edges=edges, parent=await _parent_name(session, stack.parent_id))
    return view


async def _more_rows_than(session: AsyncSession, stack_id: str, limit: int) -> bool:
    """True when the stack has more than *limit* rows (old ones too): reads at most limit + 1 index entries."""
    some = select(ResourceRow.id).where(ResourceRow.stack_id == stack_id).limit(limit + 1).subquery()
    return (await session.scalar(select(func.count()).select_from(some)) or 0) > limit


async def type_counts(session: AsyncSession, stack_id: str) -> dict[str, Counter[str]]:
    """Type -> how many of the stack's current resources are in each state (the state index alone)."""
    found: dict[str, Counter[str]] = {}
    rows = await session.execute(
        select(ResourceRow.type, ResourceRow.action, ResourceRow.status, func.count())
        .where(ResourceRow.stack_id == stack_id, ResourceRow.current.is_(True))
        .group_by(ResourceRow.type, ResourceRow.action, ResourceRow.status)
    )
    for kind, action, status, n in rows:
        found.setdefault(kind, Counter())[state_of(action, status)] += n
    return found


async def _children(session: AsyncSession, stack_id: str, among: set[str] | None = None) -> dict[str, str]:
    """Id -> name of the stacks nested directly in *stack_id* (made by its groups and template resources);
    with *among*, of those ids only (a page's)."""
    query = select(StackRow.id, StackRow.name).where(StackRow.parent_id == stack_id)
    if among is not None:
        query = query.where(StackRow.id.in_(among))
    return {child_id: name for child_id, name in await session.execute(query)}


async def _parent_name(session: AsyncSession, parent_id: str | None) -> str | None:
    return await session.scalar(select(StackRow.name).where(StackRow.id == parent_id)) if parent_id else None


Graph = tuple[list[dict[str, Any]], list[dict[str, str]]]


def _by_resource(rows: list[Row[Any]], children: dict[str, str], counts: dict[str, Counter[str]]) -> Graph:
    """One node per resource row (a replaced one too, marked old); a nested stack's node has its counts."""
    current = {r.name: f"r{r.id}" for r in rows if r.current}
    nodes, edges = [], []
    for r in rows:
        node: dict[str, Any] = {
            "id": f"r{r.id}",
            "label": r.name,
            "type": r.type,
            "state": state_of(r.action, r.status),
            "status": f"{r.action}_{r.status}",
            "reason": r.status_reason,
            "old": not r.current,
        }
        if r.physical_id in children:
            child = counts[r.physical_id]
            node.update(nested=children[r.physical_id], counts=dict(child), size=sum(child.values()))
        elif r.type.endswith("Deployment"):  # Software-, Structured- and the AWS-named ones
            node["deployment"] = r.physical_id
        nodes.append(node)
        edges += [
            {"source": current[d], "target": node["id"]}
            for d in sorted(set(r.requires or []))
            if d in current
        ]
    return nodes, edges


def _by_type(
    tally: dict[str, Counter[str]], outline: dict[str, Any] | None, links: set[tuple[str, str]]
) -> Graph:
    """One node per resource type with its counts (a type's resources not made yet are INIT, from the
    outline's count); an edge per link (needed type, needing type): where any resource of one needs one
    of the other."""
    types = {t: Counter(c) for t, c in tally.items()}
    for kind, planned in ((outline or {}).get("types") or {}).items():
        counts = types.setdefault(kind, Counter())
        counts["INIT"] += max(0, int(planned) - sum(counts.values()))
    ids = {t: f"t{i}" for i, t in enumerate(sorted(types))}
    nodes = [
        {
            "id": ids[t],
            "label": f"{t} \u00d7{sum(c.values())}",
            "type": t,
            "state": worst(c),
            "status": "",
            "reason": "",
            "old": False,
            "counts": dict(+c),
            "size": sum(c.values()),
        }
        for t, c in sorted(types.items())
    ]
    return nodes, [{"source": ids[a], "target": ids[b]} for a, b in sorted(links) if a in ids and b in ids]


async def _row_links(session: AsyncSession, stack_id: str) -> set[tuple[str, str]]:
    """(needed type, needing type) from every current row's requires: a stack with no outline."""
    rows = list(
        await session.execute(
            select(ResourceRow.name, ResourceRow.type, ResourceRow.requires).where(
                ResourceRow.stack_id == stack_id, ResourceRow.current.is_(True)
            )
        )
    )
    type_of = {r.name: r.type for r in rows}
    return {
        (type_of[d], r.type) for r in rows for d in (r.requires or []) if type_of.get(d, r.type) != r.type
    }


async def resource_page(
    session: AsyncSession,
    ref: str,
    page: int,
    per_page: int,
    state: str | None = None,
    kind: str | None = None,
    cursor: tuple[str, int] | None = None,
    *,
    within: Within,
) -> dict[str, Any]:
    """One page of the stack's resources (id order), with the total; *state* keeps one state only,
    *kind* one resource type only (a node of the graph drawn by type). *cursor* ``("after", id)``
    or ``("before", id)`` reads the page next to the one ending or starting at that id (*page*
    is then only echoed): one index range at any depth, where an offset costs the rows it skips."""
    if not 1 <= per_page <= MAX_PAGE:
        raise BadRequestError(f"per_page: expected 1 to {MAX_PAGE}", where="per_page")
    if state is not None and state not in WORST_FIRST:
        raise BadRequestError(f"state: one of {', '.join(WORST_FIRST)}", where="state")
    stack = await get_stack(session, ref, *STATE_ONLY, within=within)
    where = [ResourceRow.stack_id == stack.id]
    if kind is not None:
        where.append(ResourceRow.type == kind)
    if state == "INIT":
        where.append(ResourceRow.action == "INIT")
    elif state is not None:
        where += [ResourceRow.action != "INIT", ResourceRow.status == state]
    total = await session.scalar(select(func.count()).select_from(ResourceRow).where(*where)) or 0
    rows = await _page_rows(session, where, (page - 1) * per_page, per_page, cursor, total)
    children = await _children(session, stack.id, {r.physical_id for r in rows if r.physical_id})
    items = [
        {
            "id": r.id,
            "name": r.name,
            "type": r.type,
            "state": state_of(r.action, r.status),
            "status": f"{r.action}_{r.status}",
            "reason": r.status_reason,
            "physical_id": r.physical_id,
            "current": r.current,
            "nested": children.get(r.physical_id or ""),
        }
        for r in rows
    ]
    return {"total": total, "page": page, "per_page": per_page, "items": items}


async def _page_rows(
    session: AsyncSession, where: list[Any], skip: int, size: int, cursor: tuple[str, int] | None, total: int
) -> list[Row[Any]]:
    """*size* rows in id order: next to a *cursor* id, else after skipping *skip* of the *total*
    (from whichever end is nearer: the last page of a million skips a page, not a million)."""
    query = select(*LIGHT).where(*where)
    if cursor is not None and cursor[0] == "before":
        back = query.where(ResourceRow.id < cursor[1]).order_by(ResourceRow.id.desc()).limit(size)
        return list(await session.execute(back))[::-1]
    if cursor is not None:
        return list(
            await session.execute(
                query.where(ResourceRow.id > cursor[1]).order_by(ResourceRow.id).limit(size)
            )
        )
    # The page's ids from the state index alone (the offset skips index entries, not rows).
    ids = select(ResourceRow.id).where(*where)
    after = total - skip - size  # the rows after the page
    if after < skip:  # nearer the end: skip those, counting down
        last = max(0, min(size, total - skip))
        ids = ids.order_by(ResourceRow.id.desc()).offset(max(0, after)).limit(last)
    else:
        ids = ids.order_by(ResourceRow.id).offset(skip).limit(size)
    chosen = query.where(ResourceRow.id.in_(ids.scalar_subquery())).order_by(ResourceRow.id)
    return list(await session.execute(chosen))


async def deployment_history(session: AsyncSession, dep_id: str) -> list[dict[str, Any]]:
    """Every event of a deployment, oldest first: its status history, generation by generation."""
    rows = await session.scalars(
        select(EventRow).where(EventRow.deployment_id == dep_id).order_by(EventRow.id).limit(1000)
    )
    return [
        {
            "id": e.id,
            "timestamp": e.timestamp,
            "generation": e.generation,
            "action": e.action,
            "status": e.status,
            "reason": e.reason,
        }
        for e in rows
    ]


async def deployment_counts(session: AsyncSession) -> dict[str, dict[str, int]]:
    """Server id -> how many of its deployments are in each status, in one query."""
    rows = await session.execute(
        select(DeploymentRow.server_id, DeploymentRow.status, func.count()).group_by(
            DeploymentRow.server_id, DeploymentRow.status
        )
    )
    found: dict[str, dict[str, int]] = {}
    for server_id, status, n in rows:
        found.setdefault(server_id, {})[status] = n
    return found
