"""The audit log: one row per mutating request of the operator's API, Heat's API and the web view."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import delete, select

from control.principal import Principal
from control.runtime import Runtime
from control.store.orm import AuditRow

#: Rows one listing returns at most.
MAX_LIMIT = 10_000
#: Characters of a target kept (path parameters are capped by the request line already).
TARGET_CAP = 1000
#: Rows one pruning transaction deletes at most, and the transactions one prune runs at most: a
#: backlog (a retention shortened, a long-stopped plane) drains over several periods, never in one long lock.
PRUNE_BATCH, PRUNE_ROUNDS = 1000, 10


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


async def prune(rt: Runtime, now: float | None = None) -> int:
    """Delete audit rows older than ``--audit-retention-days`` (oldest first, in PRUNE_BATCH-row
    transactions, at most PRUNE_ROUNDS of them); the number deleted. A retention of 0 keeps every row."""
    days = rt.settings.audit_retention_days
    if days <= 0:
        return 0
    cutoff = (time.time() if now is None else now) - days * 86400
    deleted = 0
    for _ in range(PRUNE_ROUNDS):
        async with rt.sessions() as session:
            ids = list(
                await session.scalars(
                    select(AuditRow.id).where(AuditRow.at < cutoff).order_by(AuditRow.id).limit(PRUNE_BATCH)
                )
            )
            if ids:
                await session.execute(delete(AuditRow).where(AuditRow.id.in_(ids)))
                await session.commit()
        deleted += len(ids)
        if len(ids) < PRUNE_BATCH:
            break
    return deleted
