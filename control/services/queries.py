"""What operators ask: outputs, events, failures, deployments, servers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from control import hot
from control.documents import seal
from control.engine import stackdef
from control.errors import BadRequestError, NotFoundError
from control.hot import taint
from control.principal import EVERYWHERE, Within
from control.resources import composite_for
from control.resources.group_members import failed_member
from control.resources.provider import HIDDEN as HIDDEN_OUTPUT
from control.runtime import Runtime
from control.services import lookup
from control.services.stacks import MASK, STATE_ONLY, get_stack, load_columns, mask, stack_view
from control.store import names
from control.store.orm import DeploymentRow, EventRow, ResourceRow, ServerRow, StackRow
from control.txn import lock_event_streams

TAIL_LINES = 20
#: How often a long-polled events request looks for new events (any process may write them).
EVENT_POLL = 0.25


async def stack_outputs(
    session: AsyncSession, defs: stackdef.Definitions, ref: str, *, within: Within
) -> list[dict[str, Any]]:
    """The stack's outputs resolved now; a stack with none reads neither its template nor its resources,
    and one with some reads only the resources they name."""
    stack = await get_stack(session, ref, *STATE_ONLY, within=within)
    if stack.outline is not None and not stack.outline.get("outputs"):
        return []  # its outline says none: a big stack's template is not even decoded
    await load_columns(session, stack, ["files", *stackdef.DEFINITION_COLUMNS])
    if not any(isinstance(stack.template, dict) and stack.template.get(k) for k in ("outputs", "Outputs")):
        return []  # none to resolve: a big stack's definition is not parsed, nor its resources loaded
    defn = defs.get(stack)
    named = hot.resources_named(defn.template.outputs.values())
    query = select(ResourceRow).where(ResourceRow.stack_id == stack.id, ResourceRow.current.is_(True))
    if named is not None:
        query = query.where(ResourceRow.name.in_(named))
    ctx = stackdef.StackContext(stack, defn, {r.name: r for r in await session.scalars(query)})
    out = []
    for name, odef in defn.template.outputs.items():
        if not defn.output_active(name) or name.startswith(HIDDEN_OUTPUT):
            continue
        entry: dict[str, Any] = {"output_key": name, "description": odef.description or ""}
        try:
            value = await stackdef.resolve(odef.value, ctx, f"outputs.{name}.value")
            entry["output_value"] = taint.masked(value)
        except hot.TemplateError as e:
            entry["output_value"], entry["output_error"] = None, str(e)
        out.append(entry)
    return out


async def list_stacks(
    session: AsyncSession, nested: bool, project: str | None = None
) -> list[dict[str, Any]]:
    """Top-level stacks (of *project*; None: every project), oldest first; with *nested*, the stacks nested
    in them too."""
    query = select(StackRow).options(*STATE_ONLY).order_by(StackRow.created_at)
    if project is not None:
        query = query.where(StackRow.project == project)
    if not nested:
        query = query.where(StackRow.parent_id.is_(None))
    return [stack_view(s) for s in await session.scalars(query)]


async def nested_stacks(session: AsyncSession, stack_id: str, depth: int) -> dict[str, str]:
    """Stack id -> name of *stack_id*'s nested stacks down to *depth* levels, deleted ones included.

    A deleted nested stack is found through its events, which keep its parent's id.
    """
    found: dict[str, str] = {}
    level = [stack_id]
    for _ in range(max(0, depth)):
        live = await session.execute(select(StackRow.id, StackRow.name).where(StackRow.parent_id.in_(level)))
        gone = await session.execute(
            select(EventRow.stack_id, EventRow.stack_name)
            .where(EventRow.parent_stack_id.in_(level))
            .distinct()
        )
        level = []
        for child_id, name in [*live, *gone]:
            if child_id not in found:
                found[child_id] = name
                level.append(child_id)
        if not level:
            break
    return found


async def stack_events(
    session: AsyncSession,
    ref: str,
    after: int = 0,
    traversal: int | None = None,
    limit: int | None = None,
    nested_depth: int = 0,
    *,
    within: Within,
    resource: str | None = None,
    status: str | None = None,
    since: float | None = None,
    newest: bool = False,
    before: int | None = None,
) -> list[dict[str, Any]]:
    """A stack's events after *after*, oldest first: of one *traversal* only when given, at most *limit*.

    With *newest*, newest first: the last *limit* events (before the id *before*, for the next
    page back), an index range at any depth of a big stack's history.

    With *nested_depth*, the events of its nested stacks that many levels down are merged in
    (the traversal filter applies to the stack's own events). A deleted stack's events stay
    queryable by its name or id. *resource* and *status* keep the events of that resource or
    status (``FAILED``, ``COMPLETE``, ``IN_PROGRESS``) only, *since* those from that moment
    (epoch seconds) on.
    """
    stack_id, name = await _events_of(session, ref, within)
    names = {stack_id: name, **(await nested_stacks(session, stack_id, nested_depth))}
    await lock_event_streams(session, names, shared=False)  # every smaller id committed first
    own = EventRow.stack_id == stack_id
    if traversal is not None:
        own = own & (EventRow.traversal == traversal)
    where = own | EventRow.stack_id.in_([k for k in names if k != stack_id]) if len(names) > 1 else own
    stmt = select(EventRow).where(where, EventRow.id > after)
    stmt = stmt.order_by(EventRow.id.desc() if newest else EventRow.id)
    if before is not None:
        stmt = stmt.where(EventRow.id < before)
    if resource is not None:
        stmt = stmt.where(EventRow.resource_name == resource)
    if status is not None:
        stmt = stmt.where(EventRow.status == status)
    if since is not None:
        stmt = stmt.where(EventRow.timestamp >= since)
    rows = await session.scalars(stmt.limit(limit))
    return [
        {
            "id": e.id,
            "timestamp": e.timestamp,
            "resource_name": e.resource_name or names.get(e.stack_id, name),
            "stack_name": names.get(e.stack_id, e.stack_name),
            "action": e.action,
            "status": e.status,
            "reason": e.reason,
            "deployment_id": e.deployment_id,
            "generation": e.generation,
            "traversal": e.traversal,
        }
        for e in rows
    ]


async def _events_of(session: AsyncSession, ref: str, within: Within) -> tuple[str, str]:
    """(id, name) of the stack *ref* names, or of a deleted one whose events are kept."""
    try:
        stack = await get_stack(session, ref, *STATE_ONLY, within=within)
        return stack.id, stack.name
    except NotFoundError:
        found = (
            await session.execute(
                select(EventRow.stack_id, EventRow.stack_name)
                .where(
                    (EventRow.stack_name == ref) | ((EventRow.stack_id == ref) & (EventRow.stack_name != ""))
                )
                .order_by(EventRow.id.desc())
                .limit(1)
            )
        ).first()
        if found is None:
            raise
        return str(found[0]), str(found[1])


async def wait_events(
    rt: Runtime,
    ref: str,
    after: int,
    wait: float,
    traversal: int | None = None,
    limit: int | None = None,
    nested_depth: int = 0,
    *,
    within: Within,
    resource: str | None = None,
    since: float | None = None,
) -> list[dict[str, Any]]:
    """Events after *after*; with *wait* > 0, hold the request until one arrives (bounded, polled)."""
    deadline = time.monotonic() + wait
    while True:
        async with rt.sessions() as session:
            events = await stack_events(
                session,
                ref,
                after,
                traversal,
                limit,
                nested_depth,
                within=within,
                resource=resource,
                since=since,
            )
        if events or time.monotonic() >= deadline or rt.stopping:
            return events
        await asyncio.sleep(min(EVENT_POLL, max(0.0, deadline - time.monotonic())))


async def stack_resources(
    session: AsyncSession,
    ref: str,
    nested_depth: int = 0,
    limit: int | None = None,
    after: int = 0,
    *,
    within: Within,
) -> list[dict[str, Any]]:
    """The stack's resources, and with *nested_depth* those of its nested stacks that deep; with *limit*,
    at most that many after the resource id *after* (each row gives its ``id``)."""
    stack = await get_stack(session, ref, *STATE_ONLY, within=within)
    names = {stack.id: stack.name, **(await nested_stacks(session, stack.id, nested_depth))}
    stmt = select(ResourceRow).where(ResourceRow.stack_id.in_(list(names)), ResourceRow.id > after)
    rows = await session.scalars(stmt.order_by(ResourceRow.id).limit(limit))
    return [
        {
            "id": r.id,
            "name": r.name,
            "type": r.type,
            "status": f"{r.action}_{r.status}",
            "status_reason": r.status_reason,
            "physical_id": r.physical_id,
            "current": r.current,
            "stack_name": names[r.stack_id],
        }
        for r in rows
    ]


async def stack_failures(session: AsyncSession, ref: str, *, within: Within) -> list[dict[str, Any]]:
    """Each failed deployment (and failed resource) with the tail of its stdout and stderr.

    A failed resource that made a nested stack is shown by the failures inside that stack,
    named by their path (``mid/leaf/leaf_dep``).
    """
    stack = await get_stack(session, ref, *STATE_ONLY, within=within)
    stack_texts = (await seal.stack_texts(session, [stack.id])).get(stack.id, frozenset())
    failures = []
    rows = await session.scalars(
        select(ResourceRow).where(ResourceRow.stack_id == stack.id, ResourceRow.status == "FAILED")
    )
    for r in rows:
        if composite_for(r.type) and r.physical_id:  # it made a nested stack: that stack says why
            child = await session.scalar(select(StackRow.id).where(StackRow.id == r.physical_id))
            inner = await stack_failures(session, child, within=within) if child else []
            if inner:
                failures += [{**f, "resource": f"{r.name}/{f['resource']}"} for f in inner]
                continue
        entry: dict[str, Any] = {
            "resource": r.name,
            "type": r.type,
            "status": f"{r.action}_FAILED",
            "reason": r.status_reason,
        }
        dep_id = failed_member(r) or r.physical_id  # a group names the member that failed it
        dep = await session.get(DeploymentRow, dep_id) if dep_id else None
        if dep is not None:
            secrets = seal.texts_for(dep.item, stack_texts)
            entry.update(
                deployment_id=dep.id,
                server_id=dep.server_id,
                deploy_status_code=dep.status_code,
                deploy_stdout=_tail(shown_text(dep.stdout, secrets)),
                deploy_stderr=_tail(shown_text(dep.stderr, secrets)),
            )
        failures.append(entry)
    return failures


def _tail(text: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(text.splitlines()[-lines:])


async def list_deployments(
    session: AsyncSession, query: Mapping[str, str], project: str | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """Deployments (of *project*; None: every project) by stack, server and status; a stack or server
    of another project is not found. With *limit*, a page in id order after the id ``query["after"]``."""
    stmt = select(DeploymentRow).order_by(DeploymentRow.created_at)
    if limit is not None:  # keyset on the primary key: any page of a million rows costs one index range
        stmt = select(DeploymentRow).order_by(DeploymentRow.id).limit(limit)
        stmt = stmt.where(DeploymentRow.id > query.get("after", ""))
    if project is not None:
        stmt = stmt.where(DeploymentRow.project == project)
    within = EVERYWHERE if project is None else Within(project)
    if query.get("stack"):
        stack = await get_stack(session, query["stack"], *STATE_ONLY, within=within)
        stmt = stmt.where(DeploymentRow.stack_id == stack.id)
    if query.get("server"):
        server = await names.find(session, ServerRow, query["server"], within)
        stmt = stmt.where(DeploymentRow.server_id == server.id)
    if "status" in query:  # given empty, it names no state: refused like any other
        status = query["status"].upper()
        if status not in ("IN_PROGRESS", "COMPLETE", "FAILED"):
            raise BadRequestError("status: one of IN_PROGRESS, COMPLETE, FAILED", where="status")
        stmt = stmt.where(DeploymentRow.status == status)
    found = list(await session.scalars(stmt))
    servers = select(ServerRow.id, ServerRow.name)
    if limit is not None:  # a page names its own servers, not every server (one IN of at most *limit*)
        servers = servers.where(ServerRow.id.in_({d.server_id for d in found}))
    named = {server_id: name for server_id, name in (await session.execute(servers)).all()}
    return [deployment_summary(d, named.get(d.server_id, "")) for d in found]


def deployment_summary(dep: DeploymentRow, server_name: str) -> dict[str, Any]:
    return {
        "id": dep.id,
        "name": dep.name,
        "resource_name": dep.resource_name,
        "server_id": dep.server_id,
        "server_name": server_name,
        "action": dep.action,
        "status": dep.status,
        "status_reason": dep.status_reason,
        "generation": dep.generation,
        "updated_at": dep.updated_at,
        "started_at": dep.started_at,
        "completed_at": dep.completed_at,
    }


async def show_deployment(session: AsyncSession, ref: str, *, within: Within) -> dict[str, Any]:
    """The deployment *ref* names (id, unique id prefix or ``stack/resource``) with its results."""
    dep = await lookup.find_deployment(session, ref, within)
    server = await session.get(ServerRow, dep.server_id)
    stack_texts = await seal.stack_texts(session, [dep.stack_id] if dep.stack_id else [])
    secrets = seal.texts_for(dep.item, stack_texts.get(dep.stack_id or "", ()))
    view = deployment_summary(dep, server.name if server else "")
    item = dep.item or {}
    view.update(
        stack_id=dep.stack_id,
        config_id=dep.config_id,
        derived_config_id=dep.item_id,
        group=item.get("group"),
        hash=dep.hash,
        signal_transport=dep.signal_transport,
        actions=dep.actions,
        timeout=dep.timeout,
        input_values=mask({k: v for k, v in _inputs(item).items() if k != "deploy_signal_id"}, secrets),
        output_values=mask(taint.masked(dep.outputs), secrets),
        deploy_status_code=dep.status_code,
        deploy_stdout=shown_text(dep.stdout, secrets),
        deploy_stderr=shown_text(dep.stderr, secrets),
        progress=mask(dep.progress, secrets) if dep.progress else None,
        attempts=shown_attempts(dep.attempts, secrets),
    )
    return view


def shown_text(value: Any, secrets: frozenset[str]) -> str:
    """What a hook printed, its secret texts masked (all of it when they changed since)."""
    if isinstance(value, taint.Secret):
        text = str(value.value)
        masked = taint.mask_text(text, secrets)
        return masked if masked != text else MASK
    return taint.mask_text(str(value or ""), secrets)


def shown_attempts(attempts: Any, secrets: frozenset[str]) -> list[dict[str, Any]] | None:
    """Each attempt (retry policy) with its stdout and stderr shown as ``shown_text`` shows them."""
    if not attempts:
        return None
    streams = ("stdout", "stderr")
    return [
        {
            k: (shown_text(v, secrets) if k in streams and v is not None else mask(v, secrets))
            for k, v in a.items()
        }
        for a in attempts
    ]


def _inputs(item: Mapping[str, Any]) -> dict[str, Any]:
    """Input values; those declared ``secret`` are masked."""
    return {i["name"]: (MASK if i.get("secret") else i.get("value")) for i in item.get("inputs", [])}
