"""`stack check` and `stack converge`: compare what agents report with the database, re-apply drift.

Each agent sends a ledger report with its heartbeat (agent/orders.py): for every
item of its current document, the deployment, generation, ledger state and
status code. A stack's deployment has drifted when

- ``missing``: the database has it COMPLETE on the server, the agent reported after
  that and its ledger does not hold that generation (or holds it unfinished);
- ``failed``: the agent ran that generation and it failed, or the deployment is FAILED;
- ``drifted``: the newest check on the host (services/drift.py) found it no longer true;
- ``silent``: its server's agent has not been heard from within the heartbeat lease
  (nothing can be said about the server; converge leaves it alone).

``converge`` gives every ``missing``, ``failed`` or ``drifted`` deployment a new generation (the
same action again, with a new derived config id), starting a CONVERGE traversal of
the stack; unchanged resources are reused by the engine without touching servers.
A deployment group's drifted members are re-applied the same way and the group
follows them as a batch (then any batches a failure left unstarted).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import select

from control.engine.settle import finish
from control.principal import Within
from control.resources import DEPLOYMENT_TYPES, HANDLERS, Res, deploy
from control.resources.group_members import STATE
from control.resources.groups import GROUP_TYPES, DeploymentGroup
from control.resources.software import SoftwareDeployment
from control.runtime import Runtime
from control.services import drift as hostcheck
from control.services.stacks import get_stack, stack_view
from control.store.orm import DeploymentRow, ResourceRow, ServerRow, StackRow
from control.txn import Txn, retried_on_race

FINISHED = ("finished", "signalled")


async def check(rt: Runtime, ref: str, *, within: Within) -> dict[str, Any]:
    async with rt.sessions() as session:
        stack = await get_stack(session, ref, within=within)
        return await _check(rt, session, stack)


async def _check(rt: Runtime, session: Any, stack: StackRow) -> dict[str, Any]:
    deps = list(await session.scalars(select(DeploymentRow).where(DeploymentRow.stack_id == stack.id)))
    server_ids = sorted({d.server_id for d in deps})
    servers = {s.id: s for s in await session.scalars(select(ServerRow).where(ServerRow.id.in_(server_ids)))}
    now = time.time()
    drift: list[dict[str, Any]] = []
    silent = []
    for sid in server_ids:
        server = servers.get(sid)
        if server is None or server.last_seen is None or now - server.last_seen > rt.settings.heartbeat_lease:
            silent.append(sid)
            seen = None if server is None or server.last_seen is None else round(now - server.last_seen, 1)
            drift.append(
                {
                    "kind": "silent",
                    "server": server.name if server else sid,
                    "server_id": sid,
                    "reason": "never heard from"
                    if seen is None
                    else f"silent for {seen} s (heartbeat lease {rt.settings.heartbeat_lease:g} s)",
                }
            )
    checked = 0
    hosts: list[dict[str, Any]] = []
    for dep in deps:
        if dep.server_id in silent or dep.item_id is None:
            continue
        checked += 1
        server = servers[dep.server_id]
        report = (server.agent_status or {}).get("ledger")
        reported_at = float((server.agent_status or {}).get("reported_at") or 0)
        found = report.get(dep.item_id) if isinstance(report, dict) else None
        base = {
            "deployment_id": dep.id,
            "resource": dep.resource_name,
            "server": server.name,
            "generation": dep.generation,
            "status": dep.status,
        }
        host = hostcheck.host_view(dep, server.agent_kind)
        if host is not None:
            hosts.append({**base, **host})
        if dep.status == "FAILED":
            drift.append({**base, "kind": "failed", "reason": dep.status_reason})
        elif host is not None and host["state"] == "drifted":
            drift.append(
                {**base, "kind": "drifted", "reason": host.get("reason", ""), "diff": host.get("diff", "")}
            )
        elif dep.status == "COMPLETE" and report is not None and reported_at > (dep.completed_at or 0):
            if found is None or found[2] not in FINISHED:
                state = "absent" if found is None else found[2]
                drift.append({**base, "kind": "missing", "reason": f"agent ledger: {state}"})
            elif found[3] not in (0, None):
                drift.append({**base, "kind": "failed", "reason": f"agent ledger: exit status {found[3]}"})
        elif report is None:
            drift.append({**base, "kind": "unknown", "reason": "the agent sends no ledger report"})
    return {
        "stack": stack.name,
        "status": f"{stack.action}_{stack.status}",
        "deployments_checked": checked,
        "servers": len(server_ids),
        "drift": drift,
        "in_sync": not drift,
        # The answers of checks on the host (services/drift.py): in_sync, drifted, unknown or pending.
        "host": hosts,
        "pending": sum(1 for h in hosts if h["state"] == "pending"),
    }


@retried_on_race
async def check_stack(rt: Runtime, ref: str, *, within: Within, started: bool = False) -> dict[str, Any]:
    """Heat's CHECK action: the stack ends CHECK_COMPLETE, or CHECK_FAILED naming each drift.

    *started*: the checks on the host were asked and the stack is CHECK_IN_PROGRESS
    (services/drift.py's start_check); a server that did not answer is not drift. A
    deployment resource whose server missed, failed or drifted from its generation is left
    CHECK_FAILED, so the next update replaces it (runs it again), as Heat does.
    """
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await get_stack(session, ref, within=within)
        if started and (stack.action, stack.status) != ("CHECK", "IN_PROGRESS"):
            return stack_view(stack)  # superseded (an update) or finished already
        if not started:
            hostcheck.settled(stack, "check")
        report = await _check(rt, session, stack)
        problems = [d for d in report["drift"] if d["kind"] != "unknown"]
        if not started:
            stack.traversal += 1
            stack.action, stack.status, stack.updated_at = "CHECK", "IN_PROGRESS", time.time()
            txn.event(stack.id, "", "CHECK", "IN_PROGRESS", "Stack CHECK started", traversal=stack.traversal)
        rows = {
            r.physical_id: r for r in await session.scalars(_current(stack)) if r.type in DEPLOYMENT_TYPES
        }
        for drift in problems:
            row = rows.get(drift.get("deployment_id"))
            if row is not None:
                row.action, row.status, row.status_reason = (
                    "CHECK",
                    "FAILED",
                    f"{drift['kind']}: {drift['reason']}",
                )
                _touch(row, stack)
                txn.event(stack.id, row.name, "CHECK", "FAILED", row.status_reason, traversal=stack.traversal)
        if problems:
            where = "; ".join(
                f"{d.get('resource') or d.get('server')}: {d['kind']} ({d['reason']})" for d in problems
            )
            finish(txn, stack, "FAILED", f"Stack CHECK failed: {where}")
        else:
            finish(txn, stack, "COMPLETE", "Stack CHECK completed successfully")
        await txn.commit()
        return {**stack_view(stack), "check": report}


def _current(stack: StackRow) -> Any:
    return select(ResourceRow).where(ResourceRow.stack_id == stack.id, ResourceRow.current.is_(True))


@retried_on_race
async def converge(rt: Runtime, kick: Callable[[str], None], ref: str, *, within: Within) -> dict[str, Any]:
    """Re-apply every missing or failed deployment as a new generation (a CONVERGE traversal)."""
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await get_stack(session, ref, within=within)
        hostcheck.settled(stack, "converge")
        report = await _check(rt, session, stack)
        wanted = {
            d["deployment_id"] for d in report["drift"] if d["kind"] in ("missing", "failed", "drifted")
        }
        stack.traversal += 1
        stack.action, stack.status, stack.updated_at = "CONVERGE", "IN_PROGRESS", time.time()
        deploy.start_deadline(rt.settings, stack, stack.updated_at)
        stack.status_reason = f"Stack CONVERGE started: {len(wanted)} deployment(s) to re-apply"
        txn.event(stack.id, "", "CONVERGE", "IN_PROGRESS", stack.status_reason, traversal=stack.traversal)
        rows = list(
            await session.scalars(
                select(ResourceRow).where(ResourceRow.stack_id == stack.id, ResourceRow.current.is_(True))
            )
        )
        owner = _owners(rows)
        members: dict[str, list[DeploymentRow]] = {}
        for dep in await session.scalars(select(DeploymentRow).where(DeploymentRow.id.in_(sorted(wanted)))):
            row = owner.get(dep.id)
            if row is None:
                continue
            if row.physical_id != dep.id:  # a member of a deployment group
                members.setdefault(row.name, []).append(dep)
                continue
            handler = HANDLERS[row.type]
            assert isinstance(handler, SoftwareDeployment)
            await handler.reapply(txn, Res(stack, row.name, row.type), dep, row.properties or {})
            row.action, row.status, row.status_reason = dep.action, dep.status, dep.status_reason
            _touch(row, stack)
            txn.event(
                stack.id,
                row.name,
                dep.action,
                dep.status,
                "re-applied by converge",
                traversal=stack.traversal,
                deployment_id=dep.id,
                generation=dep.generation,
            )
        for row in rows:
            if row.name in members:
                group = HANDLERS[row.type]
                assert isinstance(group, DeploymentGroup)
                await group.reapply(txn, Res(stack, row.name, row.type), row, members[row.name])
                _touch(row, stack)
        txn.kicks.add(stack.id)
        await txn.commit(kick)
        view = stack_view(stack)
        view["reapplied"] = sorted(wanted)
        return view


def _owners(rows: list[ResourceRow]) -> dict[str, ResourceRow]:
    """Deployment id -> the resource that owns it: a deployment resource, or a group for its members."""
    owner: dict[str, ResourceRow] = {}
    for row in rows:
        if row.type in DEPLOYMENT_TYPES and row.physical_id:
            owner[row.physical_id] = row
        elif row.type in GROUP_TYPES:
            for dep_id in ((row.attributes or {}).get(STATE) or {}).get("members", {}).values():
                owner[str(dep_id)] = row
    return owner


def _touch(row: ResourceRow, stack: StackRow) -> None:
    row.traversal, row.updated_at = stack.traversal, time.time()
