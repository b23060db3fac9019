"""Nested stacks: a stack knows its parent, depth, facade and outputs; events their parent stack.

Revision 0003, after 0002 (template resources and groups, control/resources/nested.py).
Every stack already stored is a top-level one: no parent, depth 0, an empty facade and
no outputs, which the server defaults give existing rows. ``facade`` and ``outputs`` are
encrypted columns; a plain ``{}`` reads as it is (crypt.EncryptedJSON decrypts only its
own envelope), and the next write encrypts them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_EMPTY = sa.text("'{}'")


def upgrade() -> None:
    # Plain ADD COLUMN and CREATE INDEX, which SQLite does in place: no table copy (batch
    # mode), so the dry run (--sql) can print them without reading the tables.
    op.add_column("events", sa.Column("parent_stack_id", sa.String(length=64), nullable=True))
    op.create_index("ix_events_parent_stack_id", "events", ["parent_stack_id"], unique=False)
    op.add_column("stacks", sa.Column("parent_id", sa.String(length=64), nullable=True))
    op.add_column(
        "stacks", sa.Column("parent_resource", sa.String(length=255), nullable=False, server_default="")
    )
    op.add_column("stacks", sa.Column("nested_depth", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("stacks", sa.Column("facade", sa.JSON(), nullable=False, server_default=_EMPTY))
    op.add_column("stacks", sa.Column("outputs", sa.JSON(), nullable=False, server_default=_EMPTY))
    op.create_index("ix_stacks_parent_id", "stacks", ["parent_id"], unique=False)
