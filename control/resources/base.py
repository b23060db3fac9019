"""What every resource handler shares: the resource acted on and the outcome.

A handler acts inside the engine's transaction and returns an Outcome:
COMPLETE (with attributes), IN_PROGRESS (waiting for signals), FAILED (with
the reason), or REPLACE from update (the engine then creates the
replacement first and deletes the old resource last). Optional methods, each
its own protocol: ``suspend``/``resume`` (``Suspendable``: the stack's SUSPEND
and RESUME walks) and ``check`` (``Checked``: asked on every engine step while
the resource is IN_PROGRESS, for handlers that track their own progress, such
as deployment groups).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

from control import hot
from control.store.orm import ResourceRow, StackRow
from control.txn import Txn


@dataclass(frozen=True)
class Outcome:
    status: str
    physical_id: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    reason: str = ""
    wake_at: float | None = None  # IN_PROGRESS: step again no later than this time
    generation: int | None = None  # a deployment's generation this outcome belongs to


REPLACE: Final = Outcome("REPLACE")


def done(physical_id: str | None = None, **attributes: Any) -> Outcome:
    return Outcome("COMPLETE", physical_id, attributes)


@dataclass(frozen=True)
class Nest:
    """What the stack gives a resource that makes a nested stack (template resources, groups)."""

    #: The stack's environment: its registry and parameter_defaults go down to the nested stack.
    environment: hot.Environment
    #: The ``[attribute, key, ...]`` paths the stack reads of the resource (None: any).
    wants: frozenset[tuple[Any, ...]] | None
    #: ``resource_facade`` in the nested stack: the resource's metadata and policies.
    facade: Mapping[str, Any]
    #: The template resource's parsed template (None for groups: they build theirs).
    template: hot.Template | None = None


@dataclass(frozen=True)
class Res:
    """The resource being acted on."""

    stack: StackRow
    name: str
    type: str
    #: The resource's ``update_policy`` as written in the template (create and update only).
    update_policy: Mapping[str, Any] = field(default_factory=dict)
    #: What a resource that makes a nested stack passes down (create and update only).
    nest: Nest | None = None
    #: The attributes of it other resources and outputs read with get_attr (create and update only).
    reads: frozenset[str] = frozenset()
    #: ``external_id`` resolved: the existing thing the resource adopts (create only).
    external_id: str | None = None

    @property
    def stack_path(self) -> str:
        return f"{self.stack.name}/{self.stack.id}"

    @property
    def where(self) -> str:
        return f"resources.{self.name}"


def warn(txn: Txn, res: Res, message: str, action: str = "CREATE") -> None:
    """A WARNING event on *res*: what Heat would do that Anneal does another way, or not at all."""
    txn.event(res.stack.id, res.name, action, "WARNING", message, traversal=res.stack.traversal)


class Handler(Protocol):
    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome: ...
    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome: ...
    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome: ...


@runtime_checkable
class Checked(Protocol):
    """A handler that follows its own progress: asked while its resource is IN_PROGRESS."""

    async def check(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome: ...


@runtime_checkable
class Composite(Protocol):
    """A handler whose resource makes a nested stack: it may need an update while its properties
    stay the same (the nested template or the environment changed), and a failed one is
    updated in place (its nested stack walks again), not replaced."""

    def changed(self, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> bool: ...


@runtime_checkable
class Replaces(Protocol):
    """A handler that may replace its resource on update: ``replacement`` says why (None: in place).

    It only reads, so the engine's update and the plan of an update (``stack update
    --dry-run``, Heat's update preview) decide with the same code.
    """

    async def replacement(
        self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]
    ) -> str | None: ...


@runtime_checkable
class Signalled(Protocol):
    """A handler that takes signals (Heat's resource signal): a scaling policy adjusts its group."""

    async def signal(self, txn: Txn, res: Res, row: ResourceRow, details: Mapping[str, Any]) -> str: ...


@runtime_checkable
class Suspendable(Protocol):
    """A handler that acts on the stack's SUSPEND and RESUME (others are done at once)."""

    async def suspend(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome: ...
    async def resume(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome: ...
