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
from typing import Any

from sqlalchemy import ColumnElement, and_, case, delete, or_, select, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import Select

from control.store.orm import StackRow
from control.store.workrow import WorkRow

#: Rows named per statement by the calls on many claims (bounds the IN list).
CHUNK = 500


@dataclass(frozen=True)
class Claim:
    stack_id: str
    token: str
    seq: int


async def request(session: AsyncSession, stack_ids: Iterable[str]) -> None:
    """Ask for a step of each stack at once, inside the caller's transaction (an upsert).

    One statement executed for many rows, not one statement of many rows: a multi-row
    VALUES is compiled again for each count of rows (a group's members kicked 200 at a
    time cost its nested bench 2-3 % of the CPU in compiling), this one once per process.
    """
    ids = sorted(set(stack_ids))
    if not ids:
        return
    now = time.time()
    insert = postgresql.insert if dialect(session) == "postgresql" else sqlite.insert
    stmt = insert(WorkRow)
    stmt = stmt.on_conflict_do_update(
        index_elements=[WorkRow.stack_id],
        set_={"seq": WorkRow.seq + 1, "not_before": now, "updated_at": now},
    )
    rows = [
        {"stack_id": s, "kind": "step", "seq": 1, "not_before": now, "created_at": now, "updated_at": now}
        for s in ids
    ]
    connection = await session.connection()
    await connection.execute(stmt, rows)


def dialect(session: AsyncSession) -> str:
    """The dialect name of the database *session* is bound to: "sqlite" or "postgresql"."""
    return session.get_bind().dialect.name


async def claim(
    session: AsyncSession, owner: str, lease: float, limit: int, busy: Iterable[str]
) -> list[Claim]:
    """Lease up to *limit* due rows not in *busy*; commits."""
    return await _lease(session, owner, lease, _due(limit, busy), uuid.uuid4().hex)


async def claim_siblings(
    session: AsyncSession,
    owner: str,
    lease: float,
    parent_id: str,
    limit: int,
    busy: Iterable[str],
    token: str,
) -> list[Claim]:
    """Lease up to *limit* more due rows of nested stacks of *parent_id* under *token*; commits.

    A group's members are stepped together (control/engine/batch.py): one transaction for
    many sibling stacks instead of one each.
    """
    due = _due(limit, busy).where(
        WorkRow.stack_id.in_(select(StackRow.id).where(StackRow.parent_id == parent_id))
    )
    return await _lease(session, owner, lease, due, token)


def _due(limit: int, busy: Iterable[str]) -> Select[Any]:
    now = time.time()
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
    return due.where(WorkRow.stack_id.not_in(skip)) if skip else due


async def _lease(
    session: AsyncSession, owner: str, lease: float, due: Select[Any], token: str
) -> list[Claim]:
    if dialect(session) == "postgresql":
        due = due.with_for_update(skip_locked=True, of=WorkRow)
    now = time.time()
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
    """Extend the leases still held; return the stack ids whose lease was lost. Commits.

    One statement per lease token (a claim and the siblings claimed with it), not one per row.
    On PostgreSQL a row another transaction has locked is skipped, not waited for: a step
    holds the rows it fenced or asked a step of until it commits, and a renewal waiting on
    one while holding others made a deadlock (in a 50,000 nested delete). A skipped row
    still under our token is not lost: its step's fence extends it, or the next round does.
    """
    by_token: dict[str, set[str]] = {}
    for c in claims:
        by_token.setdefault(c.token, set()).add(c.stack_id)
    until = time.time() + lease
    skip = dialect(session) == "postgresql"
    missed: dict[str, str] = {}
    for token, ids in by_token.items():
        held = await _held(session, token, ids, {"lease_expires": until}, skip_locked=skip)
        missed.update(dict.fromkeys(ids - held, token))
    lost = await _taken(session, missed)
    await session.commit()
    return lost


async def _taken(session: AsyncSession, missed: dict[str, str]) -> set[str]:
    """Those of *missed* (stack id: our token) whose row now holds another token.

    A row gone is no lease lost: its stack settled (released) or was purged meanwhile.
    """
    ordered = sorted(missed)
    taken: set[str] = set()
    for start in range(0, len(ordered), CHUNK):
        rows = await session.execute(
            select(WorkRow.stack_id, WorkRow.lease_token).where(
                WorkRow.stack_id.in_(ordered[start : start + CHUNK])
            )
        )
        taken.update(stack_id for stack_id, token in rows if token != missed[stack_id])
    return taken


async def _held(
    session: AsyncSession, token: str, ids: set[str], values: dict[str, object], *, skip_locked: bool = False
) -> set[str]:
    """UPDATE the rows of *ids* still leased under *token*; the ids it matched.

    With *skip_locked* (PostgreSQL) rows locked by another transaction are left out, unwaited.
    """
    held: set[str] = set()
    ordered = sorted(ids)
    for start in range(0, len(ordered), CHUNK):
        mine: ColumnElement[bool] = and_(
            WorkRow.stack_id.in_(ordered[start : start + CHUNK]), WorkRow.lease_token == token
        )
        if skip_locked:
            free = select(WorkRow.stack_id).where(mine).with_for_update(skip_locked=True)
            mine = WorkRow.stack_id.in_(free.scalar_subquery())
        result = await session.execute(
            update(WorkRow)
            .where(mine)
            .values(**values)
            .returning(WorkRow.stack_id)
            .execution_options(synchronize_session=False)
        )
        held.update(result.scalars())
    return held


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


async def fence_many(session: AsyncSession, claims: list[Claim], lease: float) -> None:
    """``fence`` for the claims of one batch: all still held, or LeaseLostError naming those that are not."""
    lost: set[str] = set()
    for token in {c.token for c in claims}:
        ids = {c.stack_id for c in claims if c.token == token}
        lost |= ids - await _held(session, token, ids, {"lease_expires": time.time() + lease})
    if lost:
        raise LeaseLostError(f"lease on stacks {' '.join(sorted(lost))} lost to another process")


@dataclass(frozen=True)
class Released:
    """What ``finish_many`` did: rows released, newer ``seq`` of those asked again, leases lost."""

    released: set[str]
    again: dict[str, int]
    lost: set[str]


async def finish_many(session: AsyncSession, ends: list[tuple[Claim, bool, float]]) -> Released:
    """``finish`` for many claims, each (claim, settled, next time), in one transaction. Commits."""
    matched: set[str] = set()
    for token in {c.token for c, _, _ in ends}:
        mine = [(c, d, n) for c, d, n in ends if c.token == token]
        for start in range(0, len(mine), CHUNK):
            matched |= await _release(session, token, mine[start : start + CHUNK])
    rest = [c for c, _, _ in ends if c.stack_id not in matched]
    again: dict[str, int] = {}
    lost: set[str] = set()
    if rest:
        found = await session.execute(
            select(WorkRow.stack_id, WorkRow.seq, WorkRow.lease_token).where(
                WorkRow.stack_id.in_([c.stack_id for c in rest])
            )
        )
        rows: dict[str, tuple[int, str | None]] = {r[0]: (int(r[1]), r[2]) for r in found}
        settled = {c.stack_id for c, d, _ in ends if d}
        for c in rest:
            seq, holder = rows.get(c.stack_id, (0, None))
            if holder == c.token:
                again[c.stack_id] = seq
            elif c.stack_id in settled and c.stack_id not in rows:
                matched.add(c.stack_id)  # purged with its stack: released
            else:
                lost.add(c.stack_id)
    await session.commit()
    return Released(matched, again, lost)


async def _release(session: AsyncSession, token: str, ends: list[tuple[Claim, bool, float]]) -> set[str]:
    """Delete the settled stacks' rows and release the others, where seq has not moved."""
    matched: set[str] = set()
    settled = [(c.stack_id, c.seq) for c, d, _ in ends if d]
    if settled:
        result = await session.execute(
            delete(WorkRow)
            .where(tuple_(WorkRow.stack_id, WorkRow.seq).in_(settled), WorkRow.lease_token == token)
            .returning(WorkRow.stack_id)
            .execution_options(synchronize_session=False)
        )
        matched.update(result.scalars())
    waiting = {c.stack_id: (c.seq, n) for c, d, n in ends if not d}
    if waiting:
        when = case({i: n for i, (_, n) in waiting.items()}, value=WorkRow.stack_id)
        result = await session.execute(
            update(WorkRow)
            .where(tuple_(WorkRow.stack_id, WorkRow.seq).in_([(i, s) for i, (s, _) in waiting.items()]))
            .where(WorkRow.lease_token == token)
            .values(lease_owner=None, lease_token=None, lease_expires=None, not_before=when)
            .returning(WorkRow.stack_id)
            .execution_options(synchronize_session=False)
        )
        matched.update(result.scalars())
    return matched


async def pending(session: AsyncSession) -> list[WorkRow]:
    """Every work row (for operators and tests)."""
    return list(await session.scalars(select(WorkRow).order_by(WorkRow.not_before)))
