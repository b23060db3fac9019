"""A PostgreSQL deadlock is a race the engine steps again, not a bug that fails the stack.

A 50,000-deployment nested delete on PostgreSQL ended DELETE_FAILED ("internal error: ...
deadlock detected"): two engine transactions took locks on work rows in opposite orders,
PostgreSQL rolled one back, and the engine's step treated the error as a bug. Here two real
asyncpg connections (through SQLAlchemy, as the engine's) deadlock on purpose, and
``raced`` (control/store/db.py, which the engine and the API use) must classify the error PostgreSQL raised as a race; an ordinary integrity
error must stay a failure.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from control.settings import async_url
from control.store.db import raced
from tests.support.pg import Postgres


async def _deadlock(engine: AsyncEngine) -> BaseException:
    """Two transactions each lock one row, then want the other's: PostgreSQL aborts one of them."""
    both_locked = asyncio.Barrier(2)

    async def crossing(first: int, second: int) -> None:
        async with engine.connect() as conn, conn.begin():
            await conn.execute(text("UPDATE t SET v = v + 1 WHERE id = :i"), {"i": first})
            await asyncio.wait_for(both_locked.wait(), 10)
            await conn.execute(text("UPDATE t SET v = v + 1 WHERE id = :i"), {"i": second})

    outcomes = await asyncio.wait_for(
        asyncio.gather(crossing(1, 2), crossing(2, 1), return_exceptions=True), 30
    )
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert 1 == len(errors), outcomes  # one is rolled back, the other commits
    return errors[0]


def test_a_deadlock_is_a_race_and_an_integrity_error_is_not(postgres: Postgres) -> None:
    url = async_url(postgres.new_database())

    async def run() -> tuple[BaseException, BaseException]:
        engine = create_async_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.execute(text("CREATE TABLE t (id integer PRIMARY KEY, v integer)"))
                await conn.execute(text("INSERT INTO t VALUES (1, 0), (2, 0)"))
            deadlock = await _deadlock(engine)
            with pytest.raises(DBAPIError) as duplicate:
                async with engine.begin() as conn:
                    await conn.execute(text("INSERT INTO t VALUES (1, 0)"))
            return deadlock, duplicate.value
        finally:
            await engine.dispose()

    deadlock, duplicate = asyncio.run(run())
    assert isinstance(deadlock, DBAPIError) and "deadlock detected" in str(deadlock), deadlock
    assert raced(deadlock), deadlock
    assert not raced(duplicate), duplicate
