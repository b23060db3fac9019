"""Removing a server the operator no longer wants: refused while a stack uses it, unless forced."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from control.engine.settle import settle
from control.errors import ConflictError
from control.principal import Within
from control.resources.servers import SERVER_TYPES, remove_server
from control.runtime import Runtime
from control.settings import Settings
from control.store import names
from control.store.orm import DeploymentRow, ResourceRow, ServerRow, StackRow
from control.txn import Txn, retried_on_race


@retried_on_race
async def delete_server(
    rt: Runtime, kick: Callable[[str], None], ref: str, force: bool, *, within: Within
) -> dict[str, Any]:
    """Delete the server *ref* names; ConflictError naming the stacks that use it unless *force*.

    Forced, its deployments still in progress fail (their stacks move on) and the stacks
    keep their other deployments on it: deleting such a stack later runs nothing there.
    """
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        server = await names.find(session, ServerRow, ref, within)
        users = await _stacks_using(session, server)
        loose = await session.scalar(
            select(DeploymentRow.id).where(
                DeploymentRow.server_id == server.id, DeploymentRow.stack_id.is_(None)
            )
        )
        if (users or loose) and not force:
            named = [f"stack {n}" for n in users] + (["deployments outside stacks"] if loose else [])
            raise ConflictError(
                f"server {server.name} is used by {', '.join(named)}: delete those first, "
                "or release it with --force (`anneal server delete --force`)",
                where="server",
            )
        failed = await _fail_running(txn, server)
        view = {"id": server.id, "name": server.name, "released_from": users, "deployments_failed": failed}
        await remove_server(txn, server)
        await txn.commit(kick)
        return view


async def _stacks_using(session: AsyncSession, server: ServerRow) -> list[str]:
    """Names of the stacks that deploy to *server*, made it, or hold it as a server resource."""
    ids = set(
        await session.scalars(
            select(DeploymentRow.stack_id).where(
                DeploymentRow.server_id == server.id, DeploymentRow.stack_id.is_not(None)
            )
        )
    )
    ids |= set(
        await session.scalars(
            select(ResourceRow.stack_id).where(
                ResourceRow.physical_id == server.id, ResourceRow.type.in_(SERVER_TYPES)
            )
        )
    )
    if server.owner_stack_id:
        ids.add(server.owner_stack_id)
    names = await session.scalars(select(StackRow.name).where(StackRow.id.in_(ids)).order_by(StackRow.name))
    return list(names)


async def _fail_running(txn: Txn, server: ServerRow) -> int:
    """Fail the deployments still waiting for *server*'s agent; their resources and stacks see it."""
    running = await txn.session.scalars(
        select(DeploymentRow).where(
            DeploymentRow.server_id == server.id, DeploymentRow.status == "IN_PROGRESS"
        )
    )
    now, count = time.time(), 0
    for dep in running:
        dep.status = "FAILED"
        dep.status_reason = f"server {server.name} deleted by `anneal server delete --force`"
        dep.completed_at = dep.updated_at = now
        await settle(txn, dep)
        count += 1
    return count


async def get_server(session: AsyncSession, ref: str, *, within: Within) -> ServerRow:
    """The server named (where *within* resolves names) or with id *ref*."""
    return await names.find(session, ServerRow, ref, within)


def server_view(server: ServerRow, settings: Settings) -> dict[str, Any]:
    silent = server.last_seen is None or time.time() - server.last_seen > settings.heartbeat_lease
    return {
        "id": server.id,
        "name": server.name,
        "status": server.status,
        "agent": "silent"
        if silent and server.status == "ENROLLED"
        else ("alive" if server.status == "ENROLLED" else "not enrolled"),
        "serial": server.serial,
        "transport": server.transport,
        "last_seen": server.last_seen,
        "owner_stack_id": server.owner_stack_id,
        "created_at": server.created_at,
        "enrolled_at": server.enrolled_at,
        "agent_status": server.agent_status,
        "rebuilds": server.rebuilds or [],
        # Handed to another control plane (`stack abandon --to`): its URL; delete it here once moved.
        "handed_over_to": (server.handover or {}).get("url"),
    }
