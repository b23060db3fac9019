"""Stacks get the deadline of their running action (Heat's stack timeout, docs/templates.md).

Revision 0012, after 0011. ``stacks.deadline`` is when the running create, update or
rollback fails as "Timed out" (its timeout_mins after it started). Existing rows have none
(NULL): a stack in progress at the upgrade keeps no stack timeout until its next action.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain nullable ADD COLUMN: no batch copy, so `--dry-run` needs no live table.
    op.add_column("stacks", sa.Column("deadline", sa.Float(), nullable=True))
