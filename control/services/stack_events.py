"""A stack's events as Heat's API asks for them: filters, sorting, marker paging; a deleted stack's too.

Heat's defaults: newest first unless ``sort_dir`` or ``sort_keys`` say otherwise; a
marker is the id of the last event of the previous page. The stack's own events carry
the stack's name as their resource name and its id as their physical resource id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, and_, false, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from control.errors import BadRequestError, NotFoundError
from control.services.queries import nested_stacks
from control.services.stacks import STATE_ONLY
from control.store.orm import EventRow, ResourceRow, StackRow
from control.txn import lock_event_streams

STACK_TYPE = "OS::Heat::Stack"
#: Sort keys Heat's events take (heat/db/api.py: event_time and resource_type).
SORT_KEYS = ("event_time", "created_at", "resource_type")
_STATUSES = ("COMPLETE", "FAILED", "IN_PROGRESS")


@dataclass
class EventStack:
    """The stack events belong to: its id and name, and what each resource name is (type, physical id)."""

    id: str
    name: str
    types: dict[str, str] = field(default_factory=dict)
    physical: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EventQuery:
    """Heat's event list parameters, checked."""

    filters: Mapping[str, Sequence[str]] = field(default_factory=dict)
    sort_keys: Sequence[str] = ()
    sort_dir: str | None = None
    limit: int | None = None
    marker: str | None = None

    @property
    def descending(self) -> bool:
        return self.sort_dir == "desc" or (self.sort_dir is None and not self.sort_keys)


async def event_stack(session: AsyncSession, name: str, stack_id: str) -> EventStack:
    """The stack of a Heat events path; a deleted one is found through its events (as Heat's soft delete)."""
    stack = await session.get(StackRow, stack_id, options=STATE_ONLY)
    if stack is not None and name in (stack.name, stack.id):
        found = EventStack(stack.id, stack.name)
    else:
        row = (
            await session.execute(
                select(EventRow.stack_name)
                .where(EventRow.stack_id == stack_id, EventRow.stack_name != "")
                .limit(1)
            )
        ).first()
        if row is None or name not in (row[0], stack_id):
            raise NotFoundError(f"The Stack ({name}/{stack_id}) could not be found.", where="stack")
        found = EventStack(stack_id, row[0])
    return (await _with_resources(session, [found]))[0]


async def event_stacks(session: AsyncSession, root: EventStack, depth: int) -> list[EventStack]:
    """*root* and its nested stacks down to *depth* levels (deleted ones too, found by their events)."""
    nested = await nested_stacks(session, root.id, depth)
    return [root, *(await _with_resources(session, [EventStack(i, n) for i, n in nested.items()]))]


async def _with_resources(session: AsyncSession, stacks: list[EventStack]) -> list[EventStack]:
    """*stacks* with what each resource name is: its type and (current) physical id."""
    by_id = {s.id: s for s in stacks}
    rows = await session.execute(
        select(
            ResourceRow.stack_id,
            ResourceRow.name,
            ResourceRow.type,
            ResourceRow.physical_id,
            ResourceRow.current,
        ).where(ResourceRow.stack_id.in_(list(by_id)))
    )
    for stack_id, res_name, res_type, physical, current in rows:
        found = by_id[stack_id]
        found.types.setdefault(res_name, res_type)
        if current or res_name not in found.physical:
            found.physical[res_name] = physical or ""
    return stacks


def _statuses(values: Sequence[str]) -> tuple[set[str], set[str]]:
    """Heat's status filter takes STATUS or ACTION_STATUS: (actions, statuses) named by *values*."""
    actions, statuses = set(), set()
    for value in values:
        for status in _STATUSES:
            if value.endswith(status):
                statuses.add(status)
                if len(value) > len(status) + 1:
                    actions.add(value[: -len(status) - 1])
                break
        else:
            raise BadRequestError(
                f"resource_status: {value!r} is not one of {', '.join(_STATUSES)} (optionally ACTION_ first)",
                where="resource_status",
            )
    return actions, statuses


def _filtered(stack: EventStack, query: EventQuery) -> ColumnElement[bool]:
    """The condition an event of *stack* meets to match *query*'s filters."""
    where = [EventRow.stack_id == stack.id]
    for key, values in query.filters.items():
        if not values:
            continue
        if key == "resource_status":
            actions, statuses = _statuses(values)
            where.append(EventRow.status.in_(statuses))
            if actions:
                where.append(EventRow.action.in_(actions))
        elif key == "resource_action":
            where.append(EventRow.action.in_(list(values)))
        elif key == "resource_name":
            names = ["" if v == stack.name else v for v in values]
            where.append(EventRow.resource_name.in_(names))
        elif key == "resource_type":
            names = [n for n, t in stack.types.items() if t in values]
            where.append(EventRow.resource_name.in_(names + ([""] if STACK_TYPE in values else [])))
    return and_(*where)


async def list_events(
    session: AsyncSession, stacks: list[EventStack], query: EventQuery
) -> list[dict[str, Any]]:
    """The events of *stacks* (a stack and its nested ones, as Heat's nested_depth) matching *query*,
    in its order, after its marker, at most its limit; each names its stack."""
    for key in query.sort_keys:
        if key not in SORT_KEYS:
            raise BadRequestError(
                f"sort_keys: {key!r} is not one of {', '.join(SORT_KEYS)}", where="sort_keys"
            )
    by_id = {s.id: s for s in stacks}
    await lock_event_streams(session, list(by_id), shared=False)  # every smaller id committed first
    stmt = select(EventRow).where(or_(false(), *(_filtered(s, query) for s in stacks)))
    by_type = "resource_type" in query.sort_keys
    marker = _marker(query.marker)
    if not by_type and marker is not None:
        stmt = stmt.where(EventRow.id < marker if query.descending else EventRow.id > marker)
    stmt = stmt.order_by(EventRow.id.desc() if query.descending else EventRow.id)
    if not by_type and query.limit is not None:
        stmt = stmt.limit(query.limit)
    events = [_event(by_id[e.stack_id], e) for e in await session.scalars(stmt)]
    if not by_type:
        return events
    events.sort(
        key=lambda e: e["resource_type"], reverse=query.descending
    )  # stable: time order within a type
    if marker is not None:
        ids = [e["id"] for e in events]
        events = events[ids.index(marker) + 1 :] if marker in ids else events
    return events if query.limit is None else events[: query.limit]


def _marker(raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError as e:
        raise BadRequestError(f"marker: {raw!r} is not an event id", where="marker") from e


def _event(stack: EventStack, e: EventRow) -> dict[str, Any]:
    own = not e.resource_name
    return {
        "id": e.id,
        "timestamp": e.timestamp,
        "resource_name": stack.name if own else e.resource_name,
        "resource_type": STACK_TYPE if own else stack.types.get(e.resource_name, ""),
        "physical_resource_id": stack.id
        if own
        else (e.deployment_id or stack.physical.get(e.resource_name, "")),
        "action": e.action,
        "status": e.status,
        "reason": e.reason,
        "stack": {"name": stack.name, "id": stack.id},
    }
