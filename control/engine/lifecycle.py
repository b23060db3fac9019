"""Stack SUSPEND and RESUME: the engine's walk over resources.

SUSPEND walks dependents first (reverse dependency order), RESUME dependencies first,
as Heat does. Each resource's handler acts if it has ``suspend``/``resume``; a
deployment runs only when it lists the action (Heat §1.6), else it is done at once
and its server is not touched. Resources without the method are done at once.
The operator's request is ``control.services.stacks.change_stack``.
"""

from __future__ import annotations

import time

from control.engine import stackdef
from control.errors import ControlError
from control.resources import DEPLOYMENT_TYPES, Outcome, Res, done, suspender_for
from control.store.orm import ResourceRow, StackRow
from control.txn import Txn

ACTIONS = ("SUSPEND", "RESUME")


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
    handler = suspender_for(row.type)
    res = Res(stack, row.name, row.type)
    try:
        if handler is None:
            outcome = done(row.physical_id)
        elif stack.action == "SUSPEND":
            outcome = await handler.suspend(txn, res, row)
        else:
            outcome = await handler.resume(txn, res, row)
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
