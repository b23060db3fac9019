"""A full disk told apart from a busy database: the answer says "disk full" and where.

SQLite says "database or disk is full" (SQLITE_FULL), PostgreSQL answers SQLSTATE 53100, a
file write fails with ENOSPC or EDQUOT. Each becomes a 503 ``disk_full`` naming the database
(its file, or PostgreSQL's host and database, never its password) or the file.
"""

from __future__ import annotations

import errno

from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from control.errors import DiskFullError
from control.settings import Settings

_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_FULL_TEXT = ("disk is full", "no space left on device", "could not extend file")
PG_DISK_FULL = "53100"


def database_place(settings: Settings) -> str:
    """Where the database lives, fit to show: SQLite's file, or PostgreSQL's host and database."""
    url = make_url(settings.db_url)
    if url.get_backend_name() == "sqlite":
        return f"the database file {url.database}"
    return f"the PostgreSQL database {url.database} on {url.host or 'localhost'}:{url.port or 5432}"


def from_database(e: DBAPIError, settings: Settings) -> DiskFullError | None:
    """The disk-full answer for a database error, None when it is not a full disk."""
    codes = {getattr(x, "sqlstate", None) for x in (e.orig, getattr(e.orig, "__cause__", None))}
    text = str(e.orig).lower()
    if PG_DISK_FULL not in codes and not any(t in text for t in _FULL_TEXT):
        return None
    place = database_place(settings)
    return DiskFullError(f"disk full: {place} cannot be written; free space there and retry", where=place)


def from_os_error(e: OSError, settings: Settings) -> DiskFullError | None:
    """The disk-full answer for a failed file write, None when it is another OSError."""
    if e.errno not in _FULL_ERRNOS:
        return None
    place = str(e.filename) if e.filename else str(settings.data_dir)
    return DiskFullError(f"disk full: {place} cannot be written; free space there and retry", where=place)
