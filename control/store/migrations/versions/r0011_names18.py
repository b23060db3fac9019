"""Stack and server names unique per project, not across the control plane.

Revision 0011, after 0010. The UNIQUE on ``stacks.name`` and on ``servers.name`` becomes
UNIQUE(project, name) (``uq_stacks_project_name``, ``uq_servers_project_name``): two
projects may each have a stack ``web``, and one project's 409 says nothing of another's
names. Every row is kept as it is: names unique across the control plane are unique per
project too. PostgreSQL drops its constraint by the name it gave it; SQLite cannot drop a
constraint, so its two tables are copied (a batch copy from the tables as 0010 left them,
written out here, so that `--dry-run` needs no live table either).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in (_stacks(), _servers()):
        unique = f"uq_{table.name}_project_name"
        if op.get_context().dialect.name != "sqlite":
            op.drop_constraint(f"{table.name}_name_key", table.name, type_="unique")
            op.create_unique_constraint(unique, table.name, ["project", "name"])
            continue
        # The copy is made from *table*, which has no UNIQUE(name): the old constraint goes with the old table.
        with op.batch_alter_table(table.name, copy_from=table, recreate="always") as batch:
            batch.create_unique_constraint(unique, ["project", "name"])


def _json(name: str, default: str | None = None) -> sa.Column[object]:
    return sa.Column(name, sa.JSON(), nullable=False, server_default=default)


def _servers() -> sa.Table:
    """``servers`` as revision 0010 left it, less its UNIQUE(name)."""
    return sa.Table(
        "servers",
        sa.MetaData(),
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("owner_stack_id", sa.String(length=64), nullable=True),
        sa.Column("provisioner", sa.String(length=32), nullable=False),
        sa.Column("enrol_token_hash", sa.String(length=128), nullable=True),
        sa.Column("enrol_expires", sa.Float(), nullable=True),
        sa.Column("credential_hash", sa.String(length=128), nullable=True),
        _json("public_keys"),
        sa.Column("serial", sa.Integer(), nullable=False),
        sa.Column("serial_at", sa.Float(), nullable=False),
        sa.Column("transport", sa.String(length=32), nullable=False),
        sa.Column("transport_previous", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("enrolled_at", sa.Float(), nullable=True),
        sa.Column("last_seen", sa.Float(), nullable=True),
        _json("agent_status"),
        sa.Column("agent_kind", sa.String(length=16), nullable=False),
        _json("rebuilds"),
        sa.Column("project", sa.String(length=255), nullable=False, server_default="default"),
        sa.Column("handover", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("credential_hash"),
        sa.Index("ix_servers_enrol_token_hash", "enrol_token_hash"),
        sa.Index("ix_servers_project", "project"),
    )


def _stacks() -> sa.Table:
    """``stacks`` as revision 0010 left it, less its UNIQUE(name)."""
    return sa.Table(
        "stacks",
        sa.MetaData(),
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=False),
        *(_json(name) for name in ("template", "files", "environment", "params_given", "parameters")),
        _json("hidden"),
        _json("warnings"),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("traversal", sa.Integer(), nullable=False),
        sa.Column("rollback", sa.Boolean(), nullable=False),
        sa.Column("previous", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("row_version", sa.Integer(), nullable=False),
        sa.Column("parent_id", sa.String(length=64), nullable=True),
        sa.Column("parent_resource", sa.String(length=255), nullable=False, server_default=""),
        sa.Column("nested_depth", sa.Integer(), nullable=False, server_default="0"),
        _json("facade", "{}"),
        _json("outputs", "{}"),
        _json("tags", "[]"),
        sa.Column("timeout_mins", sa.Integer(), nullable=True),
        sa.Column("force_delete", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("converge_due", sa.Float(), nullable=True),
        sa.Column("converge_asked", sa.Float(), nullable=True),
        sa.Column("project", sa.String(length=255), nullable=False, server_default="default"),
        sa.Column("handover", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.Index("ix_stacks_parent_id", "parent_id"),
        sa.Index("ix_stacks_converge_due", "converge_due"),
        sa.Index("ix_stacks_project", "project"),
    )
