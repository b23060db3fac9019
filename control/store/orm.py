"""Tables of the control plane (SQLAlchemy 2.0, SQLite or PostgreSQL).

Columns that can hold a secret (templates, parameters, properties, derived configs,
inputs, outputs) are ``EncryptedJSON``: encrypted at rest with the data key.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import JSON, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from control.store.crypt import EncryptedJSON


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON, Any: JSON}


class MetaRow(Base):
    """Facts about the database itself.

    The schema's revision is in Alembic's ``alembic_version`` table (``control/store/schema.py``);
    ``schema_version`` here says ``alembic``, which releases before Alembic refuse.
    """

    __tablename__ = "anneal_meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(255))


class ServerRow(Base):
    """A server an agent runs on; enrolled with a one-time token."""

    __tablename__ = "servers"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    #: The project it belongs to (control/principal.py); rows from before projects are in "default".
    project: Mapped[str] = mapped_column(String(255), default="default", server_default="default", index=True)
    #: Unique in its project (uq_servers_project_name): another project may use the same name.
    name: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(32))
    owner_stack_id: Mapped[str | None] = mapped_column(String(64), default=None)
    provisioner: Mapped[str] = mapped_column(String(32), default="enrol")
    enrol_token_hash: Mapped[str | None] = mapped_column(String(128), default=None, index=True)
    enrol_expires: Mapped[float | None] = mapped_column(Float, default=None)
    credential_hash: Mapped[str | None] = mapped_column(String(128), default=None, unique=True)
    public_keys: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    serial: Mapped[int] = mapped_column(Integer, default=0)
    #: When the serial last moved: the document's issue time (its expiry counts from here).
    serial_at: Mapped[float] = mapped_column(Float, default=0.0)
    transport: Mapped[str] = mapped_column(String(32), default="HTTP")
    #: Transports the server was moved away from, comma-separated, published to until its agent moved.
    transport_previous: Mapped[str] = mapped_column(String(64), default="")
    created_at: Mapped[float] = mapped_column(Float)
    enrolled_at: Mapped[float | None] = mapped_column(Float, default=None)
    last_seen: Mapped[float | None] = mapped_column(Float, default=None)
    agent_status: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    #: "anneal" (our agent enrols) or "heat" (Heat's agent chain polls its metadata URL).
    agent_kind: Mapped[str] = mapped_column(String(16), default="anneal")
    #: Each time the agent came back with new keys (state dir lost) and what was decided.
    rebuilds: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    #: Handed to another control plane (`stack abandon --to`): its URL and key, in the document
    #: until the agent moved (control/services/handover.py); None: this control plane's.
    handover: Mapped[Any] = mapped_column(JSON(none_as_null=True), nullable=True, default=None)
    __table_args__ = (UniqueConstraint("project", "name", name="uq_servers_project_name"),)


class StackRow(Base):
    """A stack: its template, parameters and where its traversal stands."""

    __tablename__ = "stacks"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    #: The project it belongs to (control/principal.py); rows from before projects are in "default".
    project: Mapped[str] = mapped_column(String(255), default="default", server_default="default", index=True)
    #: Unique in its project (uq_stacks_project_name): another project may use the same name.
    name: Mapped[str] = mapped_column(String(255))
    action: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    status_reason: Mapped[str] = mapped_column(Text, default="")
    template: Mapped[dict[str, Any]] = mapped_column(EncryptedJSON)
    files: Mapped[dict[str, Any]] = mapped_column(EncryptedJSON, default=dict)
    environment: Mapped[dict[str, Any]] = mapped_column(EncryptedJSON, default=dict)
    params_given: Mapped[dict[str, Any]] = mapped_column(EncryptedJSON, default=dict)
    parameters: Mapped[dict[str, Any]] = mapped_column(EncryptedJSON, default=dict)
    hidden: Mapped[list[Any]] = mapped_column(JSON, default=list)
    warnings: Mapped[list[Any]] = mapped_column(JSON, default=list)
    #: Bumped by every create/update request (optimistic concurrency, If-Match).
    version: Mapped[int] = mapped_column(Integer, default=1)
    #: The traversal being run; resources done in it carry the same number.
    traversal: Mapped[int] = mapped_column(Integer, default=1)
    #: Roll back to ``previous`` (or, after a create, to nothing) when this action fails.
    rollback: Mapped[bool] = mapped_column(default=False)
    #: `anneal stack delete --force`: its deployments' DELETE configs are skipped, each with a warning.
    force_delete: Mapped[bool] = mapped_column(default=False)
    #: Heat's stack tags (strings, no commas), for listing filters.
    tags: Mapped[list[Any]] = mapped_column(JSON, default=list)
    #: Heat's timeout_mins: the default timeout of the stack's deployments that set none.
    timeout_mins: Mapped[int | None] = mapped_column(Integer, default=None)
    #: When the running create, update or rollback fails as "Timed out" (timeout_mins after it
    #: started, control/engine/timeouts.py); None: no stack timeout (each deployment keeps its own).
    deadline: Mapped[float | None] = mapped_column(Float, default=None)
    #: template, files, environment and params_given before the running create/update, as one
    #: object: written before revision 0014 only (read until that update settles; store/previous.py).
    previous: Mapped[Any] = mapped_column(EncryptedJSON(none_as_null=True), nullable=True, default=None)
    #: The definition before the running update, copied from the columns above in SQL
    #: (control/store/previous.py); deferred: only a rollback reads them.
    previous_template: Mapped[Any] = mapped_column(
        EncryptedJSON(none_as_null=True), nullable=True, default=None, deferred=True
    )
    previous_files: Mapped[Any] = mapped_column(
        EncryptedJSON(none_as_null=True), nullable=True, default=None, deferred=True
    )
    previous_environment: Mapped[Any] = mapped_column(
        EncryptedJSON(none_as_null=True), nullable=True, default=None, deferred=True
    )
    previous_params: Mapped[Any] = mapped_column(
        EncryptedJSON(none_as_null=True), nullable=True, default=None, deferred=True
    )
    #: A nested stack's parent stack and the parent's resource that made it (None: a top-level stack).
    parent_id: Mapped[str | None] = mapped_column(String(64), default=None, index=True)
    parent_resource: Mapped[str] = mapped_column(String(255), default="")
    #: 0 for a top-level stack, its parent's + 1 for a nested one (capped by --max-nested-depth).
    nested_depth: Mapped[int] = mapped_column(Integer, default=0)
    #: What ``resource_facade`` reads: the parent resource's metadata, deletion and update policy.
    facade: Mapped[dict[str, Any]] = mapped_column(EncryptedJSON, default=dict)
    #: A nested stack's outputs as of its last COMPLETE: its parent resource's attributes.
    outputs: Mapped[dict[str, Any]] = mapped_column(EncryptedJSON, default=dict)
    #: With a converge_interval (the environment's deployment_defaults): when the next round of
    #: checks and converge is due, and when its checks were asked (services/autoconverge.py).
    converge_due: Mapped[float | None] = mapped_column(Float, default=None, index=True)
    converge_asked: Mapped[float | None] = mapped_column(Float, default=None)
    #: Where its next abandon hands it (`anneal stack handover`): the receiving control plane's
    #: URL and keys, for `openstack stack abandon`, which can say nothing of it.
    handover: Mapped[Any] = mapped_column(JSON(none_as_null=True), nullable=True, default=None)
    #: Its definition's outline (control/hot/outline.py: resources per type, type-level edges, outputs),
    #: written with the definition; None for a stack written before revision 0013 or adopted.
    outline: Mapped[Any] = mapped_column(JSON(none_as_null=True), nullable=True, default=None)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    #: Optimistic concurrency: an UPDATE based on a stale read matches no row and is retried.
    row_version: Mapped[int] = mapped_column(Integer, default=1)
    __mapper_args__ = {"version_id_col": row_version}  # noqa: RUF012 (SQLAlchemy reads it once)
    __table_args__ = (UniqueConstraint("project", "name", name="uq_stacks_project_name"),)


class ResourceRow(Base):
    """One resource of a stack; a replaced one stays until cleanup removes it."""

    __tablename__ = "resources"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    stack_id: Mapped[str] = mapped_column(ForeignKey("stacks.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(255))
    type: Mapped[str] = mapped_column(String(128))
    action: Mapped[str] = mapped_column(String(16), default="INIT")
    status: Mapped[str] = mapped_column(String(16), default="COMPLETE")
    status_reason: Mapped[str] = mapped_column(Text, default="")
    physical_id: Mapped[str | None] = mapped_column(String(64), default=None, index=True)
    properties: Mapped[Any] = mapped_column(EncryptedJSON(none_as_null=True), nullable=True, default=None)
    attributes: Mapped[dict[str, Any]] = mapped_column(EncryptedJSON, default=dict)
    requires: Mapped[list[Any]] = mapped_column(JSON, default=list)
    traversal: Mapped[int] = mapped_column(Integer, default=0)
    #: False once replaced or removed from the template: awaiting cleanup.
    current: Mapped[bool] = mapped_column(default=True)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    #: Optimistic concurrency: an UPDATE based on a stale read matches no row and is retried.
    row_version: Mapped[int] = mapped_column(Integer, default=1)
    __mapper_args__ = {"version_id_col": row_version}  # noqa: RUF012 (SQLAlchemy reads it once)


class ConfigRow(Base):
    """An immutable software config (a SoftwareConfig resource's physical resource)."""

    __tablename__ = "configs"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    #: The project it belongs to (control/principal.py); rows from before projects are in "default".
    project: Mapped[str] = mapped_column(String(255), default="default", server_default="default", index=True)
    stack_id: Mapped[str | None] = mapped_column(String(64), default=None, index=True)
    name: Mapped[str] = mapped_column(String(255))
    group: Mapped[str] = mapped_column(String(128))
    body: Mapped[dict[str, Any]] = mapped_column(EncryptedJSON)
    created_at: Mapped[float] = mapped_column(Float)


class DeploymentRow(Base):
    """A software deployment: one config on one server, with its current generation."""

    __tablename__ = "deployments"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    #: The project it belongs to (control/principal.py); rows from before projects are in "default".
    project: Mapped[str] = mapped_column(String(255), default="default", server_default="default", index=True)
    stack_id: Mapped[str | None] = mapped_column(String(64), default=None, index=True)
    resource_name: Mapped[str] = mapped_column(String(255), default="")
    server_id: Mapped[str] = mapped_column(String(64), index=True)
    config_id: Mapped[str | None] = mapped_column(String(64), default=None)
    name: Mapped[str] = mapped_column(String(255), default="")
    actions: Mapped[list[Any]] = mapped_column(JSON, default=list)
    signal_transport: Mapped[str] = mapped_column(String(32), default="CFN_SIGNAL")
    action: Mapped[str] = mapped_column(String(16), default="CREATE")
    status: Mapped[str] = mapped_column(String(16), default="IN_PROGRESS")
    status_reason: Mapped[str] = mapped_column(Text, default="")
    generation: Mapped[int] = mapped_column(Integer, default=0)
    #: The derived config as it appears in the server's document (None: not on the server).
    item: Mapped[Any] = mapped_column(EncryptedJSON(none_as_null=True), nullable=True, default=None)
    item_id: Mapped[str | None] = mapped_column(String(64), default=None)
    hash: Mapped[str] = mapped_column(String(80), default="")
    timeout: Mapped[float] = mapped_column(Float, default=3600.0)
    input_values: Mapped[dict[str, Any]] = mapped_column(EncryptedJSON, default=dict)
    outputs: Mapped[dict[str, Any]] = mapped_column(EncryptedJSON, default=dict)
    #: What the hook printed (encrypted: it may hold a secret, then it is a Secret).
    stdout: Mapped[Any] = mapped_column(EncryptedJSON, default="")
    stderr: Mapped[Any] = mapped_column(EncryptedJSON, default="")
    status_code: Mapped[int | None] = mapped_column(Integer, default=None)
    signal_nonce: Mapped[str | None] = mapped_column(String(64), default=None)
    #: The last progress signal of the current generation (control/signals/progress.py), or None.
    progress: Mapped[Any] = mapped_column(JSON(none_as_null=True), nullable=True, default=None)
    #: The `retry` property (agent/attempts.py runs it), and the current generation's attempts
    #: as its result reported them (each code, times and output tails), or None; encrypted as
    #: stdout is (an attempt's output that holds a secret text is a Secret).
    retry: Mapped[Any] = mapped_column(JSON(none_as_null=True), nullable=True, default=None)
    attempts: Mapped[Any] = mapped_column(EncryptedJSON(none_as_null=True), nullable=True, default=None)
    #: The newest check on the host asked of this deployment (agent/checks.py), and the agent's
    #: answer (state, diff, reason, check, generation, at); the diff may quote a secret: encrypted.
    check_serial: Mapped[int] = mapped_column(Integer, default=0)
    check_result: Mapped[Any] = mapped_column(EncryptedJSON(none_as_null=True), nullable=True, default=None)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float, default=None)
    completed_at: Mapped[float | None] = mapped_column(Float, default=None)
    #: Optimistic concurrency: an UPDATE based on a stale read matches no row and is retried.
    row_version: Mapped[int] = mapped_column(Integer, default=1)
    __mapper_args__ = {"version_id_col": row_version}  # noqa: RUF012 (SQLAlchemy reads it once)


class EventRow(Base):
    """Every state change, in order; ``traversal`` ties it to the stack action."""

    __tablename__ = "events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    stack_id: Mapped[str] = mapped_column(String(64))
    #: Kept so that a deleted stack's events stay queryable by its name.
    stack_name: Mapped[str] = mapped_column(String(255), default="", index=True)
    #: A deleted nested stack's parent, so the parent's nested events still find it.
    parent_stack_id: Mapped[str | None] = mapped_column(String(64), default=None, index=True)
    resource_name: Mapped[str] = mapped_column(String(255), default="")
    deployment_id: Mapped[str | None] = mapped_column(String(64), default=None)
    traversal: Mapped[int] = mapped_column(Integer, default=0)
    #: The deployment generation the change belongs to (deployment events only).
    generation: Mapped[int | None] = mapped_column(Integer, default=None)
    action: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    timestamp: Mapped[float] = mapped_column(Float)


Index("ix_events_stack", EventRow.stack_id, EventRow.id)
#: A stack's counts by type and state (stack show, the web view's graph, a type's page of the list)
#: read from this index alone, without visiting the rows: constant per row, not per column read.
Index(
    "ix_resources_state",
    ResourceRow.stack_id,
    ResourceRow.type,
    ResourceRow.current,
    ResourceRow.action,
    ResourceRow.status,
    ResourceRow.traversal,
    ResourceRow.id,
)


class CounterRow(Base):
    """A named counter other processes watch (``credential_revocations``: control/store/credentials.py)."""

    __tablename__ = "counters"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[int] = mapped_column(Integer, default=0)


class TokenRow(Base):
    """An API token `anneal token create` made: only its SHA-256 is kept; revoked rows stay, for the audit."""

    __tablename__ = "api_tokens"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(255), default="")
    #: None for an admin token (every project).
    project: Mapped[str | None] = mapped_column(String(255), default=None)
    role: Mapped[str] = mapped_column(String(16))
    hash: Mapped[str] = mapped_column(String(128), unique=True)
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float | None] = mapped_column(Float, default=None)
    revoked_at: Mapped[float | None] = mapped_column(Float, default=None)


class AuditRow(Base):
    """One mutating request: who made it, what it asked, when, and the status it got."""

    __tablename__ = "audit"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[float] = mapped_column(Float, index=True)
    who: Mapped[str] = mapped_column(String(255))
    token_id: Mapped[str | None] = mapped_column(String(64), default=None)
    project: Mapped[str | None] = mapped_column(String(255), default=None)
    #: Which API: ``operator``, ``heat`` or ``ui``.
    api: Mapped[str] = mapped_column(String(16))
    method: Mapped[str] = mapped_column(String(16))
    route: Mapped[str] = mapped_column(String(255))
    target: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[int] = mapped_column(Integer)
