"""Hand-over of servers to another control plane (`stack abandon --to`): where each goes.

Revision 0010, after 0009. ``servers.handover`` is the control plane a server was handed
to (its URL and key), published in its document until its agent moved; ``stacks.handover``
is the hand-over an operator set for the stack's next abandon (`anneal stack handover`).
Existing rows have none (NULL).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain nullable ADD COLUMNs: no batch copy, so `--dry-run` needs no live table.
    op.add_column("servers", sa.Column("handover", sa.JSON(), nullable=True))
    op.add_column("stacks", sa.Column("handover", sa.JSON(), nullable=True))
