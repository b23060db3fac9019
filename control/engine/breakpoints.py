"""Breakpoints (Heat's ``hooks``): a resource the environment marks waits before it acts until cleared.

``resource_registry: {resources: {NAME or glob: {hooks: [pre-create, pre-update]}}}``, Heat's
layout (a nested stack's resources under its resource's entry). Before such a resource is
created, or updated in a stack update (changed or not, as in Heat), the walk records Heat's
event "CREATE paused until Hook pre-create is cleared" and leaves that resource, and what
depends on it, alone; the stack stays IN_PROGRESS and the rest of the walk goes on. A resource
signal ``{"unset_hook": "pre-create"}`` (`openstack stack hook clear`, or `anneal stack
resource signal`) records "Hook pre-create is cleared" and wakes the stack.

The event log is the state: both events carry the stack's traversal, so every stack action
pauses afresh, nothing else is stored, and `openstack stack hook poll` reads the very events
Heat's engine would write.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import ColumnElement, select
from sqlalchemy.ext.asyncio import AsyncSession

from control import hot
from control.errors import BadRequestError
from control.store.orm import EventRow, ResourceRow, StackRow
from control.txn import Txn


def paused_reason(action: str, hook: str) -> str:
    return f"{action} paused until Hook {hook} is cleared"


def cleared_reason(hook: str) -> str:
    return f"Hook {hook} is cleared"


async def holds(txn: Txn, stack: StackRow, env: hot.Environment, name: str, row: ResourceRow | None) -> bool:
    """True while a breakpoint keeps resource *name* from acting in this traversal (first time: its event)."""
    action = "CREATE" if row is None or row.action == "INIT" else "UPDATE"
    hook = f"pre-{action.lower()}"
    if hook not in hot.hooks_for(env, name):
        return False
    paused = paused_reason(action, hook)
    seen = await _seen(txn.session, stack, name, [paused, cleared_reason(hook)])
    if cleared_reason(hook) in seen:
        return False
    if paused not in seen:
        before = ("INIT", "COMPLETE") if row is None or action == "CREATE" else (row.action, row.status)
        txn.event(stack.id, name, *before, paused, traversal=stack.traversal)
    return True


async def clear(txn: Txn, stack: StackRow, name: str, hook: object, kick: Callable[[str], None]) -> str:
    """Release resource *name* from breakpoint *hook* in the stack's current traversal."""
    if hook not in hot.HOOKS:
        raise BadRequestError(
            f"unset_hook: invalid hook type {hook!r} for {name}; known: {', '.join(hot.HOOKS)}",
            where="unset_hook",
        )
    assert isinstance(hook, str)
    paused = [paused_reason(action, hook) for action in ("CREATE", "UPDATE")]
    found = await txn.session.execute(
        select(EventRow.reason, EventRow.action, EventRow.status).where(
            *_this(stack, name, [*paused, cleared_reason(hook)])
        )
    )
    events = {reason: (action, status) for reason, action, status in found}
    waiting = next((events[p] for p in paused if p in events), None)
    if waiting is None or cleared_reason(hook) in events:
        raise BadRequestError(
            f"the {hook} hook is not pending on {name} in stack {stack.name}", where="unset_hook"
        )
    txn.event(stack.id, name, *waiting, cleared_reason(hook), traversal=stack.traversal)
    txn.kicks.add(stack.id)
    await txn.commit(kick)
    return cleared_reason(hook)


async def _seen(session: AsyncSession, stack: StackRow, name: str, reasons: list[str]) -> set[str]:
    return set(await session.scalars(select(EventRow.reason).where(*_this(stack, name, reasons))))


def _this(stack: StackRow, name: str, reasons: list[str]) -> tuple[ColumnElement[bool], ...]:
    """The events of resource *name* in the stack's current traversal with one of *reasons*."""
    return (
        EventRow.stack_id == stack.id,
        EventRow.resource_name == name,
        EventRow.traversal == stack.traversal,
        EventRow.reason.in_(reasons),
    )
