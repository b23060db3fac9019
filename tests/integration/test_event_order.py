"""A reader that follows a stack's events by id misses none on PostgreSQL.

Event ids come from a sequence at insert, so two transactions can commit them out of
order: id 2 visible while id 1 is not yet. `stack events --follow` and `--wait` ask for
events after the last id they printed, so before the fix they skipped id 1 for good: at
50,000 deployments the CLI printed 118,005 of the create's 120,005 events. Writers now
hold their stacks' event lock shared from their insert to their commit, and a reader
takes it exclusively (control/txn.py `lock_event_streams`). SQLite needs none of this:
it has one writer at a time from its first write to its commit, so its ids are in
commit order.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from sqlalchemy import event, text

from control import keys
from control.principal import EVERYWHERE
from control.services import queries
from control.settings import async_url
from control.store.db import open_database
from control.txn import EVENT_STREAM_LOCK, Txn, lock_event_streams
from tests.support.database import bare_stack
from tests.support.pg import Postgres


def test_a_reader_waits_for_an_earlier_id_still_uncommitted(postgres: Postgres, tmp_path: Path) -> None:
    """A commits id 1 after B commits id 2: a reader that started in between gets both, in order."""

    url = async_url(postgres.new_database())

    async def run() -> tuple[list[dict[str, Any]], bool]:
        engine, sessions = await open_database(url, keys.load_or_create(tmp_path / "keys").data_key)
        try:
            async with sessions() as s:
                s.add(bare_stack("s1"))
                await s.commit()
            # Txn's runtime is used only to publish documents, which these transactions do not.
            async with sessions() as a, sessions() as b:
                first = Txn(a, None)  # type: ignore[arg-type]
                first.event("s1", "r1", "CREATE", "IN_PROGRESS", "first")
                await first.write_events()
                await a.flush()  # id taken, lock held shared, not committed
                second = Txn(b, None)  # type: ignore[arg-type]
                second.event("s1", "r2", "CREATE", "IN_PROGRESS", "second")
                await second.commit()  # writers do not wait on each other

                async def read() -> list[dict[str, Any]]:
                    async with sessions() as r:
                        return await queries.stack_events(r, "s1", after=0, within=EVERYWHERE)

                reader = asyncio.create_task(read())
                await asyncio.sleep(0.5)
                waited = not reader.done()
                await a.commit()
                return await asyncio.wait_for(reader, 30), waited
        finally:
            await engine.dispose()

    events, waited = asyncio.run(run())
    assert ["first", "second"] == [e["reason"] for e in events]
    assert events[0]["id"] < events[1]["id"]
    assert waited  # it did not answer with "second" alone while "first" was uncommitted


def test_one_call_takes_every_stacks_lock_in_one_statement(postgres: Postgres, tmp_path: Path) -> None:
    """A batch of sibling stacks writes its events under all their locks, taken by one statement."""
    url = async_url(postgres.new_database())
    ids = [f"stack-{n}" for n in (3, 1, 2, 1)]

    async def run() -> tuple[int, set[tuple[str, int]]]:
        engine, sessions = await open_database(url, keys.load_or_create(tmp_path / "keys").data_key)
        sent: list[str] = []
        event.listen(engine.sync_engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
        try:
            async with sessions() as s:
                await lock_event_streams(s, ids, shared=True)
                mine = await s.execute(
                    text(
                        "SELECT objid::int, mode FROM pg_locks WHERE locktype = 'advisory'"
                        " AND classid::int = :cls AND pid = pg_backend_pid()"
                    ),
                    {"cls": EVENT_STREAM_LOCK},
                )
                held = {(mode, objid) for objid, mode in mine}
                hashes = await s.execute(
                    text("SELECT hashtext(s.id) FROM unnest(CAST(:ids AS text[])) AS s(id)"),
                    {"ids": sorted(set(ids))},
                )
                want = {("ShareLock", h) for (h,) in hashes}
                return len([q for q in sent if "pg_advisory" in q]), held ^ want
        finally:
            await engine.dispose()

    statements, difference = asyncio.run(run())
    assert 1 == statements
    assert set() == difference  # each of the three stacks locked shared, nothing else
