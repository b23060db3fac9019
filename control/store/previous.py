"""A stack's previous definition (what a rollback returns to), kept in SQL, apart from its row's reads.

An update keeps the definition it replaces: the stack's template, files, environment and given
parameters, copied column to column by one ``UPDATE`` (the ciphertext as stored: the data key's
associated data is the same for every column), so the request neither decrypts nor decodes the
old template (at 100,000 deployments 24 MB of JSON and about 140 MB of Python objects) nor
encrypts it again. The columns are deferred: only a rollback reads them. A stack whose update
was accepted before revision 0014 holds its previous definition in ``stacks.previous`` (one
encrypted object), read here the same way until its update settles.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.exc import StaleDataError

from control.store.orm import StackRow

#: The previous definition's columns and the stack row's columns they are copied from.
COLUMNS = {
    "previous_template": "template",
    "previous_files": "files",
    "previous_environment": "environment",
    "previous_params": "params_given",
}
_TABLE: Table = StackRow.metadata.tables[StackRow.__tablename__]


async def keep_current(session: AsyncSession, stack: StackRow) -> None:
    """Copy *stack*'s stored definition to its previous one, in the database (nothing is decoded).

    Run before the request sets the new definition on *stack* (the session has nothing of it to
    flush yet); the row must still be the version read, else StaleDataError (the caller retries).
    """
    columns = _TABLE.c
    copied = {target: columns[source] for target, source in COLUMNS.items()}
    statement = (
        update(_TABLE)
        .where(columns.id == stack.id, columns.row_version == stack.row_version)
        .values(**copied, previous=None)
    )
    result = await session.execute(statement)
    if getattr(result, "rowcount", 1) != 1:
        raise StaleDataError(f"stack {stack.id} changed since it was read")


async def before_update(session: AsyncSession, stack: StackRow) -> None:
    """Keep the definition an update of *stack* replaces, for a rollback.

    An update accepted while another runs supersedes it: the new traversal starts now; what runs
    on servers finishes, and a rollback still returns to the last settled state (kept as it is).
    A create still running has no settled state: a rollback of this update removes everything.
    """
    if stack.status == "IN_PROGRESS" and await held(session, stack.id):
        return
    if stack.action == "CREATE" and stack.status == "IN_PROGRESS":
        clear(stack)
    else:
        await keep_current(session, stack)


def clear(stack: StackRow) -> None:
    """No previous definition: a later rollback returns here (or, after a create, to nothing)."""
    for name in (*COLUMNS, "previous"):
        setattr(stack, name, None)


async def held(session: AsyncSession, stack_id: str) -> bool:
    """True when the stack keeps a previous definition (asked in SQL: nothing is decrypted)."""
    query = select(or_(StackRow.previous_template.is_not(None), StackRow.previous.is_not(None)))
    return bool(await session.scalar(query.where(StackRow.id == stack_id)))


async def read(session: AsyncSession, stack_id: str) -> dict[str, Any] | None:
    """The previous definition as ``{template, files, environment, params_given}``, or None."""
    names = [*COLUMNS, "previous"]
    query = select(*(getattr(StackRow, name) for name in names)).where(StackRow.id == stack_id)
    row = (await session.execute(query)).first()
    if row is None:
        return None
    found = dict(zip(names, row, strict=True))
    if found["previous_template"] is None:
        return dict(found["previous"]) if found["previous"] is not None else None
    return {source: found[target] for target, source in COLUMNS.items()}
