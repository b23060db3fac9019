"""A big stack's reads without reading every row: its definition's outline, its counts from an index.

Revision 0013, after 0012. ``stacks.outline`` is the stack's definition outlined (resources per
type, which types need which, how many outputs; control/hot/outline.py), written with the
definition: existing stacks have none (NULL) until their next update, and are read as before.
``ix_resources_state`` covers the counts by type and state that `stack show`, the web view's
graph and its pages of one type ask, so the database answers them from the index alone.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("stacks", sa.Column("outline", sa.JSON(), nullable=True))
    op.create_index(
        "ix_resources_state",
        "resources",
        ["stack_id", "type", "current", "action", "status", "traversal", "id"],
    )
