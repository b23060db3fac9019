"""The previous release's fixture (tests/fixtures/release_36f815b, made by tests/fixtures/make_release.py).

Copies of its data dir and agents' state dirs for a test to upgrade, and the same rows
loaded into PostgreSQL: that release's own DDL for PostgreSQL (``schema-postgresql.sql``,
what its ``create_all`` issued there) run on an empty database, then every row of its
SQLite database copied across, serial counters moved past the copied ids.

Every copy is aged to now: each timestamp in it (a float of seconds since the epoch) moves
forward by the time since the fixture was made, so deadlines it holds (a running deployment's
timeout, an enrolment token's expiry, a signal's next try) are as far off as when it was made.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from functools import cache
from pathlib import Path
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import JSON, Connection, MetaData, create_engine, text
from sqlalchemy.ext.asyncio import create_async_engine

from control.settings import async_url
from control.store import workrow  # noqa: F401 (registers the work table)
from control.store.orm import Base

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "release_36f815b"
#: Tables with an autoincrement id, whose PostgreSQL sequence must follow the copied rows.
_SERIAL = ("events", "resources")
#: Floats in this range are timestamps (2001-09 to 2286-11); durations such as `timeout` are far below.
_EPOCH = (1e9, 1e10)


def expected() -> dict[str, Any]:
    """What that release's API answered about the fixture before it stopped (expected.json)."""
    return dict(json.loads((FIXTURE / "expected.json").read_text()))


def data_dir(dest: Path) -> Path:
    """A copy of the control plane's data dir (database, keys, admin token) at *dest*, modes as made."""
    shutil.copytree(FIXTURE / "data", dest)
    _private(dest)
    _age_sqlite(dest / "anneal.db")
    return dest


def agent_state(name: str, dest: Path, url: str) -> Path:
    """A copy of agent *name*'s state dir at *dest*, its stored URLs moved to *url*.

    The release ran on another port: the agent's config and the signals waiting in its
    outbox name it. The port is the only thing changed; keys, credential and ledger are kept.
    """
    shutil.copytree(FIXTURE / "agents" / name, dest)
    _private(dest)
    old = expected()["old_url"]
    config = dest / "agent.json"
    config.write_text(config.read_text().replace(old, url))
    db = sqlite3.connect(dest / "ledger.sqlite")
    try:
        db.execute("UPDATE outbox SET url = replace(url, ?, ?)", (old, url))
        db.commit()
    finally:
        db.close()
    _age_sqlite(dest / "ledger.sqlite")
    return dest


async def load_into_postgres(url: str) -> None:
    """Make *url* (an empty PostgreSQL database) hold the fixture as that release would have left it."""
    source = create_engine(f"sqlite:///{FIXTURE / 'data' / 'anneal.db'}")
    tables = MetaData()
    tables.reflect(source)
    for column in (c for t in tables.tables.values() for c in t.columns):
        if isinstance(column.type, JSON):  # SQL NULL stays NULL, not the JSON text 'null'
            column.type.none_as_null = True
    with source.connect() as conn:
        rows = {
            name: [{k: _aged(v) for k, v in r._mapping.items()} for r in conn.execute(t.select())]
            for name, t in tables.tables.items()
        }
    source.dispose()
    engine = create_async_engine(async_url(url))
    try:
        async with engine.begin() as conn:
            for statement in (FIXTURE / "schema-postgresql.sql").read_text().split(";"):
                if statement.strip():
                    await conn.exec_driver_sql(statement)
            for table in tables.sorted_tables:  # parents first (resources refer to stacks)
                if rows[table.name]:
                    await conn.execute(table.insert(), rows[table.name])
            for name in _SERIAL:
                await conn.execute(
                    text(f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), max(id)) FROM {name}")
                )
    finally:
        await engine.dispose()


async def differences(url: str) -> list[Any]:
    """What Alembic finds different between the database at *url* and the ORM's tables ([]: none)."""

    def compare(conn: Connection) -> list[Any]:
        return list(compare_metadata(MigrationContext.configure(conn), Base.metadata))

    engine = create_async_engine(async_url(url))
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(compare)
    finally:
        await engine.dispose()


@cache
def _age() -> float:
    """Seconds between the fixture's making (its last event) and the first copy in this process."""
    db = sqlite3.connect(f"file:{FIXTURE / 'data' / 'anneal.db'}?mode=ro", uri=True)
    try:
        (made,) = db.execute("SELECT max(timestamp) FROM events").fetchone()
    finally:
        db.close()
    return time.time() - float(made)


def _aged(value: Any) -> Any:
    """*value* moved forward by the fixture's age if it is a timestamp, else unchanged."""
    if isinstance(value, float) and _EPOCH[0] < value < _EPOCH[1]:
        return value + _age()
    return value


def _age_sqlite(path: Path) -> None:
    """Move every timestamp in the SQLite database at *path* forward by the fixture's age."""
    db = sqlite3.connect(path)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for column in (r[1] for r in db.execute(f'PRAGMA table_info("{table}")')):
                db.execute(
                    f'UPDATE "{table}" SET "{column}" = "{column}" + ? '
                    f'WHERE typeof("{column}") = \'real\' AND "{column}" > ? AND "{column}" < ?',
                    (_age(), *_EPOCH),
                )
        db.commit()
    finally:
        db.close()


def _private(root: Path) -> None:
    """Git keeps no modes: directories 0700 and files 0600, as the control plane and agent make them."""
    for path in [root, *root.rglob("*")]:
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
