"""PostgreSQL LISTEN/NOTIFY between control-plane processes sharing one database.

The process that committed a change to servers' documents sends their ids on CHANNEL
right after the commit; every other process listens on a connection of its own and
renders those documents at once, so the long-polls it holds wake without waiting for
the table poll (control/documents/reconcile.py), which stays as the slow fallback: a
notification sent while a listener reconnects is lost (PostgreSQL keeps none for it).
A payload carries at most MAX_PAYLOAD bytes (the server's limit is 8000): ids go in
batches, and a change to more than MAX_IDS servers is sent as one ``*`` ("look at the
table") instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

log = logging.getLogger(__name__)
CHANNEL = "anneal_documents"
#: Bytes of one payload, below PostgreSQL's 8000-byte limit.
MAX_PAYLOAD = 7900
#: Past this many servers one "look at the table" nudge replaces the ids.
MAX_IDS = 2000
EVERYTHING = "*"
#: The listening connection's name in pg_stat_activity.
APPLICATION = "anneal-listen"
#: Seconds between checks that an idle listening connection still answers.
KEEPALIVE = 10.0
#: The longest wait before connecting again (seconds); it doubles from 0.1 s up to this.
BACKOFF_MAX = 5.0


def payloads(origin: str, ids: Sequence[str]) -> list[str]:
    """The payloads announcing *ids*: ``origin:id,id,...``, each under MAX_PAYLOAD bytes."""
    if len(ids) > MAX_IDS:
        return [f"{origin}:{EVERYTHING}"]
    out: list[str] = []
    batch: list[str] = []
    size = len(origin) + 1
    for sid in ids:
        if batch and size + len(sid) + 1 > MAX_PAYLOAD:
            out.append(f"{origin}:{','.join(batch)}")
            batch, size = [], len(origin) + 1
        batch.append(sid)
        size += len(sid) + 1
    if batch:
        out.append(f"{origin}:{','.join(batch)}")
    return out


def parse(payload: str) -> tuple[str, list[str] | None]:
    """(origin, server ids), or (origin, None) for a "look at the table" nudge."""
    origin, _, rest = payload.partition(":")
    if rest == EVERYTHING:
        return origin, None
    return origin, [sid for sid in rest.split(",") if sid]


async def send(sessions: async_sessionmaker[AsyncSession], origin: str, ids: Sequence[str]) -> None:
    """NOTIFY the other processes that *ids*' documents changed (one transaction, committed)."""
    async with sessions() as session:
        for payload in payloads(origin, ids):
            await session.execute(
                text("SELECT pg_notify(:channel, :payload)"), {"channel": CHANNEL, "payload": payload}
            )
        await session.commit()


def dsn(url: str) -> str:
    """asyncpg's connection string for the SQLAlchemy URL *url* (its driver name dropped)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def listen(
    url: str,
    received: Callable[[str], None],
    connected: Callable[[], Awaitable[None]],
    backoff_max: float = BACKOFF_MAX,
) -> None:
    """Listen on CHANNEL for ever, on a connection of its own; connect again with backoff.

    *received* gets every payload; *connected* runs after each (re)connection, once
    listening, to catch up with what was sent while no connection listened.
    """
    delay = 0.1
    clock = asyncio.get_running_loop().time
    while True:
        began = clock()
        try:
            await _session(dsn(url), received, connected)
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as e:
            if clock() - began > KEEPALIVE:
                delay = 0.1  # it listened a while: this is a new outage, not the same one
            log.warning("listening for other processes' changes failed (again in %.1f s): %s", delay, e)
        await asyncio.sleep(delay)
        delay = min(delay * 2, backoff_max)


async def _session(
    target: str, received: Callable[[str], None], connected: Callable[[], Awaitable[None]]
) -> None:
    """One listening connection, until it is lost."""
    conn = await asyncpg.connect(target, timeout=10, server_settings={"application_name": APPLICATION})
    lost = asyncio.Event()
    try:
        conn.add_termination_listener(lambda _conn: lost.set())

        def deliver(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
            received(payload)

        await conn.add_listener(CHANNEL, deliver)
        log.info("listening for other processes' document changes")
        await connected()
        while not lost.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(KEEPALIVE):
                    await lost.wait()
                break
            await conn.fetchval("SELECT 1", timeout=KEEPALIVE)  # a silently dead link raises here
        raise OSError("the listening connection closed")
    finally:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2):
                await conn.close()
        conn.terminate()
