"""deployments: the retry policy and the attempts of the current generation's result.

Revision 0004, after 0003. Two nullable JSON columns: existing rows have no policy (one
attempt, as before) and no attempts recorded.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deployments", schema=None) as batch_op:
        batch_op.add_column(sa.Column("retry", sa.JSON(none_as_null=True), nullable=True))
        batch_op.add_column(sa.Column("attempts", sa.JSON(none_as_null=True), nullable=True))
