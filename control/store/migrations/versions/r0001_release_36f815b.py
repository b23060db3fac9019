"""Release 36f815b's schema, the last made by create_all: the baseline of every upgrade.

Revision 0001, the first. A database that release made has these tables and
``anneal_meta.schema_version = 4``; `anneal db upgrade` records it at this revision
without running it (control/store/schema.py).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    meta = _anneal_meta()
    _configs()
    _deployments()
    _events()
    _servers()
    _stacks()
    _work()
    _resources()
    op.bulk_insert(meta, [{"key": "schema_version", "value": "4"}])


def _anneal_meta() -> sa.Table:
    return op.create_table(
        "anneal_meta",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=255), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )


def _configs() -> None:
    op.create_table(
        "configs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("stack_id", sa.String(length=64), nullable=True),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("group", sa.String(length=128), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_configs_stack_id"), "configs", ["stack_id"], unique=False)


def _deployments() -> None:
    op.create_table(
        "deployments",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("stack_id", sa.String(length=64), nullable=True),
        sa.Column("resource_name", sa.String(length=255), nullable=False),
        sa.Column("server_id", sa.String(length=64), nullable=False),
        sa.Column("config_id", sa.String(length=64), nullable=True),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("actions", sa.JSON(), nullable=False),
        sa.Column("signal_transport", sa.String(length=32), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("item", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("item_id", sa.String(length=64), nullable=True),
        sa.Column("hash", sa.String(length=80), nullable=False),
        sa.Column("timeout", sa.Float(), nullable=False),
        sa.Column("input_values", sa.JSON(), nullable=False),
        sa.Column("outputs", sa.JSON(), nullable=False),
        sa.Column("stdout", sa.Text(), nullable=False),
        sa.Column("stderr", sa.Text(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("signal_nonce", sa.String(length=64), nullable=True),
        sa.Column("progress", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("completed_at", sa.Float(), nullable=True),
        sa.Column("row_version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_deployments_server_id"), "deployments", ["server_id"], unique=False)
    op.create_index(op.f("ix_deployments_stack_id"), "deployments", ["stack_id"], unique=False)


def _events() -> None:
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("stack_id", sa.String(length=64), nullable=False),
        sa.Column("stack_name", sa.String(length=255), nullable=False),
        sa.Column("resource_name", sa.String(length=255), nullable=False),
        sa.Column("deployment_id", sa.String(length=64), nullable=True),
        sa.Column("traversal", sa.Integer(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=True),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("timestamp", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_events_stack", "events", ["stack_id", "id"], unique=False)
    op.create_index(op.f("ix_events_stack_name"), "events", ["stack_name"], unique=False)


def _servers() -> None:
    op.create_table(
        "servers",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("owner_stack_id", sa.String(length=64), nullable=True),
        sa.Column("provisioner", sa.String(length=32), nullable=False),
        sa.Column("enrol_token_hash", sa.String(length=128), nullable=True),
        sa.Column("enrol_expires", sa.Float(), nullable=True),
        sa.Column("credential_hash", sa.String(length=128), nullable=True),
        sa.Column("public_keys", sa.JSON(), nullable=False),
        sa.Column("serial", sa.Integer(), nullable=False),
        sa.Column("serial_at", sa.Float(), nullable=False),
        sa.Column("transport", sa.String(length=32), nullable=False),
        sa.Column("transport_previous", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("enrolled_at", sa.Float(), nullable=True),
        sa.Column("last_seen", sa.Float(), nullable=True),
        sa.Column("agent_status", sa.JSON(), nullable=False),
        sa.Column("agent_kind", sa.String(length=16), nullable=False),
        sa.Column("rebuilds", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("credential_hash"),
        sa.UniqueConstraint("name"),
    )
    op.create_index(op.f("ix_servers_enrol_token_hash"), "servers", ["enrol_token_hash"], unique=False)


def _stacks() -> None:
    op.create_table(
        "stacks",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=False),
        sa.Column("template", sa.JSON(), nullable=False),
        sa.Column("files", sa.JSON(), nullable=False),
        sa.Column("environment", sa.JSON(), nullable=False),
        sa.Column("params_given", sa.JSON(), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("hidden", sa.JSON(), nullable=False),
        sa.Column("warnings", sa.JSON(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("traversal", sa.Integer(), nullable=False),
        sa.Column("rollback", sa.Boolean(), nullable=False),
        sa.Column("previous", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("row_version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )


def _work() -> None:
    op.create_table(
        "work",
        sa.Column("stack_id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("traversal", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("not_before", sa.Float(), nullable=False),
        sa.Column("lease_owner", sa.String(length=128), nullable=True),
        sa.Column("lease_token", sa.String(length=64), nullable=True),
        sa.Column("lease_expires", sa.Float(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("stack_id"),
    )
    op.create_index("ix_work_due", "work", ["not_before"], unique=False)


def _resources() -> None:
    op.create_table(
        "resources",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("stack_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("type", sa.String(length=128), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=False),
        sa.Column("physical_id", sa.String(length=64), nullable=True),
        sa.Column("properties", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("attributes", sa.JSON(), nullable=False),
        sa.Column("requires", sa.JSON(), nullable=False),
        sa.Column("traversal", sa.Integer(), nullable=False),
        sa.Column("current", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("row_version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["stack_id"], ["stacks.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_resources_physical_id"), "resources", ["physical_id"], unique=False)
    op.create_index(op.f("ix_resources_stack_id"), "resources", ["stack_id"], unique=False)
