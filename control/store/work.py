"""Durable leased work: the queue every control-plane process takes engine steps from.

SQL only, no engine logic: ``request`` (in the caller's transaction), ``claim``,
``renew``, ``fence`` (inside a step's transaction, just before commit) and
``finish``. On PostgreSQL ``claim`` uses ``FOR UPDATE SKIP LOCKED`` so several
processes claim disjoint rows without waiting on each other; on SQLite the
single writer makes the claiming UPDATE atomic by itself.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import delete, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from control.store.workrow import WorkRow


@dataclass(frozen=True)
class Claim:
    stack_id: str
    token: str
    seq: int


async def request(session: AsyncSession, stack_ids: Iterable[str]) -> None:
    """Ask for a step of each stack at once, inside the caller's transaction (an upsert)."""
    ids = sorted(set(stack_ids))
    if not ids:
        return
    now = time.time()
    insert = postgresql.insert if dialect(session) == "postgresql" else sqlite.insert
    stmt = insert(WorkRow).values(
        [
            {"stack_id": s, "kind": "step", "seq": 1, "not_before": now, "created_at": now, "updated_at": now}
            for s in ids
        ]
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=[WorkRow.stack_id],
        set_={"seq": WorkRow.seq + 1, "not_before": now, "updated_at": now},
    )
    await session.execute(stmt)


def dialect(session: AsyncSession) -> str:
    """The dialect name of the database *session* is bound to: "sqlite" or "postgresql"."""
    return session.get_bind().dialect.name


async def claim(
    session: AsyncSession, owner: str, lease: float, limit: int, busy: Iterable[str]
) -> list[Claim]:
    """Lease up to *limit* due rows not in *busy*; commits."""
    now = time.time()
    token = uuid.uuid4().hex
    due = (
        select(WorkRow.stack_id)
        .where(
            WorkRow.not_before <= now,
            or_(WorkRow.lease_expires.is_(None), WorkRow.lease_expires < now),
        )
        .order_by(WorkRow.not_before)
        .limit(limit)
    )
    skip = sorted(set(busy))
    if skip:
        due = due.where(WorkRow.stack_id.not_in(skip))
    if dialect(session) == "postgresql":
        due = due.with_for_update(skip_locked=True)
    result = await session.execute(
        update(WorkRow)
        .where(WorkRow.stack_id.in_(due.scalar_subquery()))
        .values(
            lease_owner=owner,
            lease_token=token,
            lease_expires=now + lease,
            attempts=WorkRow.attempts + 1,
            updated_at=now,
        )
        .returning(WorkRow.stack_id, WorkRow.seq)
        .execution_options(synchronize_session=False)
    )
    claims = [Claim(stack_id, token, seq) for stack_id, seq in result.all()]
    await session.commit()
    return claims


async def renew(session: AsyncSession, claims: Iterable[Claim], lease: float) -> set[str]:
    """Extend the leases still held; return the stack ids whose lease was lost. Commits."""
    lost: set[str] = set()
    until = time.time() + lease
    for c in claims:
        result = await session.execute(
            update(WorkRow)
            .where(WorkRow.stack_id == c.stack_id, WorkRow.lease_token == c.token)
            .values(lease_expires=until)
            .execution_options(synchronize_session=False)
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            lost.add(c.stack_id)
    await session.commit()
    return lost


class LeaseLostError(RuntimeError):
    """Another process holds the stack's work now; this step must not commit."""


async def fence(session: AsyncSession, c: Claim, lease: float) -> None:
    """Inside a step's transaction: commit only while *c* still holds the row (the fencing token).

    On PostgreSQL the UPDATE also locks the row until the step commits, so no
    other process can claim it in between; on SQLite the write lock does the same.
    """
    result = await session.execute(
        update(WorkRow)
        .where(WorkRow.stack_id == c.stack_id, WorkRow.lease_token == c.token)
        .values(lease_expires=time.time() + lease)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        raise LeaseLostError(f"lease on stack {c.stack_id} lost to another process")


async def finish(session: AsyncSession, c: Claim, *, done: bool, next_at: float) -> int | None:
    """Release *c*: delete the row (stack settled) or set its next time. Commits.

    Returns None when released, or the row's newer ``seq`` when another step was
    asked for meanwhile (the caller keeps the lease and steps again). Raises
    LeaseLostError when the row is no longer ours.
    """
    mine = (WorkRow.stack_id == c.stack_id, WorkRow.lease_token == c.token, WorkRow.seq == c.seq)
    if done:
        result = await session.execute(
            delete(WorkRow).where(*mine).execution_options(synchronize_session=False)
        )
    else:
        result = await session.execute(
            update(WorkRow)
            .where(*mine)
            .values(lease_owner=None, lease_token=None, lease_expires=None, not_before=next_at)
            .execution_options(synchronize_session=False)
        )
    if result.rowcount == 1:  # type: ignore[attr-defined]
        await session.commit()
        return None
    row = (
        await session.execute(select(WorkRow.seq, WorkRow.lease_token).where(WorkRow.stack_id == c.stack_id))
    ).first()
    await session.commit()
    if row is None or row[1] != c.token:
        raise LeaseLostError(f"lease on stack {c.stack_id} lost to another process")
    return int(row[0])


async def pending(session: AsyncSession) -> list[WorkRow]:
    """Every work row (for operators and tests)."""
    return list(await session.scalars(select(WorkRow).order_by(WorkRow.not_before)))
