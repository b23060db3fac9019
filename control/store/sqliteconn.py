"""The SQLite connection class the control plane opens (a ``factory`` for ``sqlite3.connect``).

Python 3.11's ``sqlite3.Connection.close()`` does not finalize the statements its
cursors still hold. A connection closed in the middle of a write transaction whose
statement has rows left (``UPDATE ... RETURNING`` between execute and fetch, which
is where a cancelled task can stop) becomes an SQLite "zombie": it keeps the
transaction, and so the database's write lock, until that cursor is garbage
collected, and every other writer waits out its busy timeout. SQLAlchemy closes
connections that way when it gives up on one (a task cancelled mid-query at
shutdown, or when an in-process control plane is torn down as in
``tests/integration/test_engine_model.py``).

Rolling back first ends the transaction even with statements pending, so a closed
connection never holds a lock, as when the process dies (kill -9).
"""

from __future__ import annotations

import sqlite3


class RollbackOnClose(sqlite3.Connection):
    """A connection that rolls back an open transaction before it closes."""

    def close(self) -> None:
        try:
            if self.in_transaction:
                self.rollback()
        except sqlite3.Error:
            pass  # closing anyway; SQLite rolls back what is left when the connection goes
        super().close()
