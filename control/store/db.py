"""The database: engine, sessions, schema creation."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session

from control.store import (
    credentials,  # noqa: F401 (registers the counters table)
    crypt,
    workrow,  # noqa: F401 (registers the work table)
)
from control.store.orm import SCHEMA_VERSION, Base, MetaRow
from control.store.sqliteconn import RollbackOnClose

Sessions = async_sessionmaker[AsyncSession]


async def open_database(url: str, data_key: bytes) -> tuple[AsyncEngine, Sessions]:
    """Connect, create missing tables, and return the engine and a session factory.

    *data_key* encrypts the columns that may hold secrets (``control/store/crypt.py``).
    """
    sqlite = url.startswith("sqlite")  # a closed connection never keeps a lock (control/store/sqliteconn.py)
    engine = create_async_engine(url, **({"connect_args": {"factory": RollbackOnClose}} if sqlite else {}))
    crypt.attach_key(engine.sync_engine.dialect, data_key)
    if engine.dialect.name == "sqlite":
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    sessions = async_sessionmaker(engine, expire_on_commit=False)
    async with sessions() as session:
        found = await session.get(MetaRow, "schema_version")
        if found is None:
            session.add(MetaRow(key="schema_version", value=str(SCHEMA_VERSION)))
            await session.commit()
        elif found.value != str(SCHEMA_VERSION):
            await engine.dispose()
            raise SchemaError(
                f"the database is at schema version {found.value}; this control plane needs "
                f"{SCHEMA_VERSION}: use a new database or migrate this one"
            )
    return engine, sessions


_NEW_ROWS = "anneal_new_rows"


@event.listens_for(Session, "pending_to_persistent")
def _keep_new_rows(session: Session, instance: Any) -> None:
    """Hold rows created in a transaction for the session's life.

    The identity map holds weak references: a row the engine created earlier in a
    step (a stack's servers, its configs) would otherwise be dropped once flushed,
    and every later ``session.get`` of it would query the database again (one
    SELECT and one autoflush per deployment of a 50,000-deployment stack).
    """
    session.info.setdefault(_NEW_ROWS, []).append(instance)


@event.listens_for(Session, "after_commit")
@event.listens_for(Session, "after_rollback")
def _release_new_rows(session: Session) -> None:
    """The transaction is over: its new rows need not outlive the caller's references."""
    session.info.pop(_NEW_ROWS, None)


class SchemaError(RuntimeError):
    """The database was made by another version of the control plane."""


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL keeps readers (agents' polls) off the writers' lock; NORMAL is durable in WAL mode.
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()
