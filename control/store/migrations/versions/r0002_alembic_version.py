"""The schema's version moves to Alembic's alembic_version table.

Revision 0002, after 0001. ``anneal_meta.schema_version`` becomes ``alembic``: a control
plane of release 36f815b or older compares it with its own number and refuses the
database, instead of running on a schema it does not know.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    meta = sa.table("anneal_meta", sa.column("key", sa.String), sa.column("value", sa.String))
    op.execute(meta.update().where(meta.c.key == "schema_version").values(value="alembic"))
