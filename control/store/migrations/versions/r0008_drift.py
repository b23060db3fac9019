"""Checks on the host: deployments remember the newest asked (check_serial) and its answer
(check_result); stacks with a converge_interval their next round (converge_due) and when its
checks were asked (converge_asked).

Revision 0008, after 0007. Existing deployments were never checked (0, null); existing stacks
have no converge_interval (null).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMNs, as 0007: no batch copy, so `anneal db upgrade --dry-run` can print them.
    op.add_column(
        "deployments", sa.Column("check_serial", sa.Integer(), nullable=False, server_default=sa.text("0"))
    )
    op.add_column("deployments", sa.Column("check_result", sa.JSON(none_as_null=True), nullable=True))
    op.add_column("stacks", sa.Column("converge_due", sa.Float(), nullable=True))
    op.add_column("stacks", sa.Column("converge_asked", sa.Float(), nullable=True))
    op.create_index(op.f("ix_stacks_converge_due"), "stacks", ["converge_due"], unique=False)
