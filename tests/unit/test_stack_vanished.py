"""A stack deleted between two reads of one request is not found (404), never an unhandled error (500)."""

from __future__ import annotations

import pytest
from sqlalchemy import delete

from control.errors import NotFoundError
from control.principal import EVERYWHERE
from control.services import stacks
from control.store.orm import StackRow
from tests.support.database import Database, bare_stack


async def test_columns_of_a_stack_deleted_since_it_was_read_are_a_404(database: Database) -> None:
    """`stack show` reads the row, then its template: if the engine purged it in between (SQLite's reads in
    one request are not one snapshot), the second read says the stack is not found, naming it."""
    async with database.sessions() as session:
        session.add(bare_stack("s-1", name="gone", action="DELETE"))
        await session.commit()
    async with database.sessions() as reader:
        stack = await stacks.get_stack(reader, "gone", *stacks.STATE_ONLY, within=EVERYWHERE)
        async with database.sessions() as purger:
            await purger.execute(delete(StackRow).where(StackRow.id == "s-1"))
            await purger.commit()
        with pytest.raises(NotFoundError, match="'gone' not found"):
            await stacks.load_columns(reader, stack, ["template"])
