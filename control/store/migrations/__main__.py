"""``python -m control.store.migrations "what changed"``: draft the next revision from the ORM.

Makes a scratch SQLite database at the newest revision, lets Alembic compare it with the
ORM's tables, and writes ``versions/r<NNNN>_<what_changed>.py`` for review (README.md).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from alembic import command
from sqlalchemy import create_engine

from control.store import schema


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].strip():
        print(__doc__, file=sys.stderr)
        return 2
    top = schema.head()
    with tempfile.TemporaryDirectory() as tmp:
        engine = create_engine(f"sqlite:///{Path(tmp) / 'head.db'}")
        try:
            with engine.begin() as conn:
                schema.run_revisions(conn, schema.Version(None, top))
                written = command.revision(
                    schema.alembic_config(connection=conn),
                    message=argv[0].strip(),
                    autogenerate=True,
                    rev_id=f"{int(top) + 1:04d}",
                )
        finally:
            engine.dispose()
    assert written is not None and not isinstance(written, list)
    print(f"wrote {written.path}: read it, fix what Alembic cannot see (renames, data), then `make fmt`")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
