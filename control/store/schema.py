"""The database schema's version: Alembic revisions in ``control/store/migrations/versions/``.

A new database is made by running every revision; an existing one must be at the newest
(head) revision, else the control plane refuses it and names `anneal db upgrade`, which
runs the missing revisions in one transaction. A database of release 36f815b, the last
before Alembic, has no ``alembic_version`` table but ``anneal_meta.schema_version = 4``:
it is at the baseline revision. Revision 0002 sets that row to ``alembic``, a value every
release before Alembic refuses, so an older control plane never runs on a newer schema.
"""

from __future__ import annotations

import functools
import io
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, event, inspect, make_url, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from control.store.sqliteconn import RollbackOnClose

if TYPE_CHECKING:  # Alembic (10 MiB) is imported only to change a schema or print one
    from alembic.config import Config
    from alembic.script import ScriptDirectory

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
#: The revision of release 36f815b's schema, and the ``anneal_meta`` value that marks it.
BASELINE, LEGACY_VERSION = "0001", "4"
#: A revision file's own id and its parent's, as each file in ``versions/`` states them.
_REVISION_LINE = re.compile(r'^(down_revision|revision) = (?:"(\w+)"|None)$', re.MULTILINE)
#: Any number: the PostgreSQL advisory lock that serialises processes creating or upgrading the schema.
_LOCK = 0x616E6E65


class SchemaError(RuntimeError):
    """The database's schema is not the one this control plane runs on.

    ``upgradable``: an older revision that `anneal db upgrade` brings to head.
    """

    def __init__(self, message: str, *, upgradable: bool = False) -> None:
        super().__init__(message)
        self.upgradable = upgradable


@dataclass(frozen=True)
class Version:
    """Where a database stands: its revision (None: empty) and the newest this code knows."""

    current: str | None
    head: str
    #: Made by the release before Alembic: no version table yet (it is at the baseline).
    legacy: bool = False

    @property
    def pending(self) -> list[str]:
        """The revisions an upgrade applies, oldest first, each as ``id: message``."""
        found = _script().iterate_revisions(self.head, self.current)
        return [f"{r.revision}: {(r.doc or '').splitlines()[0]}" for r in reversed(list(found))]


def alembic_config(**attributes: Any) -> Config:
    """Alembic's settings, made here: there is no alembic.ini; *attributes* reach env.py."""
    from alembic.config import Config  # noqa: PLC0415

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("file_template", "r%%(rev)s_%%(slug)s")
    cfg.attributes.update(attributes)
    return cfg


@functools.cache
def _script() -> ScriptDirectory:
    from alembic.script import ScriptDirectory  # noqa: PLC0415

    return ScriptDirectory.from_config(alembic_config())


@functools.cache
def chain() -> dict[str, str | None]:
    """Each revision and the one it follows, read from the files' text: a check at start-up
    needs no Alembic (tests/unit/test_schema_chain.py holds this to Alembic's own reading)."""
    found: dict[str, str | None] = {}
    for path in sorted((MIGRATIONS / "versions").glob("r*.py")):
        lines = {m[1]: m[2] for m in _REVISION_LINE.finditer(path.read_text())}
        assert "revision" in lines and "down_revision" in lines, (
            f"{path}: no revision = / down_revision = line"
        )
        found[lines["revision"]] = lines["down_revision"]
    return found


def head() -> str:
    revisions = chain()
    heads = sorted(set(revisions) - set(revisions.values()))
    assert len(heads) == 1, f"{MIGRATIONS}: expected one head revision, found {heads or 'none'}"
    return heads[0]


async def prepare(url: str) -> None:
    """Make a new database at head; refuse one at another revision (SchemaError)."""
    async with _schema_engine(url) as engine, engine.begin() as conn:
        await conn.run_sync(_prepare)


def _prepare(conn: Connection) -> None:
    found = version_of(conn)
    if found.current is None:
        run_revisions(conn, found)
        log.info("a new database: its schema is made at revision %s", found.head)
    elif found.current != found.head:
        raise SchemaError(
            f"the database is at schema revision {found.current}; this control plane needs "
            f"{found.head} ({len(found.pending)} revision(s) to apply)",
            upgradable=True,
        )


async def status(url: str) -> Version:
    async with _schema_engine(url) as engine, engine.begin() as conn:
        return await conn.run_sync(version_of)


async def upgrade(url: str, *, dry_run: bool = False) -> tuple[Version, str]:
    """Bring the database to head in one transaction; return where it was and the SQL (dry run) or ''.

    With *dry_run* the database is only read: the SQL the upgrade would run is returned.
    """
    async with _schema_engine(url) as engine, engine.begin() as conn:
        found = await conn.run_sync(version_of)
        if dry_run:
            return found, offline_sql(engine.dialect.name, found)
        if found.current != found.head:
            await conn.run_sync(run_revisions, found)
        return found, ""


def version_of(conn: Connection) -> Version:
    """Read the database's revision; SchemaError when it is not an anneal database this code knows."""
    if conn.dialect.name == "postgresql":  # held until the transaction ends
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK})
    tables = set(inspect(conn).get_table_names())
    top = head()
    if "alembic_version" in tables:
        heads = list(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())
        if len(heads) != 1:
            raise SchemaError(f"the database's alembic_version table holds {list(heads)}: expected one row")
        _known(heads[0], top)
        return Version(heads[0], top)
    if not tables:
        return Version(None, top)
    if "anneal_meta" not in tables:
        raise SchemaError(
            f"the database has tables ({', '.join(sorted(tables)[:5])}) but is not an anneal database: "
            "give anneal an empty database or one it made"
        )
    value = conn.execute(text("SELECT value FROM anneal_meta WHERE key = 'schema_version'")).scalar()
    if value != LEGACY_VERSION:
        raise SchemaError(
            f"the database is at schema version {value}, from before release 36f815b: "
            "there is no upgrade from it; use a new database"
        )
    return Version(BASELINE, top, legacy=True)


def _known(revision: str, top: str) -> None:
    if revision not in chain():
        raise SchemaError(
            f"the database is at schema revision {revision}, which this control plane does not know "
            f"(its newest is {top}): a newer anneal upgraded it; run that version"
        )


def run_revisions(conn: Connection, found: Version) -> None:
    """Apply the missing revisions on *conn*, inside its transaction; check foreign keys after."""
    from alembic import command  # noqa: PLC0415

    cfg = alembic_config(connection=conn)
    if found.legacy:
        command.stamp(cfg, BASELINE)
    command.upgrade(cfg, "head")
    if conn.dialect.name == "sqlite":
        broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
        if broken:  # raised inside the transaction: nothing of the upgrade is kept
            raise SchemaError(f"the upgrade left rows whose foreign key points nowhere: {broken[:5]}")


def offline_sql(dialect: str, found: Version) -> str:
    """The SQL an upgrade from *found* runs on *dialect*, as Alembic's offline mode prints it."""
    if found.current == found.head:
        return ""
    from alembic import command  # noqa: PLC0415

    out = io.StringIO()
    cfg = alembic_config(dialect=dialect)
    cfg.output_buffer = out
    if found.legacy:
        out.write("-- release 36f815b kept no alembic_version table: it is made at the baseline first\n")
        command.stamp(cfg, BASELINE, sql=True)
    command.upgrade(cfg, f"{found.current}:head" if found.current else "head", sql=True)
    return out.getvalue()


@asynccontextmanager
async def _schema_engine(url: str) -> AsyncIterator[AsyncEngine]:
    """A one-connection engine for schema work; on SQLite its transactions are BEGIN IMMEDIATE.

    Python's sqlite3 runs DDL outside any transaction unless told otherwise: taking the
    write lock first makes the check and the whole upgrade one transaction, and makes a
    second process wait instead of creating the same tables. Foreign keys stay off here
    (SQLite's default): a table copied by a batch ALTER must not cascade its DROP.
    """
    sqlite = make_url(url).get_backend_name() == "sqlite"
    engine = create_async_engine(
        url, poolclass=NullPool, **({"connect_args": {"factory": RollbackOnClose}} if sqlite else {})
    )
    if sqlite:
        event.listen(engine.sync_engine, "connect", _sqlite_manual_transactions)
        event.listen(engine.sync_engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
    try:
        yield engine
    finally:
        await engine.dispose()


def _sqlite_manual_transactions(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # the driver begins nothing; the "begin" event does
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()
