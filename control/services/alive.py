"""Heartbeats folded into polls: an agent's document poll marks its server alive.

An idle agent long-polls the control plane once a minute and sends a heartbeat only
when what it reports changed (agent/client.py, ``Heartbeat``), so its polls carry its
liveness. The document route notes each poll in memory (no database write on the hot
path); every FLUSH seconds one executemany writes the servers' ``last_seen``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import cast

from sqlalchemy import Table, bindparam, update
from sqlalchemy.exc import DBAPIError

from control.runtime import Runtime
from control.store.orm import ServerRow

log = logging.getLogger(__name__)
#: Seconds between writes of the polls' marks; well inside the 90 s heartbeat lease.
FLUSH = 5.0
#: Servers per statement.
CHUNK = 1000


def polled(rt: Runtime, server_id: str) -> None:
    """The agent of *server_id* polled this process now."""
    rt.polled[server_id] = time.time()


async def write(rt: Runtime) -> int:
    """Write the noted polls as the servers' ``last_seen``; the number of servers written."""
    seen, rt.polled = rt.polled, {}
    if not seen:
        return 0
    table = cast(Table, ServerRow.__table__)  # Core: an executemany with no ORM rowcount check
    stmt = update(table).where(table.c.id == bindparam("sid")).values(last_seen=bindparam("seen"))
    rows = [{"sid": sid, "seen": at} for sid, at in seen.items()]
    try:
        async with rt.sessions() as session:
            for start in range(0, len(rows), CHUNK):
                await session.execute(stmt, rows[start : start + CHUNK])
            await session.commit()
    except (DBAPIError, OSError):
        for sid, at in seen.items():  # kept for the next write, unless a newer poll came meanwhile
            rt.polled.setdefault(sid, at)
        raise
    return len(rows)


async def keep_writing(rt: Runtime, period: float = FLUSH) -> None:
    """Write the noted polls every *period* seconds, until cancelled."""
    while True:
        await asyncio.sleep(period)
        try:
            await write(rt)
        except (DBAPIError, OSError) as e:
            log.warning("writing %d agent(s)' last poll time failed (retrying): %s", len(rt.polled), e)
