"""PostgreSQL deadlocks: the engine's lease renewal takes no part in one, and one elsewhere is a race.

A 50,000-deployment nested delete on PostgreSQL ended DELETE_FAILED ("internal error: ...
deadlock detected"): two engine transactions took locks on work rows in opposite orders,
PostgreSQL rolled one back, and the engine's step treated the error as a bug. Here two real
asyncpg connections (through SQLAlchemy, as the engine's) deadlock on purpose, and
``raced`` (control/store/db.py, which the engine and the API use) must classify the error PostgreSQL raised as a race; an ordinary integrity
error must stay a failure. The deadlock seen was between a step's transaction and the lease
renewal (``work.renew``): the renewal now skips a row another transaction holds.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from control import keys
from control.api.heat_v1.middleware import errors as heat_errors
from control.settings import async_url
from control.store import work
from control.store.db import open_database, raced
from control.store.workrow import WorkRow
from control.txn import retried_on_race
from tests.support.database import bare_stack
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
    """Both errors as PostgreSQL raised them; Heat's API answers the deadlock 503 retry-later, not 500."""
    url = async_url(postgres.new_database())

    async def run() -> tuple[BaseException, BaseException, list[tuple[int, str, str | None]]]:
        engine = create_async_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.execute(text("CREATE TABLE t (id integer PRIMARY KEY, v integer)"))
                await conn.execute(text("INSERT INTO t VALUES (1, 0), (2, 0)"))
            deadlock = await _deadlock(engine)
            with pytest.raises(DBAPIError) as duplicate:
                async with engine.begin() as conn:
                    await conn.execute(text("INSERT INTO t VALUES (1, 0)"))
            return deadlock, duplicate.value, await _heat_answers([deadlock, duplicate.value])
        finally:
            await engine.dispose()

    deadlock, duplicate, answers = asyncio.run(run())
    assert isinstance(deadlock, DBAPIError) and "deadlock detected" in str(deadlock), deadlock
    assert raced(deadlock), deadlock
    assert not raced(duplicate), duplicate
    assert (2, 1) == asyncio.run(_retried(deadlock)), "a deadlock's transaction runs again"
    with pytest.raises(DBAPIError):
        asyncio.run(_retried(duplicate))
    assert [(503, "HTTPServiceUnavailable", "5"), (409, "Conflict", None)] == answers


async def _retried(error: BaseException) -> tuple[int, int]:
    """What ``retried_on_race`` (the engine's work release, the API's writes) makes of *error* raised once."""
    calls = []

    @retried_on_race
    async def once() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise error
        return len(calls)

    return await once(), len(calls) - 1


async def _heat_answers(errors: list[BaseException]) -> list[tuple[int, str, str | None]]:
    """What Heat's API (its errors middleware, on a real server) answers a request that raised each error."""

    async def failing(request: web.Request) -> web.Response:
        raise errors[int(request.match_info["n"])]

    app = web.Application(middlewares=[heat_errors])
    app.router.add_get("/{n}", failing)
    answers = []
    async with TestServer(app, host="127.0.0.1") as server, ClientSession() as client:
        for n in range(len(errors)):
            async with client.get(server.make_url(f"/{n}")) as resp:
                body = await resp.json()
                answers.append((resp.status, body["error"]["type"], resp.headers.get("Retry-After")))
    return answers


def test_lease_renewal_skips_a_row_a_step_holds_so_the_two_cannot_deadlock(
    postgres: Postgres, tmp_path: Path
) -> None:
    """A step's transaction asks a step of B (locking B), renewal runs, then the step fences A.

    Renewal used to update A, then wait on B while holding A: the step's fence of A then
    waited on the renewal, and PostgreSQL aborted one of them. Now renewal extends A, skips
    B without waiting or calling it lost, and the next round extends B once it is free.
    """
    url = async_url(postgres.new_database())
    data_key = keys.load_or_create(tmp_path / "keys").data_key

    async def run() -> None:
        engine, sessions = await open_database(url, data_key)
        try:
            async with sessions() as s:
                s.add_all([bare_stack("a"), bare_stack("b")])
                await work.request(s, ["a", "b"])
                await s.commit()
            async with sessions() as s:
                claims = await work.claim(s, "p1", 30.0, 10, ())
            assert {"a", "b"} == {c.stack_id for c in claims}
            a = next(c for c in claims if c.stack_id == "a")

            async def expires() -> dict[str, float]:
                async with sessions() as s:
                    rows = await s.execute(select(WorkRow.stack_id, WorkRow.lease_expires))
                    return {i: e or 0.0 for i, e in rows}

            before = await expires()
            async with sessions() as step:
                await work.request(step, ["b"])  # the step's transaction now holds B
                async with sessions() as renewal:
                    lost = await asyncio.wait_for(work.renew(renewal, claims, 300.0), 10)
                assert set() == lost  # B is skipped, not lost
                after = await expires()
                assert after["a"] > before["a"] + 200 and after["b"] == before["b"], (before, after)
                await asyncio.wait_for(work.fence(step, a, 30.0), 10)  # no deadlock: renewal committed
                await step.commit()
            async with sessions() as renewal:
                assert set() == await work.renew(renewal, claims, 300.0)
            assert (await expires())["b"] > before["b"] + 200
            async with sessions() as s:  # another process took B: now it is lost
                await s.execute(text("UPDATE work SET lease_token = 'theirs' WHERE stack_id = 'b'"))
                await s.commit()
            async with sessions() as renewal:
                assert {"b"} == await work.renew(renewal, claims, 300.0)
        finally:
            await engine.dispose()

    asyncio.run(run())
