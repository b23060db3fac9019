"""RollbackOnClose: a connection closed mid-transaction never keeps the write lock (real SQLite)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from control.store.sqliteconn import RollbackOnClose


def _database(path: Path) -> None:
    with sqlite3.connect(path) as setup:
        setup.execute("PRAGMA journal_mode=WAL")
        setup.execute("CREATE TABLE t (x INTEGER)")
        setup.execute("INSERT INTO t VALUES (1), (2)")
    setup.close()


def test_close_with_a_pending_returning_statement_releases_the_write_lock(tmp_path: Path) -> None:
    """An UPDATE ... RETURNING read only in part, then close: the next writer gets the lock at once."""
    db = tmp_path / "t.db"
    _database(db)
    conn = sqlite3.connect(db, factory=RollbackOnClose)
    cursor = conn.execute("UPDATE t SET x = x + 10 RETURNING x")
    assert cursor.fetchone() is not None and conn.in_transaction  # the statement still has a row
    conn.close()

    other = sqlite3.connect(db, timeout=0)  # no busy wait: locked would raise at once
    other.execute("BEGIN IMMEDIATE")
    assert [(1,), (2,)] == other.execute("SELECT x FROM t ORDER BY x").fetchall()  # rolled back
    other.rollback()
    other.close()
    del cursor


def test_close_outside_a_transaction_and_twice_is_quiet(tmp_path: Path) -> None:
    """Closing a RollbackOnClose connection with no transaction open, and closing it again, raises nothing."""
    db = tmp_path / "t.db"
    _database(db)
    conn = sqlite3.connect(db, factory=RollbackOnClose)
    assert [(1,), (2,)] == conn.execute("SELECT x FROM t ORDER BY x").fetchall()
    conn.close()
    conn.close()
