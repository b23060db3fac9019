"""The "only waiting" shortcut: a step that would change nothing is answered cheaply.

Its invariant: a stack only waits when each of its resources is either done in
this traversal or IN_PROGRESS waiting for its signal (not one whose handler
checks its own progress), at least one waits, and no deployment's deadline has
passed. Then a step changes nothing (``only_waiting``), and a step needs none of
what handlers look up (``may_act``). In doubt, the full step runs.
"""

from __future__ import annotations

import time

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from control.engine import lifecycle, stackdef
from control.engine.light import Row, done
from control.resources import checker_for
from control.store.orm import DeploymentRow, ResourceRow, StackRow


async def only_waiting(
    session: AsyncSession, defs: stackdef.Definitions, stack_id: str
) -> tuple[bool, float | None]:
    """(True, nearest deadline) when every resource still to do waits for its signal.

    Then a step would change nothing, so it is answered from two aggregate queries
    that decrypt nothing, instead of loading and decoding every row of the stack:
    while 50,000 deployments report, most steps are this one. Anything else
    (a resource to start, one done or failed, a deadline passed, a group, a
    delete, a stack definition not yet parsed in this process) gives (False, None)
    and the full step runs.
    """
    found = (
        await session.execute(
            select(
                StackRow.action, StackRow.status, StackRow.traversal, StackRow.version, StackRow.deadline
            ).where(StackRow.id == stack_id)
        )
    ).first()
    if found is None:
        return False, None
    action, status, traversal, version, stack_deadline = found
    defn = defs.cached(stack_id, version)
    if status != "IN_PROGRESS" or action == "DELETE" or action in lifecycle.ACTIONS or defn is None:
        return False, None
    columns = (ResourceRow.status, ResourceRow.current, ResourceRow.traversal, ResourceRow.type)
    groups = await session.execute(
        select(*columns, func.count()).where(ResourceRow.stack_id == stack_id).group_by(*columns)
    )
    counted = [(r[0], r[1], r[2] == traversal, r[3], r[4]) for r in groups]
    if not all_waiting(counted, len(defn.template.resources)):
        return False, None
    nearest = await nearest_deadline(session, stack_id)
    if stack_deadline is not None:  # the stack's own (Heat's timeout_mins: engine/timeouts.py)
        nearest = stack_deadline if nearest is None else min(nearest, stack_deadline)
    if nearest is not None and nearest <= time.time():
        return False, None  # a deployment or the stack timed out: the full step fails it
    return True, nearest


async def nearest_deadline(session: AsyncSession, stack_id: str) -> float | None:
    """The nearest deadline of the stack's deployments in progress (one aggregate query)."""
    return (await nearest_deadlines(session, [stack_id])).get(stack_id)


async def nearest_deadlines(session: AsyncSession, stack_ids: list[str]) -> dict[str, float]:
    """The nearest deadline of each stack's deployments in progress, in one aggregate query."""
    now = time.time()
    nearest = func.min(func.coalesce(DeploymentRow.started_at, now) + DeploymentRow.timeout)
    found = await session.execute(
        select(DeploymentRow.stack_id, nearest)
        .where(DeploymentRow.stack_id.in_(stack_ids), DeploymentRow.status == "IN_PROGRESS")
        .group_by(DeploymentRow.stack_id)
    )
    return {stack_id: float(at) for stack_id, at in found if stack_id is not None and at is not None}


#: ``Txn.ahead`` key of a stack's deployments in progress read ahead (``deadlines``).
DEADLINES = "deadlines"


async def deadlines(
    session: AsyncSession, stack_ids: list[str]
) -> dict[str, list[tuple[str, float | None, float]]]:
    """(id, started_at, timeout) of each stack's deployments in progress: no item decoded."""
    columns = (DeploymentRow.stack_id, DeploymentRow.id, DeploymentRow.started_at, DeploymentRow.timeout)
    found = await session.execute(
        select(*columns).where(DeploymentRow.stack_id.in_(stack_ids), DeploymentRow.status == "IN_PROGRESS")
    )
    out: dict[str, list[tuple[str, float | None, float]]] = {i: [] for i in stack_ids}
    for stack_id, dep_id, started_at, timeout in found:
        out.setdefault(str(stack_id), []).append((dep_id, started_at, timeout))
    return out


def may_act(stack: StackRow, rows: list[Row], defined: int) -> bool:
    """False when every resource is done in this traversal or waiting for its signal."""
    if stack.action == "DELETE" or stack.action in lifecycle.ACTIONS:
        return True
    return (
        any(not r.current or (r.status != "IN_PROGRESS" and not done(r, stack.traversal)) for r in rows)
        or len(rows) < defined
    )


def all_waiting(groups: list[tuple[str, bool, bool, str, int]], expected: int) -> bool:
    """Over (status, current, in this traversal, type, count) groups of a stack's resources:
    True when at least one waits for its signal and every other one is done."""
    total = waiting = 0
    for status, current, this_traversal, type_name, count in groups:
        total += count
        # A handler that follows its own progress (groups, nested stacks) is asked on every step
        # while its resource is IN_PROGRESS, so such a resource is never merely waiting.
        if not current or (status == "IN_PROGRESS" and checker_for(type_name) is not None):
            return False
        if status == "IN_PROGRESS":
            waiting += count
        elif not (status == "COMPLETE" and this_traversal):
            return False  # failed, or to start or update in this traversal
    return waiting > 0 and total >= expected
