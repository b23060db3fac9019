"""Projects, API tokens and the audit log.

Revision 0009, after 0008. Stacks, servers, configs and deployments get a ``project``;
every row made before is in project ``default`` (control/principal.py's DEFAULT_PROJECT),
which the admin token sees as it sees every project. ``api_tokens`` holds the tokens
`anneal token create` makes (their SHA-256 only); ``audit`` one row per mutating request.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_OWNED = ("stacks", "servers", "configs", "deployments")


def upgrade() -> None:
    for table in _OWNED:
        # A plain ADD COLUMN with a default (no batch copy): `--dry-run` needs no live table.
        op.add_column(
            table, sa.Column("project", sa.String(length=255), nullable=False, server_default="default")
        )
        op.create_index(f"ix_{table}_project", table, ["project"])
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("project", sa.String(length=255), nullable=True),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("hash", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.Column("revoked_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("hash"),
    )
    op.create_table(
        "audit",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("who", sa.String(length=255), nullable=False),
        sa.Column("token_id", sa.String(length=64), nullable=True),
        sa.Column("project", sa.String(length=255), nullable=True),
        sa.Column("api", sa.String(length=16), nullable=False),
        sa.Column("method", sa.String(length=16), nullable=False),
        sa.Column("route", sa.String(length=255), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_audit_at", "audit", ["at"])
