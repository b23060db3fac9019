"""`anneal stack delete --force`: a stack whose servers never come back is deleted all the same.

Every stack of the tree is marked, so DELETE configs not yet started are skipped when the
engine reaches them (resources/software.py); those already waiting for a silent agent are
settled here as skipped. Each skip is a WARNING event naming the server.
"""

from __future__ import annotations

import time

from sqlalchemy import select, update

from control.engine.settle import settle
from control.resources.software import forced_skip
from control.store.orm import DeploymentRow, StackRow
from control.txn import Txn


async def skip_running(txn: Txn, stack: StackRow) -> None:
    """Mark *stack*'s nested stacks forced too and settle its tree's running DELETE configs as skipped."""
    traversals = {stack.id: stack.traversal}
    level = [stack.id]
    while level:
        found = (
            await txn.session.execute(
                select(StackRow.id, StackRow.traversal).where(StackRow.parent_id.in_(level))
            )
        ).all()
        traversals.update((sid, traversal) for sid, traversal in found)
        level = [sid for sid, _ in found]
    nested = [sid for sid in traversals if sid != stack.id]
    if nested:
        await txn.session.execute(
            update(StackRow)
            .where(StackRow.id.in_(nested))
            .values(force_delete=True, row_version=StackRow.row_version + 1)
        )
    running = await txn.session.scalars(
        select(DeploymentRow).where(
            DeploymentRow.stack_id.in_(list(traversals)),
            DeploymentRow.status == "IN_PROGRESS",
            DeploymentRow.action == "DELETE",
        )
    )
    now = time.time()
    for dep in list(running):
        reason = await forced_skip(txn, dep)
        assert dep.stack_id is not None
        txn.event(
            dep.stack_id, dep.resource_name, "DELETE", "WARNING", reason, traversal=traversals[dep.stack_id]
        )
        dep.status, dep.status_reason = "COMPLETE", reason
        dep.completed_at = dep.updated_at = now
        txn.publish.add(dep.server_id)
        await settle(txn, dep, traversals=traversals)
