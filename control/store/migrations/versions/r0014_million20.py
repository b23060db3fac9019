"""A stack's previous definition in four columns of its own, copied in SQL by an update.

Revision 0014, after 0013. ``stacks.previous_template``, ``previous_files``,
``previous_environment`` and ``previous_params`` hold what a rollback returns to, each copied
from the stack's own column as stored (control/store/previous.py), so an update of a big stack
neither decodes nor re-encrypts its old template. ``stacks.previous`` stays: a stack whose
update was accepted before this revision keeps its previous definition there (encrypted as one
object, which this revision cannot split without the data key) until that update settles.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

COLUMNS = ("previous_template", "previous_files", "previous_environment", "previous_params")


def upgrade() -> None:
    for name in COLUMNS:
        op.add_column("stacks", sa.Column(name, sa.JSON(), nullable=True))
