"""Agent credentials cached per process (control/store/credentials.py), against a real SQLite database.

Two ``Credentials`` on one database stand for two control-plane processes.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from sqlalchemy import event, update

from control.keys import token_hash
from control.store.credentials import Credentials
from control.store.orm import ServerRow
from tests.support.database import Database, sqlite_database


async def _server(db: Database, credential: str) -> str:
    async with db.sessions() as session:
        session.add(
            ServerRow(
                id="s1", name="s1", status="ENROLLED", credential_hash=token_hash(credential), created_at=0.0
            )
        )
        await session.commit()
    return "s1"


async def _reenrol(db: Database, here: Credentials, server: str) -> None:
    """The server enrols again through *here*: its credential "old" becomes "new", revoked in one commit."""
    async with db.sessions() as session:
        await session.execute(
            update(ServerRow).where(ServerRow.id == server).values(credential_hash=token_hash("new"))
        )
        await here.revoke(session, token_hash("old"))
        await session.commit()


async def _reenrolled_through_another(db: Database, bound: float) -> tuple[str, Credentials, Credentials]:
    """Server, *here* and *there* (two processes' caches): *there* cached "old", then the server
    enrolled again through *here*."""
    server = await _server(db, "old")
    here, there = Credentials(bound=bound), Credentials(bound=bound)
    assert server == await there.server_of(db.sessions, token_hash("old"))
    await _reenrol(db, here, server)
    return server, here, there


def _count_statements(db: Database) -> list[str]:
    seen: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    event.listen(db.engine.sync_engine, "before_cursor_execute", note)
    return seen


def test_fresh_cache_answers_polls_without_the_database(tmp_path: Path) -> None:
    """While the counter read is fresh, 1,000 lookups of a known credential make no database statement."""

    async def run() -> None:
        async with sqlite_database(tmp_path) as db:
            server = await _server(db, "c1")
            cache = Credentials(bound=600.0)
            assert server == await cache.server_of(db.sessions, token_hash("c1"))
            statements = _count_statements(db)
            for _ in range(1000):
                assert server == await cache.server_of(db.sessions, token_hash("c1"))
            assert [] == statements

    asyncio.run(run())


def test_revocation_in_one_process_reaches_the_other_within_the_bound(tmp_path: Path) -> None:
    """A credential revoked through one cache is refused by the other cache after its next counter read."""

    async def run() -> None:
        async with sqlite_database(tmp_path) as db:
            server, here, there = await _reenrolled_through_another(db, 0.2)
            committed = time.monotonic()
            assert await here.server_of(db.sessions, token_hash("old")) is None
            deadline = committed + 10
            while await there.server_of(db.sessions, token_hash("old")) is not None:
                assert time.monotonic() < deadline, "the other process kept the revoked credential"
                await asyncio.sleep(0.01)
            assert await there.server_of(db.sessions, token_hash("old")) is None
            assert server == await there.server_of(db.sessions, token_hash("new"))
            assert there.rechecks >= 1

    asyncio.run(run())


def test_unknown_credential_is_refused_and_not_cached(tmp_path: Path) -> None:
    """A credential no server holds is refused each time (read from the database, never remembered)."""

    async def run() -> None:
        async with sqlite_database(tmp_path) as db:
            await _server(db, "c1")
            cache = Credentials(bound=600.0)
            for _ in range(3):
                assert await cache.server_of(db.sessions, token_hash("nobody")) is None

    asyncio.run(run())


def test_woken_long_polls_share_one_counter_read(tmp_path: Path) -> None:
    """A hundred checks after one publish cost one counter read (one statement), not a SELECT each."""

    async def run() -> None:
        async with sqlite_database(tmp_path) as db:
            server = await _server(db, "c1")
            cache = Credentials(bound=600.0)
            assert server == await cache.server_of(db.sessions, token_hash("c1"))
            published = time.monotonic()
            statements = _count_statements(db)
            checks = [cache.held_since(db.sessions, token_hash("c1"), server, published) for _ in range(100)]
            assert [True] * 100 == await asyncio.gather(*checks)
            assert 1 == len(statements), statements
            assert not await cache.held_since(db.sessions, token_hash("c1"), "another-server", published)

    asyncio.run(run())


def test_a_check_after_a_publish_sees_a_revocation_made_elsewhere_before_it(tmp_path: Path) -> None:
    """Even with a long bound, a credential revoked by another process before the publish is refused."""

    async def run() -> None:
        async with sqlite_database(tmp_path) as db:
            server, _, there = await _reenrolled_through_another(db, 600.0)
            published = time.monotonic()  # the other process renders the new document after the commit
            assert server == await there.server_of(db.sessions, token_hash("old"))  # cached: within the bound
            assert not await there.held_since(db.sessions, token_hash("old"), server, published)
            assert await there.held_since(db.sessions, token_hash("new"), server, published)

    asyncio.run(run())


def test_the_checks_a_publish_wakes_share_one_read_started_after_it_and_see_a_revocation(
    tmp_path: Path,
) -> None:
    """The long-polls a publish wakes check their credential by a counter read started after the
    publish: the first check starts it, the others wait for it, and a revocation another process
    committed before the publish is seen."""

    async def run() -> None:
        async with sqlite_database(tmp_path) as db:
            server, _, there = await _reenrolled_through_another(db, 600.0)
            reads = there.reads
            at = there.clock()  # the publish, after the commit it carries
            assert not await there.held_since(db.sessions, token_hash("old"), server, at)
            assert reads + 1 == there.reads
            assert await there.held_since(db.sessions, token_hash("new"), server, at)
            # The next publish: fifty woken checks of a cached credential cost one counter read.
            statements = _count_statements(db)
            at = there.clock()
            checks = [there.held_since(db.sessions, token_hash("new"), server, at) for _ in range(50)]
            assert [True] * 50 == await asyncio.gather(*checks)
            assert reads + 2 == there.reads
            assert ["SELECT counters.value"] == [s.split("\n")[0].strip() for s in statements]

    asyncio.run(run())


class Clock:
    """A monotonic clock the test moves: the bound is checked at exact instants, not on the wall clock."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def _revoke(db: Database, here: Credentials, server: str) -> None:
    async with db.sessions() as session:
        await session.execute(
            update(ServerRow).where(ServerRow.id == server).values(credential_hash=token_hash("new"))
        )
        await here.revoke(session, token_hash("old"))
        await session.commit()


async def _settle(cache: Credentials) -> None:
    """Let a background counter read that started finish (it runs on this event loop)."""
    reading = cache._reading
    if reading is not None:
        await reading


def test_no_process_accepts_a_revoked_credential_past_the_bound_after_the_commit(tmp_path: Path) -> None:
    """Worst case: the other process read the counter just before the commit; BOUND after the commit it refuses,
    and inside the bound it may still answer from its cache (the bound is what docs/security.md states)."""

    async def run() -> None:
        async with sqlite_database(tmp_path) as db:
            server = await _server(db, "old")
            for probe, expect in ((0.9, server), (1.0 + 1e-6, None)):
                clock, here = Clock(), Credentials()
                there = Credentials(bound=1.0, clock=clock)
                assert server == await there.server_of(db.sessions, token_hash("old"))
                # past half the bound: this request starts a counter read (before the commit)
                clock.now += 0.6
                assert server == await there.server_of(db.sessions, token_hash("old"))
                await _settle(there)
                clock.now += 0.1
                await _revoke(db, here, server)  # committed at this instant
                clock.now += probe
                assert expect == await there.server_of(db.sessions, token_hash("old")), probe
                await _settle(there)
                assert await there.server_of(db.sessions, token_hash("old")) is None  # and from then on
                async with db.sessions() as session:  # the next round starts from the old credential again
                    await session.execute(
                        update(ServerRow)
                        .where(ServerRow.id == server)
                        .values(credential_hash=token_hash("old"))
                    )
                    await session.commit()

    asyncio.run(run())
