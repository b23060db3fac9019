"""Where results land: a deployment's on its resource (``settle``), a step's end on its stack.

A leaf of the engine package (it imports nothing from ``control.engine``): signals,
``anneal stack cancel`` and the step's expiry all settle deployments through it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TypeVar

from sqlalchemy import select
from sqlalchemy.orm.util import identity_key

from control.hot import taint
from control.resources import deploy, forget_deployment
from control.store import previous
from control.store.orm import DeploymentRow, ResourceRow, StackRow
from control.txn import Txn

T = TypeVar("T")


async def settle(
    txn: Txn,
    dep: DeploymentRow,
    resources: Mapping[str, ResourceRow | None] | None = None,
    traversals: Mapping[str, int] | None = None,
) -> None:
    """Carry a deployment's result onto its resource and wake its stack.

    *resources* (deployment id -> its resource row, or None for none) and
    *traversals* (stack id -> its traversal) let a caller that settles many
    deployments at once (control/signals/batch.py) load them in one query each.
    """
    if dep.stack_id is None:
        return
    if resources is not None and dep.id in resources:
        row = resources[dep.id]
    else:
        row = await txn.session.scalar(
            select(ResourceRow).where(ResourceRow.stack_id == dep.stack_id, ResourceRow.physical_id == dep.id)
        )
    if row is None or row.status != "IN_PROGRESS":
        txn.kicks.add(dep.stack_id)  # a group member: its group looks on the next step
        return
    # Only the traversal number: loading the stack row would decrypt and decode its whole
    # template (and parameters) once per signal, which made signals O(stack size).
    stack = in_session(txn, StackRow, dep.stack_id)
    if stack is not None:
        traversal: int | None = stack.traversal
    elif traversals is not None and dep.stack_id in traversals:
        traversal = traversals[dep.stack_id]
    else:
        traversal = await txn.session.scalar(select(StackRow.traversal).where(StackRow.id == dep.stack_id))
    traversal = traversal if traversal is not None else row.traversal
    row.status, row.status_reason, row.updated_at = dep.status, dep.status_reason, time.time()
    row.attributes = deploy.attributes(dep)
    txn.event(
        dep.stack_id,
        row.name,
        row.action,
        dep.status,
        dep.status_reason,
        traversal=traversal,
        deployment_id=dep.id,
        generation=dep.generation,
    )
    if row.action == "DELETE" and dep.status == "COMPLETE":
        await forget_deployment(txn, dep)
        await txn.session.delete(row)
    txn.kicks.add(dep.stack_id)


def finish(txn: Txn, stack: StackRow, status: str, reason: str) -> None:
    """End the stack's action as *status* (COMPLETE or FAILED), with its event."""
    stack.status, stack.status_reason, stack.updated_at = status, reason, time.time()
    if status == "COMPLETE":
        previous.clear(stack)  # a later rollback returns here, not further back
    txn.event(stack.id, "", stack.action, status, reason, traversal=stack.traversal)
    if stack.parent_id is not None:
        txn.kicks.add(stack.parent_id)  # a nested stack settled: its resource there looks


def timed_out_reason(dep: DeploymentRow) -> str:
    """ "timed out after N s", with the last output the control plane has for this generation."""
    reason = f"timed out after {dep.timeout:g} s"
    progress = getattr(dep, "progress", None) or {}
    text = str(progress.get("output_tail") or "") if progress.get("generation") == dep.generation else ""
    text = text or f"{taint.masked(dep.stdout) or ''}\n{taint.masked(dep.stderr) or ''}"
    tail = [line for line in text.splitlines() if line.strip()]
    if tail:
        reason += "; last output: " + " | ".join(tail[-3:])[-500:]
    else:
        reason += "; no progress received"
    return reason


def in_session(txn: Txn, cls: type[T], key: str | None) -> T | None:
    """A row already in the session (preloaded or just added), without a query."""
    if not key:
        return None
    found = txn.session.sync_session.identity_map.get(identity_key(cls, key))
    return found if isinstance(found, cls) else None
