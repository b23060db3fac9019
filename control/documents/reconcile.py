"""Publishing as a projection: every process republishes what the database has and it has not.

A transaction's documents are published by the process that committed it, right
after the commit. Two things can leave a publisher behind the database: the
process died between commit and publish, or another process (several
`anneal serve` on one PostgreSQL) committed the change. On PostgreSQL the
committing process announces the servers it changed (control/store/notify.py) and
``Follower`` renders them here at once. Every ``interval`` seconds, as the fallback
for what no notification carried, this loop reads each server's serial (one
indexed scan of two columns) and renders the documents whose serial moved, and
withdraws removed servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from control.runtime import Runtime
from control.store import notify
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
        await rt.publish([*stale, *gone], announce=False)
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


class Follower:
    """Renders the documents other processes announce, gathered while the last batch rendered."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._ids: set[str] = set()
        self._everything = False
        self._wake = asyncio.Event()
        #: Announced ids rendered, and full catch-ups run (for the tests).
        self.rendered = 0
        self.catch_ups = 0

    def received(self, payload: str) -> None:
        origin, ids = notify.parse(payload)
        if origin == self._rt.origin:
            return  # this process published them already
        if ids is None:
            self._everything = True
        else:
            self._ids.update(ids)
        self._wake.set()

    async def connected(self) -> None:
        """(Re)connected: what was announced while no connection listened is found in the table."""
        self._everything = True
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            ids, everything = self._ids, self._everything
            self._ids, self._everything = set(), False
            try:
                if everything:
                    await once(self._rt)
                    self.catch_ups += 1
                else:
                    await self._rt.publish(ids, announce=False)
                    self.rendered += len(ids)
            except Exception:  # the table poll finds them later; following must go on
                log.exception("rendering %d announced document(s) failed", len(ids))


async def follow(rt: Runtime) -> None:
    """Listen for other processes' changes and render them, until cancelled."""
    follower = Follower(rt)
    renderer = asyncio.create_task(follower.run(), name="follow-render")
    try:
        await notify.listen(rt.settings.db_url, follower.received, follower.connected)
    finally:
        renderer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renderer
