"""Heat's stack timeout: a stack action still running at its deadline fails "Timed out".

The deadline is a column of the stack row, set when the action starts from its timeout_mins, else
the operator's ``--stack-timeout`` (Heat's stack_action_timeout; ``resources.deploy.start_deadline``),
so every process, and one restarted, steps it the same. It bounds a create, update, rollback,
delete, suspend, resume and converge: every action that runs deployments, as Heat's convergence
engine bounds each traversal (a CHECK runs none and bounds its own wait for answers).
At the deadline the step stops what the action still runs as `anneal stack cancel` does
(``stop_running``: deployments failed and marked ``stop`` in their servers' documents), and
so for every nested stack in progress under it; then the stack fails with the reason Heat's
convergence engine gives, "Timed out", and a failed create or update rolls back when its
rollback is on. A nested stack's own deadline fails it, and so its parent resource.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import select

from control.engine.rollback import start_rollback
from control.engine.settle import finish, settle
from control.resources import deploy
from control.store.orm import DeploymentRow, ResourceRow, StackRow
from control.txn import Txn

#: Heat's status_reason of a stack whose action ran past its timeout (its convergence engine's).
TIMED_OUT = "Timed out"
#: The actions a stack timeout bounds: those that run deployments.
ACTIONS = ("CREATE", "UPDATE", "ROLLBACK", "DELETE", "SUSPEND", "RESUME", "CONVERGE")


def deadline_of(stack: StackRow) -> float | None:
    """When the stack's running action times out (None: it has no deadline, or is not running one)."""
    if stack.status != "IN_PROGRESS" or stack.action not in ACTIONS:
        return None
    return stack.deadline


def passed(stack: StackRow, now: float | None = None) -> bool:
    """True when the stack's running action is past its deadline."""
    deadline = deadline_of(stack)
    return deadline is not None and deadline <= (time.time() if now is None else now)


async def stop_running(txn: Txn, stack: StackRow, why: Callable[[DeploymentRow], str]) -> None:
    """Fail the stack's deployments in progress with *why*; their agents stop the hooks."""
    now = time.time()
    deps = await txn.session.scalars(
        select(DeploymentRow).where(DeploymentRow.stack_id == stack.id, DeploymentRow.status == "IN_PROGRESS")
    )
    for dep in deps:
        # FAILED with no status code: the server's document marks the generation `stop`.
        dep.status, dep.status_reason = "FAILED", why(dep)
        dep.completed_at = dep.updated_at = now
        txn.publish.add(dep.server_id)
        await settle(txn, dep)


async def time_out(txn: Txn, stack: StackRow) -> bool:
    """Fail the stack's action at its deadline; True when it is done, False while its rollback runs."""
    minutes = deploy.stack_minutes(txn.runtime.settings, stack)
    of = f" of {minutes} min" if minutes else ""  # (none: --stack-timeout 0 since the action began)
    todo = [stack]
    while todo:
        current = todo.pop()
        await _stop(txn, current, f"{TIMED_OUT}: stack {stack.name} ran past its timeout{of}")
        if current is not stack:
            finish(txn, current, "FAILED", TIMED_OUT)
        todo += await txn.session.scalars(
            select(StackRow).where(StackRow.parent_id == current.id, StackRow.status == "IN_PROGRESS")
        )
    rollback = stack.rollback and stack.action in ("CREATE", "UPDATE")
    finish(txn, stack, "FAILED", TIMED_OUT)
    if not rollback:
        return True
    rows = await txn.session.scalars(
        select(ResourceRow).where(ResourceRow.stack_id == stack.id, ResourceRow.current.is_(True))
    )
    await start_rollback(txn, stack, list(rows), TIMED_OUT)
    return False


async def _stop(txn: Txn, stack: StackRow, reason: str) -> None:
    """Stop the stack's deployments, then fail its other resources in progress, each with an event."""
    await stop_running(txn, stack, lambda dep: f"{reason} (generation {dep.generation})")
    rows = await txn.session.scalars(
        select(ResourceRow).where(ResourceRow.stack_id == stack.id, ResourceRow.status == "IN_PROGRESS")
    )
    now = time.time()
    for row in rows:
        row.status, row.status_reason, row.updated_at = "FAILED", reason, now
        txn.event(stack.id, row.name, row.action, "FAILED", reason, traversal=stack.traversal)


def nearest(a: float | None, b: float | None) -> float | None:
    """The nearer of two deadlines (None: none)."""
    return b if a is None else a if b is None else min(a, b)
