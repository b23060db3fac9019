"""Writing 1,000 events in one transaction on SQLite: as ORM objects (the baseline) and as one executemany.

control/txn.py's ``write_events`` uses the second; the first is what it did before (the unit of
work asks for each new row's id back, so SQLite got one INSERT per event). Each way runs ROUNDS
times on a fresh database in a temporary directory. Run: `.venv/bin/python -m bench.events`.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from typing import Any

from sqlalchemy import insert

from control.store.db import open_database
from control.store.orm import EventRow

EVENTS = 1000
ROUNDS = 5


def rows() -> list[dict[str, Any]]:
    now = time.time()
    return [
        {
            "stack_id": "s",
            "resource_name": f"r{i}",
            "action": "CREATE",
            "status": "COMPLETE",
            "reason": "x",
            "timestamp": now,
        }
        for i in range(EVENTS)
    ]


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-events-") as work:
        engine, sessions = await open_database(f"sqlite+aiosqlite:///{work}/events.db", os.urandom(32))
        orm, core = [], []
        for _ in range(ROUNDS):
            async with sessions() as session:
                began = time.perf_counter()
                session.add_all([EventRow(**r) for r in rows()])
                await session.commit()
                orm.append(time.perf_counter() - began)
            async with sessions() as session:
                began = time.perf_counter()
                await session.execute(insert(EventRow), rows())
                await session.commit()
                core.append(time.perf_counter() - began)
        await engine.dispose()
    base, now = statistics.median(orm), statistics.median(core)
    print(f"{EVENTS} events, median of {ROUNDS}, load {os.getloadavg()[0]:.1f}:")
    print(f"  ORM objects (baseline)  {base * 1000:7.1f} ms")
    print(f"  one executemany         {now * 1000:7.1f} ms   {base / now:5.1f}x faster")


if __name__ == "__main__":
    asyncio.run(main())
