"""The database: engine, sessions, schema creation."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from control.store.orm import Base

Sessions = async_sessionmaker[AsyncSession]


async def open_database(url: str) -> tuple[AsyncEngine, Sessions]:
    """Connect, create missing tables, and return the engine and a session factory."""
    engine = create_async_engine(url)
    if engine.dialect.name == "sqlite":
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    return engine, async_sessionmaker(engine, expire_on_commit=False)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL keeps readers (agents' polls) off the writers' lock; NORMAL is durable in WAL mode.
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()
