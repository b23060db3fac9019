"""A stack's resources marked not current (retired), set-based: their rows are not loaded.

An update retires what its new definition drops, a delete all of them; the engine's
cleanup then deletes the retired rows, dependents first.
"""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from control.store.orm import ResourceRow
from control.txn import Txn

#: Resource rows an update marks removed per statement (bounds the IN list).
RETIRE_CHUNK = 1000
_RETIRING = "retiring"


async def retire(session: AsyncSession, stack_id: str, keep: set[str] | None) -> None:
    """Mark the stack's resources not in *keep* (None: all of them) as not current.

    Set-based: loading every resource row would decrypt every resource's properties
    and attributes (hundreds of MB at 50,000 deployments) to change one column. The
    rows' ``row_version`` is bumped as an ORM write would, so an engine step that
    holds one of them and writes it afterwards fails (StaleDataError) and runs again.
    """
    if keep is None:
        await session.execute(
            _RETIRING_ROWS.where(ResourceRow.stack_id == stack_id, ResourceRow.current.is_(True))
        )
        return
    names = await session.execute(
        select(ResourceRow.id, ResourceRow.name).where(
            ResourceRow.stack_id == stack_id, ResourceRow.current.is_(True)
        )
    )
    removed = [row_id for row_id, name in names if name not in keep]
    for start in range(0, len(removed), RETIRE_CHUNK):
        await session.execute(_RETIRING_ROWS.where(ResourceRow.id.in_(removed[start : start + RETIRE_CHUNK])))


def retire_later(txn: Txn, stack_id: str, keep: set[str] | None) -> None:
    """Mark the stack's resources not in *keep* (None: all of them) not current at the commit, with
    those of every other nested stack this transaction updates or deletes: a statement or two for
    all the members of a group, not a query each (which also flushed each member's row alone)."""
    if _RETIRING not in txn.ahead:
        txn.ahead[_RETIRING] = {}

        async def retire_all() -> None:
            found: dict[str, set[str] | None] = txn.ahead.pop(_RETIRING, {})
            every = sorted(i for i, kept in found.items() if kept is None)
            some = sorted(i for i, kept in found.items() if kept is not None)
            for start in range(0, len(every), RETIRE_CHUNK):
                where = ResourceRow.stack_id.in_(every[start : start + RETIRE_CHUNK])
                await txn.session.execute(_RETIRING_ROWS.where(where, ResourceRow.current.is_(True)))
            removed: list[int] = []
            for start in range(0, len(some), RETIRE_CHUNK):
                rows = await txn.session.execute(
                    select(ResourceRow.id, ResourceRow.stack_id, ResourceRow.name).where(
                        ResourceRow.stack_id.in_(some[start : start + RETIRE_CHUNK]),
                        ResourceRow.current.is_(True),
                    )
                )
                removed += [row_id for row_id, sid, name in rows if name not in (found[sid] or ())]
            for start in range(0, len(removed), RETIRE_CHUNK):
                chunk = removed[start : start + RETIRE_CHUNK]
                await txn.session.execute(_RETIRING_ROWS.where(ResourceRow.id.in_(chunk)))

        txn.before.append(retire_all)
    txn.ahead[_RETIRING][stack_id] = keep


#: Resource rows made not current, their row_version bumped as an ORM write would (``retire``).
_RETIRING_ROWS = (
    update(ResourceRow)
    .values(current=False, row_version=ResourceRow.row_version + 1)
    .execution_options(synchronize_session=False)
)
