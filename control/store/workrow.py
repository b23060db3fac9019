"""The durable work table: one row per stack the engine must step, claimed with a lease."""

from __future__ import annotations

from sqlalchemy import Float, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from control.store.orm import Base


class WorkRow(Base):
    """A unit of engine work: step stack ``stack_id`` (kind ``step``) once ``not_before`` has passed.

    Any transaction that changes what a stack needs (a create, update, delete or
    cancel request, a signal, a step that finished resources at once) upserts the
    row in the same transaction, bumping ``seq``. A control-plane process claims
    due rows by setting ``lease_owner``/``lease_token``/``lease_expires``; it
    renews the lease while it works, and its step commits only while its token
    still holds the row (the fencing check). A process that dies simply stops
    renewing: once ``lease_expires`` passes, any other process claims the row.
    """

    __tablename__ = "work"
    stack_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), default="step")
    #: The stack's traversal when the work was last requested (for operators reading the table).
    traversal: Mapped[int] = mapped_column(Integer, default=0)
    #: Bumped by every request for another step; a worker finishing an older seq steps again.
    seq: Mapped[int] = mapped_column(Integer, default=1)
    not_before: Mapped[float] = mapped_column(Float)
    lease_owner: Mapped[str | None] = mapped_column(String(128), default=None)
    lease_token: Mapped[str | None] = mapped_column(String(64), default=None)
    lease_expires: Mapped[float | None] = mapped_column(Float, default=None)
    #: How many times the row was claimed (a row claimed again and again marks a crashing step).
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


Index("ix_work_due", WorkRow.not_before)
