"""The database: engine and sessions, once its schema is at the newest revision (``schema.py``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from control.store import crypt, schema
from control.store.schema import SchemaError
from control.store.sqliteconn import RollbackOnClose

__all__ = ["SchemaError", "Sessions", "open_database"]

Sessions = async_sessionmaker[AsyncSession]


async def open_database(url: str, data_key: bytes) -> tuple[AsyncEngine, Sessions]:
    """Create a new database at the newest schema, or check an existing one is there; connect.

    *data_key* encrypts the columns that may hold secrets (``control/store/crypt.py``).
    A database at an older revision raises SchemaError: `anneal db upgrade` brings it up.
    """
    await schema.prepare(url)
    sqlite = url.startswith("sqlite")  # a closed connection never keeps a lock (control/store/sqliteconn.py)
    engine = create_async_engine(url, **({"connect_args": {"factory": RollbackOnClose}} if sqlite else {}))
    crypt.attach_key(engine.sync_engine.dialect, data_key)
    if engine.dialect.name == "sqlite":
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    return engine, async_sessionmaker(engine, expire_on_commit=False)


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


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL keeps readers (agents' polls) off the writers' lock; NORMAL is durable in WAL mode.
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


#: PostgreSQL's "deadlock detected" and "could not serialize access": the database rolled this
#: transaction back so that another could go on, and running it again is the remedy. A step that
#: met one failed its stack ("internal error: ... deadlock detected": a 50,000-deployment nested
#: delete on PostgreSQL, 2026-11-27), where a lost race on a row version steps again.
ROLLED_BACK = frozenset({"40P01", "40001"})


def raced(e: BaseException) -> bool:
    """True when an error is a race it loses by design (a row version, SQLite's busy
    timeout, a PostgreSQL deadlock or serialization failure): the step (or request) runs again, afresh."""
    return isinstance(e, OperationalError) or rolled_back(e)


def rolled_back(e: BaseException) -> bool:
    """A lost race whose transaction is void (a row version, a PostgreSQL deadlock or
    serialization failure): at once again from a fresh read, it goes through."""
    if isinstance(e, StaleDataError):
        return True
    return isinstance(e, DBAPIError) and getattr(e.orig, "sqlstate", None) in ROLLED_BACK
