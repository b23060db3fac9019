"""LISTEN/NOTIFY on a real PostgreSQL: payloads arrive, and a listener whose connection dies listens again."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from control.settings import async_url
from control.store import notify
from tests.support.pg import Postgres

IDS = [str(uuid.uuid4()) for _ in range(500)]


async def _until(check: object, what: str, timeout: float = 20) -> None:
    async def loop() -> None:
        while not check():  # type: ignore[operator]
            await asyncio.sleep(0.02)

    try:
        await asyncio.wait_for(loop(), timeout)
    except TimeoutError:
        raise AssertionError(f"after {timeout} s: {what}") from None


async def _listen_terminate_and_send(url: str) -> tuple[list[str], int]:
    received: list[str] = []
    connects = 0

    async def connected() -> None:
        nonlocal connects
        connects += 1

    engine = create_async_engine(async_url(url))
    sessions = async_sessionmaker(engine)
    listener = asyncio.create_task(notify.listen(async_url(url), received.append, connected, backoff_max=0.5))
    try:
        await _until(lambda: connects == 1, "the listener connected")
        await notify.send(sessions, "a", IDS)
        await _until(lambda: len(received) == len(notify.payloads("a", IDS)), "the first payloads")
        admin = await asyncpg.connect(notify.dsn(url))
        try:  # what a restart of PostgreSQL or a cut connection does to the listener
            killed = await admin.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
                notify.APPLICATION,
            )
        finally:
            await admin.close()
        assert 1 == killed
        await _until(lambda: connects == 2, "the listener connected again (and caught up)")
        await notify.send(sessions, "b", ["after"])
        await _until(lambda: "b:after" in received, "a payload sent after the reconnection")
        return received, connects
    finally:
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listener
        await engine.dispose()


def test_a_listener_gets_every_id_sent_and_listens_again_after_its_connection_is_killed(
    postgres: Postgres,
) -> None:
    """500 ids arrive in batched payloads; pg_terminate_backend on the listener: it reconnects, catches up, hears on."""
    received, connects = asyncio.run(_listen_terminate_and_send(postgres.new_database()))
    ids = [sid for p in received if p.startswith("a:") for sid in notify.parse(p)[1] or []]
    assert IDS == ids
    assert len(received) > 2  # batched: 500 ids do not fit one payload
    assert 2 == connects
