"""A stack's resources as Heat's API asks about them: list with filters, show, metadata, signal, mark unhealthy."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from control import hot
from control.documents.seal import secret_strings
from control.engine import breakpoints
from control.errors import BadRequestError, ConflictError, NotFoundError
from control.principal import EVERYWHERE
from control.resources import DEPLOYMENT_TYPES, handler_for
from control.resources.base import Signalled
from control.runtime import Runtime
from control.services import agents, resource_signals
from control.services.stacks import STATE_ONLY, mask
from control.store.orm import DeploymentRow, ResourceRow, StackRow
from control.txn import Txn, retried_on_race

#: Filters Heat's resource list takes, and the row field each compares (heat/api/openstack/v1/resources.py).
RESOURCE_FILTERS = ("type", "status", "name", "action", "id", "physical_resource_id")
SERVER_TYPES = hot.SERVER_TYPES


async def identified_stack(session: AsyncSession, name: str, stack_id: str, *options: Any) -> StackRow:
    """The stack a Heat path names by name and id; 404 unless both match (as Heat's identifier check)."""
    stack = await session.get(StackRow, stack_id, options=options)
    if stack is None or name not in (stack.name, stack.id):
        raise NotFoundError(f"The Stack ({name}/{stack_id}) could not be found.", where="stack")
    return stack


def resource_row(row: ResourceRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "type": row.type,
        "action": row.action,
        "status": row.status,
        "status_reason": row.status_reason,
        "physical_id": row.physical_id,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "requires": list(row.requires or []),
    }


async def current_resources(session: AsyncSession, stack_id: str) -> list[ResourceRow]:
    return list(
        await session.scalars(
            select(ResourceRow)
            .where(ResourceRow.stack_id == stack_id, ResourceRow.current.is_(True))
            .order_by(ResourceRow.id)
        )
    )


def _matches(row: ResourceRow, filters: Mapping[str, Sequence[str]]) -> bool:
    fields = {
        "type": [row.type],
        "status": [row.status, f"{row.action}_{row.status}"],
        "name": [row.name],
        "action": [row.action],
        "id": [str(row.id)],
        "physical_resource_id": [row.physical_id or ""],
    }
    return all(any(v in fields[key] for v in wanted) for key, wanted in filters.items() if wanted)


async def list_resources(
    session: AsyncSession, stack: StackRow, filters: Mapping[str, Sequence[str]]
) -> list[dict[str, Any]]:
    """The stack's current resources matching every filter (any of a filter's values), each with ``required_by``."""
    rows = await current_resources(session, stack.id)
    required_by: dict[str, list[str]] = {}
    for row in rows:
        for need in row.requires or []:
            required_by.setdefault(str(need), []).append(row.name)
    found = []
    for row in rows:
        if _matches(row, filters):
            found.append({**resource_row(row), "required_by": required_by.get(row.name, [])})
    return found


async def _children(session: AsyncSession, stack_id: str) -> dict[str, dict[str, str]]:
    """The stacks nested in *stack_id* by id: their name and id (what a resource's ``nested`` link names)."""
    rows = await session.execute(select(StackRow.id, StackRow.name).where(StackRow.parent_id == stack_id))
    return {i: {"name": n, "id": i} for i, n in rows}


async def resource_tree(
    session: AsyncSession, stack: StackRow, filters: Mapping[str, Sequence[str]], depth: int
) -> list[tuple[StackRow, dict[str, Any]]]:
    """The stack's resources (list_resources) with their stack, each with ``nested`` (its nested stack's
    name and id, or None) and, *depth* levels down, followed by that stack's own (Heat's iter_resources)."""
    children = await _children(session, stack.id)
    found: list[tuple[StackRow, dict[str, Any]]] = []
    for row in await list_resources(session, stack, filters):
        row["nested"] = children.get(row["physical_id"] or "")
        found.append((stack, row))
        child = await session.get(StackRow, row["nested"]["id"]) if row["nested"] and depth > 0 else None
        if child is not None:
            found.extend(await resource_tree(session, child, filters, depth - 1))
    return found


async def _resource(session: AsyncSession, stack: StackRow, name: str) -> ResourceRow:
    row = await session.scalar(
        select(ResourceRow).where(
            ResourceRow.stack_id == stack.id, ResourceRow.name == name, ResourceRow.current.is_(True)
        )
    )
    if row is None:
        raise NotFoundError(f"The Resource ({name}) could not be found.", where="resource")
    return row


async def show_resource(session: AsyncSession, stack: StackRow, name: str) -> dict[str, Any]:
    """One resource with its attributes (secrets masked) and the template's description of it."""
    rows = await current_resources(session, stack.id)
    row = next((r for r in rows if r.name == name), None)
    if row is None:
        raise NotFoundError(f"The Resource ({name}) could not be found.", where="resource")
    secrets = await secret_strings(session, stack.id)
    definition = hot.resource_body(stack.template, name)
    return {
        **resource_row(row),
        "required_by": [r.name for r in rows if name in (r.requires or [])],
        "nested": (await _children(session, stack.id)).get(row.physical_id or ""),
        "attributes": mask(dict(row.attributes or {}), secrets),
        "description": str(definition.get("description") or "") if isinstance(definition, Mapping) else "",
    }


async def resource_metadata(session: AsyncSession, stack: StackRow, name: str) -> dict[str, Any]:
    """Heat's resource metadata: a server's is its deployments (what POLL_SERVER_HEAT reads), else the template's."""
    row = await _resource(session, stack, name)
    if row.type in SERVER_TYPES and row.physical_id:
        return {"deployments": await server_items(session, row.physical_id)}
    definition = hot.resource_body(stack.template, name)
    found = definition.get("metadata") if isinstance(definition, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else {}


async def server_items(session: AsyncSession, server_id: str) -> list[dict[str, Any]]:
    """The derived configs on a server, sorted by name as in its document; secret inputs masked."""
    rows = await session.scalars(
        select(DeploymentRow).where(DeploymentRow.server_id == server_id, DeploymentRow.item.is_not(None))
    )
    items = []
    for dep in rows:
        item = dict(dep.item)
        item["inputs"] = [
            {**i, "value": "******"} if i.get("secret") else i for i in item.get("inputs") or []
        ]
        items.append(mask(item, await secret_strings(session, dep.stack_id)))
    return sorted(items, key=lambda i: str(i.get("name")))


async def signal_resource(
    rt: Runtime, kick: Callable[[str], None], stack_name: str, stack_id: str, name: str, body: Any
) -> dict[str, Any]:
    """Heat's resource signal with the admin token: a deployment's body is its result for the current
    generation; a resource that takes signals of its own (a scaling policy) acts on the body."""
    async with rt.sessions() as session:
        stack = await identified_stack(session, stack_name, stack_id, *STATE_ONLY)
        if isinstance(body, Mapping) and "unset_hook" in body:  # `openstack stack hook clear`
            what = await breakpoints.clear(Txn(session, rt), stack, name, body["unset_hook"], kick)
            return {"stack": stack.name, "resource": name, "result": what}
        row, own = await _resource(session, stack, name), stack.id
        takes_own = row.type not in DEPLOYMENT_TYPES and isinstance(handler_for(row.type), Signalled)
        if not takes_own:
            dep_id, generation = await _waiting_deployment(session, row)
    if takes_own:
        if body is not None and not isinstance(body, Mapping):  # heatclient sends null without --data
            raise BadRequestError("body: a JSON object, or none", where="body")
        return await resource_signals.signal_resource(rt, kick, own, name, body or {}, within=EVERYWHERE)
    # The admin token stands for the signal URL: the same credential check, the same batch.
    sig = rt.keys.signal_signature(dep_id, generation)
    return await agents.record_signal(rt, kick, dep_id, generation, body or {}, sig=sig, server_id=None)


async def _waiting_deployment(session: AsyncSession, row: ResourceRow) -> tuple[str, int]:
    """The id and generation of the deployment resource *row* stands for, which must be waiting for its signal."""
    if row.type not in DEPLOYMENT_TYPES or not row.physical_id:
        raise BadRequestError(
            f"Signal resource during {row.action} is not supported: {row.name} is a {row.type}; "
            "only software deployments and resources that take signals (scaling policies) take them",
            where="resource",
        )
    dep = await session.get(DeploymentRow, row.physical_id)
    if dep is None or dep.status != "IN_PROGRESS":
        raise ConflictError(
            f"resource {row.name} is not waiting for a signal (its deployment is "
            f"{'gone' if dep is None else dep.action + '_' + dep.status})",
            where="resource",
        )
    return dep.id, dep.generation


@retried_on_race
async def mark_unhealthy(
    rt: Runtime, stack_name: str, stack_id: str, name: str, unhealthy: bool, reason: str
) -> None:
    """Heat's mark-unhealthy: CHECK_FAILED, so the next update replaces the resource (false: CHECK_COMPLETE)."""
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await identified_stack(session, stack_name, stack_id, *STATE_ONLY)
        if stack.status == "IN_PROGRESS":
            raise ConflictError(
                f"stack {stack.name} is {stack.action}_IN_PROGRESS; mark resources when it settles",
                where="stack",
            )
        row = await _resource(session, stack, name)
        if unhealthy:
            row.action, row.status = "CHECK", "FAILED"
            row.status_reason = reason or "marked unhealthy"
        elif (row.action, row.status) == ("CHECK", "FAILED"):
            row.status, row.status_reason = "COMPLETE", reason or "marked healthy"
        else:
            return
        row.updated_at = time.time()
        txn.event(stack.id, row.name, row.action, row.status, row.status_reason, traversal=stack.traversal)
        await txn.commit()
