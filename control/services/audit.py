"""The audit log: one row per mutating request of the operator's API, Heat's API and the web view."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import select

from control.principal import Principal
from control.runtime import Runtime
from control.store.orm import AuditRow

#: Rows one listing returns at most.
MAX_LIMIT = 10_000
#: Characters of a target kept (path parameters are capped by the request line already).
TARGET_CAP = 1000


async def record(
    rt: Runtime, principal: Principal, api: str, request: tuple[str, str, str], status: int
) -> None:
    """Write who (*principal*) asked *request* (method, route, target) of *api*, and the *status* it got."""
    method, route, target = request
    async with rt.sessions() as session:
        session.add(
            AuditRow(
                at=time.time(),
                who=principal.who[:255],
                token_id=principal.token_id,
                project=principal.project,
                api=api,
                method=method[:16],
                route=route[:255],
                target=target[:TARGET_CAP],
                status=status,
            )
        )
        await session.commit()


async def entries(rt: Runtime, since: float | None, limit: int) -> list[dict[str, Any]]:
    """The newest *limit* rows at or after *since* (epoch seconds), oldest first."""
    query = select(AuditRow).order_by(AuditRow.id.desc()).limit(min(limit, MAX_LIMIT))
    if since is not None:
        query = query.where(AuditRow.at >= since)
    async with rt.sessions() as session:
        rows = list(await session.scalars(query))
    return [view(r) for r in reversed(rows)]


def view(row: AuditRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "at": row.at,
        "who": row.who,
        "token_id": row.token_id,
        "project": row.project,
        "api": row.api,
        "method": row.method,
        "route": row.route,
        "target": row.target,
        "status": row.status,
    }
