"""Where a big create's time goes: the API call, the first engine step, the signals, the finish.

    .venv/bin/python bench/scale_phases.py 5000                  # SQLite in a temporary directory
    DBURL=postgresql+asyncpg://... .venv/bin/python bench/scale_phases.py 5000
    PROFILE=/tmp/prof .venv/bin/python bench/scale_phases.py 5000  # + cProfile of each phase

Same stack and simulated agents as bench/scale.py (N/5 servers x 5 deployments,
CFN_SIGNAL), but each phase of the create is timed on its own, wall clock and
CPU of this process:

1. ``api create``: ``stacks.create_stack`` (parse, validate, store the stack);
2. ``first steps``: engine steps until every deployment's document is published
   (the step that creates every resource of the stack);
3. ``signals applied``: every deployment's result, through
   ``control.services.agents.record_signal`` from 512 concurrent callers, as over HTTP;
4. ``engine finish``: the durable work loop steps the stack to CREATE_COMPLETE.

With ``PROFILE=PREFIX`` each phase also runs under cProfile and its stats are
written to ``PREFIX.<phase>.prof`` (read with ``python -m pstats``); the times
printed then include the profiler's overhead.

Use it to see which phase a change moves; bench/scale.py gives the figures of
record (update and delete too, peak RSS per size in a child process).
"""

from __future__ import annotations

import asyncio
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import scale_parts  # noqa: E402 (the bench's stack template and helpers)

WORKERS = 512


class _Phase:
    """Profiles the block under cProfile when PROFILE is set (see the module doc)."""

    def __init__(self, name: str) -> None:
        self.name, self.prefix = name, os.environ.get("PROFILE")
        self.profile: Any = None

    def __enter__(self) -> None:
        if self.prefix:
            import cProfile  # noqa: PLC0415

            self.profile = cProfile.Profile()
            self.profile.enable()

    def __exit__(self, *exc: object) -> None:
        if self.profile is not None:
            self.profile.disable()
            self.profile.dump_stats(f"{self.prefix}.{self.name}.prof")


def rss_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


async def run(n: int) -> None:
    from sqlalchemy import delete, select  # noqa: PLC0415 (after sys.path is set)

    from control import keys  # noqa: PLC0415
    from control.documents.publish import HttpPublisher  # noqa: PLC0415
    from control.engine.stackdef import Definitions  # noqa: PLC0415
    from control.engine.worker import Engine  # noqa: PLC0415
    from control.provision import EnrolProvisioner  # noqa: PLC0415
    from control.runtime import Runtime  # noqa: PLC0415
    from control.services import agents, stacks  # noqa: PLC0415
    from control.settings import Settings, tune_collector  # noqa: PLC0415

    tune_collector()  # as `anneal serve` does
    from control.store import work  # noqa: PLC0415
    from control.store.db import open_database  # noqa: PLC0415
    from control.store.orm import StackRow  # noqa: PLC0415
    from control.store.workrow import WorkRow  # noqa: PLC0415

    to_signal: list[tuple[str, int, str]] = []
    seen: set[tuple[str, int]] = set()

    class SimPublisher(HttpPublisher):
        """Collects each new generation's signal URL as its document is published."""

        async def publish(self, server_id: str, serial: int, body: bytes, at: float | None = None) -> None:
            await super().publish(server_id, serial, body, at)
            to_signal.extend(scale_parts.new_generations(body, seen))

    with tempfile.TemporaryDirectory(prefix="anneal-phases-") as tmp:
        data = Path(tmp)
        url = os.environ.get("DBURL") or f"sqlite:///{data}/a.db"
        settings = Settings(
            data_dir=data, database_url=url, provisioner="enrol", default_signal_transport="CFN_SIGNAL"
        )
        secrets = keys.load_or_create(data)
        db, sessions = await open_database(settings.db_url, secrets.data_key)
        rt = Runtime(settings, secrets, sessions, SimPublisher(), EnrolProvisioner())
        engine = Engine(rt, Definitions())

        wire = [scale_parts.sent(n, name="scale")]  # the client's JSON, decoded as the API does
        t, c = time.monotonic(), scale_parts.cpu()
        with _Phase("api"):
            await stacks.create_stack(rt, lambda _: None, scale_parts.received(wire.pop()))
        print(
            f"{n} api create       {time.monotonic() - t:6.2f} s, CPU {scale_parts.cpu() - c:6.2f} s",
            flush=True,
        )

        async with sessions() as session:
            claim = (await work.claim(session, engine.owner, 600, 1, {}))[0]
        t, c = time.monotonic(), scale_parts.cpu()
        with _Phase("step"):
            for _ in range(100):  # bounded: a step that publishes nothing new ends it early
                finished, _ = await engine.step(claim)  # the step alone, timed
                if finished or len(seen) >= n:
                    break
        print(
            f"{n} first steps      {time.monotonic() - t:6.2f} s, CPU {scale_parts.cpu() - c:6.2f} s, "
            f"peak RSS {rss_mb()} MB, {len(to_signal)} generations published",
            flush=True,
        )
        async with sessions() as session:  # hand the stack to the durable work loop
            await session.execute(delete(WorkRow))
            await session.commit()
        await engine.resume()

        t, c = time.monotonic(), scale_parts.cpu()
        queue: asyncio.Queue[tuple[str, int, str]] = asyncio.Queue()
        for item in to_signal:
            queue.put_nowait(item)
        result = {"deploy_status_code": 0, "deploy_stdout": "ok", "deploy_stderr": ""}

        async def agent() -> None:
            while not queue.empty():
                dep_id, generation, sig = queue.get_nowait()
                await agents.record_signal(
                    rt, engine.kick, dep_id, generation, result, sig=sig, server_id=None
                )

        with _Phase("signals"):
            await asyncio.gather(*(agent() for _ in range(WORKERS)))
        t1, c1 = time.monotonic(), scale_parts.cpu()
        batches = rt.signal_batch.batches if rt.signal_batch is not None else 0
        print(
            f"{n} signals applied  {t1 - t:6.2f} s, CPU {c1 - c:6.2f} s, {batches} transactions", flush=True
        )

        status: Any = "IN_PROGRESS"
        deadline = time.monotonic() + 600
        while status == "IN_PROGRESS" and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            async with sessions() as session:
                status = await session.scalar(select(StackRow.status).where(StackRow.name == "scale"))
        print(
            f"{n} engine finish    {time.monotonic() - t1:6.2f} s, CPU {scale_parts.cpu() - c1:6.2f} s -> {status}; "
            f"peak RSS {rss_mb()} MB",
            flush=True,
        )
        await engine.close()
        await db.dispose()


if __name__ == "__main__":
    asyncio.run(run(int(sys.argv[1]) if len(sys.argv) > 1 else 5000))
