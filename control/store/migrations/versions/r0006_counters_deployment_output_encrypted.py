"""The revocation counter; a deployment's stdout, stderr and attempts stored encrypted.

Revision 0006, after 0005. ``counters`` holds ``credential_revocations``, which every
process watches to drop revoked agent credentials from its cache
(``control/store/credentials.py``). ``deployments.stdout``/``stderr`` become JSON, as every
encrypted column is (``control/store/crypt.py``): a hook's output may hold a secret. The
text already stored becomes a JSON string, read as it is and encrypted on its next write
(the revision cannot encrypt: the data key is not in the database). ``deployments.attempts``
(each attempt's stdout and stderr, revision 0004) is JSON already: its type does not change,
a value stored in clear is read as it is and encrypted on its next write.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_STREAMS = ("stdout", "stderr")
#: SQLite's steps for one stream (STREAM: stdout or stderr; fixed names, no input).
_SQLITE_STEPS = (
    "ALTER TABLE deployments ADD COLUMN STREAM_json JSON NOT NULL DEFAULT '\"\"'",
    "UPDATE deployments SET STREAM_json = json_quote(STREAM)",
    "ALTER TABLE deployments DROP COLUMN STREAM",
    "ALTER TABLE deployments RENAME COLUMN STREAM_json TO STREAM",
)


def upgrade() -> None:
    op.create_table(
        "counters",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    if op.get_context().dialect.name == "sqlite":
        # Not a batch copy (it needs the live table to reflect, and --dry-run has none): a
        # new JSON column per stream holding the text as a JSON string, in the old one's place.
        for stream in _STREAMS:
            for statement in _SQLITE_STEPS:
                op.execute(statement.replace("STREAM", stream))
        return
    for name in _STREAMS:  # PostgreSQL converts in place
        op.alter_column(
            "deployments",
            name,
            existing_type=sa.TEXT(),
            type_=sa.JSON(),
            existing_nullable=False,
            postgresql_using=f"to_json({name})",
        )
