"""Deployments remember checks on the host: the newest asked (check_serial) and its answer (check_result).

Revision 0008, after 0007. Existing deployments were never checked (0, null).
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
