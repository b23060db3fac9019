"""Stack SUSPEND and RESUME: the operator's request, and the engine's walk over resources.

SUSPEND walks dependents first (reverse dependency order), RESUME dependencies first,
as Heat does. Each resource's handler acts if it has ``suspend``/``resume``; a
deployment runs only when it lists the action (Heat §1.6), else it is done at once
and its server is not touched. Resources without the method are done at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from control.engine import stackdef
from control.errors import ConflictError, ControlError
from control.resources import DEPLOYMENT_TYPES, HANDLERS, Outcome, Res, done
from control.runtime import Runtime
from control.services.stacks import get_stack, stack_view
from control.store.orm import ResourceRow, StackRow
from control.txn import Txn

ACTIONS = ("SUSPEND", "RESUME")


async def change_stack(rt: Runtime, kick: Callable[[str], None], name: str, action: str) -> dict[str, Any]:
    """Start suspending or resuming a stack; refused while it is busy or in the wrong state."""
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await get_stack(session, name)
        state = f"{stack.action}_{stack.status}"
        if stack.status == "IN_PROGRESS":
            raise ConflictError(f"stack {name} is {state}; wait for it to finish", where="name")
        if stack.action == "DELETE":
            raise ConflictError(f"stack {name} is being deleted", where="name")
        if action == "RESUME" and stack.action != "SUSPEND":
            raise ConflictError(f"stack {name} is {state}; only a suspended stack resumes", where="name")
        if action == "SUSPEND" and state == "SUSPEND_COMPLETE":
            raise ConflictError(f"stack {name} is already suspended", where="name")
        stack.traversal += 1
        stack.action, stack.status = action, "IN_PROGRESS"
        stack.status_reason = f"Stack {action} started"
        stack.updated_at = time.time()
        txn.event(stack.id, "", action, "IN_PROGRESS", stack.status_reason, traversal=stack.traversal)
        txn.kicks.add(stack.id)
        await txn.commit(kick)
        return stack_view(stack)


async def advance(txn: Txn, stack: StackRow, rows: list[ResourceRow], defn: stackdef.Definition) -> bool:
    """Act on every resource whose turn has come; True once all have done the stack's action."""
    current = {r.name: r for r in rows if r.current}
    names = [n for n in defn.order() if n in current]
    if stack.action == "SUSPEND":
        waits = {n: [m for m in names if n in defn.requires(m)] for n in names}
        names.reverse()
    else:
        waits = {n: defn.requires(n) for n in names}
    pending = False
    for name in names:
        row = current[name]
        if _done(row, stack):
            continue
        pending = True
        if row.traversal == stack.traversal and row.status == "IN_PROGRESS":
            continue
        if all(d not in current or _done(current[d], stack) for d in waits[name]):
            await _act(txn, stack, row)
    return not pending


async def _act(txn: Txn, stack: StackRow, row: ResourceRow) -> None:
    method = getattr(HANDLERS.get(row.type), stack.action.lower(), None)
    res = Res(stack, row.name, row.type)
    try:
        outcome: Outcome = await method(txn, res, row) if method else done(row.physical_id)
    except ControlError as e:
        reason = f"{e.where}: {e.message}" if e.where else e.message
        outcome = Outcome("FAILED", row.physical_id, reason=reason)
    row.action, row.status, row.status_reason = stack.action, outcome.status, outcome.reason
    if outcome.attributes:
        row.attributes = dict(outcome.attributes)
    row.traversal, row.updated_at = stack.traversal, time.time()
    txn.event(
        stack.id,
        row.name,
        stack.action,
        outcome.status,
        outcome.reason or ("state changed" if outcome.status != "IN_PROGRESS" else ""),
        traversal=stack.traversal,
        deployment_id=row.physical_id if row.type in DEPLOYMENT_TYPES else None,
        generation=outcome.generation,
    )
    if outcome.status != "IN_PROGRESS":
        txn.kicks.add(stack.id)


def _done(row: ResourceRow, stack: StackRow) -> bool:
    return row.traversal == stack.traversal and row.action == stack.action and row.status == "COMPLETE"
