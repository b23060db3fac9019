"""Listing stacks as Heat's API does: exact filters, tags, sorting, marker paging, a count.

Heat's defaults: newest first; a marker is the id of the last stack of the previous
page; the sort always ends on the id so pages never overlap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from control.errors import BadRequestError
from control.services.stacks import STATE_ONLY, stack_view
from control.store.orm import StackRow

#: Heat's sort keys (heat/db/api.py) and the columns they sort.
SORT_COLUMNS = {
    "stack_name": StackRow.name,
    "stack_status": StackRow.status,
    "creation_time": StackRow.created_at,
    "updated_time": StackRow.updated_at,
}
#: Heat's filters (rpc STACK_KEYS and the older names) and the column each compares.
FILTER_COLUMNS = {
    "id": StackRow.id,
    "name": StackRow.name,
    "stack_name": StackRow.name,
    "action": StackRow.action,
    "stack_action": StackRow.action,
    "status": StackRow.status,
    "stack_status": StackRow.status,
}
_STATUSES = ("COMPLETE", "FAILED", "IN_PROGRESS")


@dataclass(frozen=True)
class StackQuery:
    filters: Mapping[str, Sequence[str]] = field(default_factory=dict)
    tags: Mapping[str, Sequence[str]] = field(default_factory=dict)  # tags, tags_any, not_tags, not_tags_any
    sort_keys: Sequence[str] = ()
    sort_dir: str | None = None
    limit: int | None = None
    marker: str | None = None
    #: Heat's show_nested: nested stacks (template resources, groups) are listed too.
    nested: bool = False
    #: Only this project's stacks (None: every project's).
    project: str | None = None


def _status_filter(values: Sequence[str]) -> tuple[list[str], list[str]]:
    """ACTION_STATUS or STATUS values as (actions, statuses), as Heat's translate_filters splits them."""
    actions, statuses = [], []
    for value in values:
        status = next((s for s in _STATUSES if value.endswith(s)), None)
        if status is None:
            raise BadRequestError(f"status: {value!r} does not end in {', '.join(_STATUSES)}", where="status")
        statuses.append(status)
        if len(value) > len(status) + 1:
            actions.append(value[: -len(status) - 1])
    return actions, statuses


def _tags_match(tags: set[str], wanted: Mapping[str, Sequence[str]]) -> bool:
    every, some = set(wanted.get("tags") or ()), set(wanted.get("tags_any") or ())
    not_every, not_any = set(wanted.get("not_tags") or ()), set(wanted.get("not_tags_any") or ())
    if every and not every <= tags:
        return False
    if some and not some & tags:
        return False
    if not_every and not_every <= tags:
        return False
    return not (not_any and not_any & tags)


async def list_stacks(session: AsyncSession, query: StackQuery) -> list[dict[str, Any]]:
    """Stack views (services.stacks.stack_view) matching *query*, in its order, one page of it."""
    stmt = select(StackRow).options(*STATE_ONLY)
    if not query.nested:
        stmt = stmt.where(StackRow.parent_id.is_(None))
    if query.project is not None:
        stmt = stmt.where(StackRow.project == query.project)
    for key, values in query.filters.items():
        if not values:
            continue
        if key in ("status", "stack_status"):
            actions, statuses = _status_filter(values)
            stmt = stmt.where(StackRow.status.in_(statuses))
            if actions:
                stmt = stmt.where(StackRow.action.in_(actions))
        else:
            stmt = stmt.where(FILTER_COLUMNS[key].in_(list(values)))
    columns = [SORT_COLUMNS[k] for k in query.sort_keys if k in SORT_COLUMNS] or [StackRow.created_at]
    descending = query.sort_dir == "desc" or (query.sort_dir is None and not query.sort_keys)
    order = [c.desc() if descending else c.asc() for c in [*columns, StackRow.id]]
    rows = [
        s for s in await session.scalars(stmt.order_by(*order)) if _tags_match(set(s.tags or []), query.tags)
    ]
    if query.marker is not None:
        ids = [s.id for s in rows]
        if query.marker not in ids:
            raise BadRequestError(f"marker: no stack {query.marker!r} in this listing", where="marker")
        rows = rows[ids.index(query.marker) + 1 :]
    if query.limit is not None:
        rows = rows[: query.limit]
    return [stack_view(s) for s in rows]


async def count_stacks(session: AsyncSession, query: StackQuery) -> int:
    """How many stacks match *query*'s filters and tags (paging aside)."""
    unpaged = StackQuery(filters=query.filters, tags=query.tags, nested=query.nested, project=query.project)
    return len(await list_stacks(session, unpaged))
