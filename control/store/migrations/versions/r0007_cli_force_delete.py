"""Stacks remember a forced delete (`anneal stack delete --force`): DELETE configs are skipped.

Revision 0007, after 0006. Existing stacks were not force-deleted (false).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN (SQLite takes one NOT NULL with a default): no batch copy, so
    # `anneal db upgrade --dry-run` can print it without a live table to reflect.
    op.add_column(
        "stacks", sa.Column("force_delete", sa.Boolean(), nullable=False, server_default=sa.false())
    )
