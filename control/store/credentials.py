"""Agent credentials: the database is the truth, and each process's cache of it is at most BOUND old.

Polls are the hot path, so a process keeps ``credential hash -> server id`` in memory.
Every revocation (an agent enrolling again, a server removed) bumps one counter row
in the revoking transaction. A process re-reads that counter (one primary-key SELECT)
once its last read is BOUND/2 old and a request comes; when the counter moved, every
cached credential is checked again against ``servers``. A cached credential is used
only while the last counter read started at most BOUND seconds ago; past that, the
request waits for a fresh read. So no process accepts a credential later than BOUND
after the transaction revoking it committed, whichever process ran that transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from control.store.orm import CounterRow, ServerRow
from control.store.work import dialect

log = logging.getLogger(__name__)
#: Seconds after a revocation commits during which another process may still accept it.
BOUND = 1.0
COUNTER = "credential_revocations"
#: Cached credentials checked per query when the counter moved.
CHUNK = 500


async def bump(session: AsyncSession, name: str = COUNTER) -> None:
    """Add one to counter *name* inside the caller's transaction (an upsert; it locks the row)."""
    insert = postgresql.insert if dialect(session) == "postgresql" else sqlite.insert
    stmt = insert(CounterRow).values(name=name, value=1)
    stmt = stmt.on_conflict_do_update(index_elements=[CounterRow.name], set_={"value": CounterRow.value + 1})
    await session.execute(stmt)


class Credentials:
    """One process's cache of agent credentials, never trusted longer than *bound* seconds."""

    def __init__(self, bound: float = BOUND, clock: Callable[[], float] = time.monotonic) -> None:
        self.bound = bound
        #: Seconds, monotonic; a test's own clock checks the bound without the wall clock.
        self.clock = clock
        self._servers: dict[str, str] = {}
        self._counter: int | None = None
        #: clock() when the last successful counter read started.
        self._confirmed = float("-inf")
        self._reading: asyncio.Task[None] | None = None
        #: clock() when ``_reading`` was started (at most when its read began).
        self._read_started = float("-inf")
        #: Counter reads and re-checks made (for the tests and the bench).
        self.reads = 0
        self.rechecks = 0

    async def server_of(self, sessions: async_sessionmaker[AsyncSession], digest: str) -> str | None:
        """The server whose current credential hashes to *digest*, or None."""
        await self._fresh(sessions)
        if self.clock() - self._confirmed <= self.bound:
            found = self._servers.get(digest)
            if found is not None:
                return found
        async with sessions() as session:
            found = await session.scalar(select(ServerRow.id).where(ServerRow.credential_hash == digest))
        if found is not None:
            self._servers[digest] = found
        return found

    async def held_since(
        self, sessions: async_sessionmaker[AsyncSession], digest: str, server_id: str, since: float
    ) -> bool:
        """Whether *digest* is still *server_id*'s credential, by what a counter read started after *since* saw.

        The long-polls one publish wakes share that one read (a woken agent's credential may
        have been revoked by the very change that woke it): a row read each cost the last of
        a hundred agents a hundred serial SELECTs.
        """
        if await self._confirmed_since(sessions, since):
            cached = self._servers.get(digest)
            if cached is not None:
                return cached == server_id
        async with sessions() as session:
            held = await session.scalar(select(ServerRow.credential_hash).where(ServerRow.id == server_id))
        if held == digest:
            self._servers[digest] = server_id
        return held == digest

    async def close(self) -> None:
        """Stop a counter read still running (the process is shutting down)."""
        if self._reading is not None and not self._reading.done():
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reading

    def remember(self, digest: str, server_id: str) -> None:
        """A credential this process just issued (committed)."""
        self._servers[digest] = server_id

    async def revoke(self, session: AsyncSession, digest: str) -> None:
        """Revoke *digest* in the caller's transaction: here at once, elsewhere within the bound."""
        self._servers.pop(digest, None)
        await bump(session)

    async def _fresh(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        """Read the counter in the background once half the bound passed; wait for it past the bound."""
        age = self.clock() - self._confirmed
        if age <= self.bound / 2:
            return
        if self._reading is None or self._reading.done():
            self._start_read(sessions)
        if age > self.bound and self._reading is not None:
            await asyncio.shield(self._reading)

    async def _confirmed_since(self, sessions: async_sessionmaker[AsyncSession], since: float) -> bool:
        """Whether a counter read that started at or after *since* completed (one is started if need be)."""
        if self._confirmed >= since:
            return True
        if self._reading is not None and not self._reading.done() and self._read_started < since:
            await asyncio.shield(self._reading)  # it began too early to count: let it end first
            if self._confirmed >= since:
                return True
        if self._reading is None or self._reading.done():
            self._start_read(sessions)
        assert self._reading is not None
        await asyncio.shield(self._reading)
        return self._confirmed >= since

    def _start_read(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._read_started = self.clock()
        self._reading = asyncio.create_task(self._read(sessions), name="credential-counter")

    async def _read(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        started = self.clock()
        try:
            async with sessions() as session:
                counter = await session.scalar(select(CounterRow.value).where(CounterRow.name == COUNTER))
                counter = counter or 0
                if counter != self._counter:
                    await self._recheck(session)
                    self._counter = counter
        except Exception as e:  # requests then read the database themselves until a read succeeds
            log.warning("reading the credential revocation counter failed: %s", e)
            return
        self.reads += 1
        self._confirmed = max(self._confirmed, started)

    async def _recheck(self, session: AsyncSession) -> None:
        """Keep only the cached credentials the servers table still holds."""
        self.rechecks += 1
        cached = list(self._servers)
        held: set[str] = set()
        for start in range(0, len(cached), CHUNK):
            chunk = cached[start : start + CHUNK]
            query = select(ServerRow.credential_hash).where(ServerRow.credential_hash.in_(chunk))
            held.update(h for h in await session.scalars(query) if h is not None)
        for digest in cached:
            if digest not in held:
                self._servers.pop(digest, None)
