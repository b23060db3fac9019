"""Stacks get Heat's tags and timeout_mins (Heat's Orchestration API v1, docs/heat-api.md).

Revision 0005, after 0004. Existing stacks have no tags (``[]``) and no timeout_mins (NULL:
each deployment keeps its own timeout).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("stacks", schema=None) as batch_op:
        # A NOT NULL column on a table that may have rows: its rows start with no tags.
        batch_op.add_column(sa.Column("tags", sa.JSON(), nullable=False, server_default="[]"))
        batch_op.add_column(sa.Column("timeout_mins", sa.Integer(), nullable=True))
