"""Publishing as a projection: every process republishes what the database has and it has not.

A transaction's documents are published by the process that committed it, right
after the commit. Two things can leave a publisher behind the database: the
process died between commit and publish, or another process (several
`anneal serve` on one PostgreSQL) committed the change. Every ``interval``
seconds this loop reads each server's serial (one indexed scan of two columns)
and renders the documents whose serial moved, and withdraws removed servers.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from control.runtime import Runtime
from control.store.orm import ServerRow

log = logging.getLogger(__name__)


async def behind(rt: Runtime) -> tuple[list[str], list[str]]:
    """(servers whose document is older than the database's serial, servers gone from the database)."""
    async with rt.sessions() as session:
        serials = dict((await session.execute(select(ServerRow.id, ServerRow.serial))).all())
    stale = [sid for sid, serial in serials.items() if rt.published.get(sid, -1) < serial]
    gone = [sid for sid in rt.published if sid not in serials]
    return stale, gone


async def once(rt: Runtime) -> int:
    """Publish what is behind; the number of documents rendered or withdrawn."""
    stale, gone = await behind(rt)
    if stale or gone:
        await rt.publish([*stale, *gone])
    return len(stale) + len(gone)


async def loop(rt: Runtime, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            count = await once(rt)
        except DBAPIError as e:
            log.warning("republishing failed (retrying): %s", e)
            continue
        if count:
            log.info("republished %d document(s) committed elsewhere or not yet published", count)
