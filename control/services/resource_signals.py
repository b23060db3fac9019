"""Signals to resources, as Heat's resource signal: a scaling policy's URL, or the operator.

A signal acts on one resource of a stack whatever the stack's state (a scaling policy
adjusts its group); the resource's handler says what happened, and that is the
resource's ``SIGNAL COMPLETE`` event, also when nothing changed (a group in its cooldown).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import select

from control.engine import breakpoints
from control.errors import BadRequestError, ConflictError, ForbiddenError, NotFoundError
from control.principal import Within
from control.resources import Res, handler_for
from control.resources.base import Signalled
from control.runtime import Runtime
from control.services.stacks import STATE_ONLY, get_stack
from control.store.orm import ResourceRow
from control.txn import Txn, retried_on_race


@retried_on_race
async def signal_resource(
    rt: Runtime,
    kick: Callable[[str], None],
    stack_ref: str,
    resource: str,
    details: Mapping[str, Any],
    *,
    within: Within,
    sig: str | None = None,
) -> dict[str, Any]:
    """Signal *resource* of the stack; with *sig*, only if it is that resource's URL capability.

    Run again when an engine step wrote the same rows meanwhile (``retried_on_race``)."""
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await get_stack(session, stack_ref, *STATE_ONLY, within=within)
        if stack.action in ("DELETE", "SUSPEND"):  # as Heat: no signal while it goes away or sleeps
            state = f"{stack.action} {stack.status}"
            raise ConflictError(f"stack {stack.name} is {state}: it takes no signals now", where="stack")
        if (
            sig is None and "unset_hook" in details
        ):  # `stack hook clear`: a paused resource may have no row yet
            what = await breakpoints.clear(txn, stack, resource, details["unset_hook"], kick)
            return {"stack": stack.name, "resource": resource, "result": what}
        row = await session.scalar(
            select(ResourceRow).where(
                ResourceRow.stack_id == stack.id, ResourceRow.name == resource, ResourceRow.current.is_(True)
            )
        )
        if row is None:
            raise NotFoundError(f"stack {stack.name} has no resource {resource!r}", where="resource")
        # Bound to the policy's physical id: a replaced or deleted policy's URLs stop working.
        subject = f"{stack.id}:{row.name}:{row.physical_id or ''}"
        if sig is not None and not rt.keys.check_capability("resource", subject, sig):
            raise ForbiddenError("the URL's signature is not this resource's", where="sig")
        handler = handler_for(row.type)
        if not isinstance(handler, Signalled):
            raise BadRequestError(f"resource {row.name} ({row.type}) takes no signals", where="resource")
        what = await handler.signal(txn, Res(stack, row.name, row.type), row, details)
        txn.event(stack.id, row.name, "SIGNAL", "COMPLETE", what, traversal=stack.traversal)
        await txn.commit(kick)
        return {"stack": stack.name, "resource": row.name, "result": what}
