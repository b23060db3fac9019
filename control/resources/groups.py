"""OS::Heat::SoftwareDeploymentGroup and OS::Heat::StructuredDeploymentGroup (Heat §1.7).

A group is one deployment per entry of its ``servers`` map, named by the key (Heat's
nested-stack resource name, so ``deploy_resource_name`` is the key). Members have no
resource rows: the group keeps its plan under ``attributes[STATE]`` and the engine
asks ``check`` on every step while the group is IN_PROGRESS. Members act in batches:
``batch_create`` on create, ``rolling_update`` on update (``max_batch_size`` members at
a time, ``pause_time`` seconds between batches); without the policy all act at once.
Members whose key left the map are deleted after every other member is done.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import case, func, select

from control.errors import BadRequestError
from control.resources import deploy
from control.resources.base import REPLACE, Outcome, Res, done
from control.resources.software import SoftwareDeployment, forget_deployment
from control.store.orm import DeploymentRow, ResourceRow
from control.txn import Txn

STATE = "anneal:group"
GROUP_TYPES = frozenset({"OS::Heat::SoftwareDeploymentGroup", "OS::Heat::StructuredDeploymentGroup"})


class DeploymentGroup:
    """One member deployment per server; ``structured`` members substitute ``get_input``."""

    def __init__(self, member: SoftwareDeployment) -> None:
        self._member = member

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        keys = sorted(_servers(props, res))
        state = _state(action="CREATE", queue=[["create", k] for k in keys])
        state["batch"] = _policy(res, "batch_create")
        return await self._step(txn, res, props, state, [], str(uuid.uuid4()))

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        old, state = row.properties or {}, _load(row)
        members = await _members(txn, state)
        if await self._replaces(txn, res, old, props, members):
            return REPLACE
        servers, old_servers = _servers(props, res), _servers(old, res)
        queue, retiring = [], dict(state.get("retiring") or {})
        changed = _shared(props) != _shared(old)
        for key in sorted(servers):
            if key in members and servers[key] == old_servers.get(key):
                if changed:
                    queue.append(["update", key])  # unchanged members do not run again
            else:
                queue.append(["create", key])
                if key in members:
                    retiring[f"{key}@{members[key].id}"] = members[key].id
        for key in sorted(set(members) - set(servers)):
            retiring[key] = members[key].id
        state.update(action="UPDATE", queue=queue, retiring=retiring, running=[], pause_until=None)
        state["batch"] = _policy(res, "rolling_update")
        return await self._step(txn, res, props, state, [], row.physical_id or str(uuid.uuid4()))

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        state = _load(row)
        members = await _members(txn, state)
        running = []
        for key, dep in sorted(members.items()):
            if await self._member.retire(txn, res, dep, _own_props(dep, row.properties or {})):
                running.append(key)
            else:
                await forget_deployment(txn, dep)
                state["members"].pop(key, None)
        if not running:
            return done()
        state.update(action="DELETE", queue=[], running=running)
        row.attributes = {**row.attributes, STATE: state}
        return Outcome("IN_PROGRESS", row.physical_id, row.attributes)

    async def suspend(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        return await self._lifecycle(txn, res, row, "SUSPEND")

    async def resume(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        return await self._lifecycle(txn, res, row, "RESUME")

    async def _lifecycle(self, txn: Txn, res: Res, row: ResourceRow, action: str) -> Outcome:
        state = _load(row)
        members = await _members(txn, state)
        for dep in members.values():
            await self._member.run(txn, res, dep, _own_props(dep, row.properties or {}), action)
        state.update(action=action, queue=[], running=sorted(members), pause_until=None)
        return await self._settle(
            txn, res, row.properties or {}, state, list(members.values()), row.physical_id
        )

    async def reapply(self, txn: Txn, res: Res, row: ResourceRow, deps: list[DeploymentRow]) -> None:
        """Run drifted members again (``stack converge``); the group follows them like a batch.

        Batches a failure left in the queue follow afterwards, so the group ends as its
        template asks.
        """
        state = _load(row)
        for dep in deps:
            await self._member.reapply(txn, res, dep, _own_props(dep, row.properties or {}))
            txn.event(
                res.stack.id,
                res.name,
                dep.action,
                dep.status,
                f"member {dep.resource_name}: re-applied by converge",
                traversal=res.stack.traversal,
                deployment_id=dep.id,
                generation=dep.generation,
            )
        state.update(running=sorted(d.resource_name for d in deps), pause_until=None, failed=None)
        row.attributes = {**row.attributes, STATE: state}
        row.action = deps[0].action if len({d.action for d in deps}) == 1 else "UPDATE"
        row.status, row.status_reason = "IN_PROGRESS", "re-applied by converge"

    async def check(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        """Called each engine step while IN_PROGRESS: follow the batch, start the next one.

        While every member of the running batch still runs (none failed or past its
        deadline) there is nothing to do, and that is found by counting, without loading
        the members: a stack's steps come with its signal batches, so loading them each
        step made a group of 5,000 members cost O(members) per batch of signals. The
        group's aggregated attributes are brought up to date when its batch ends.
        """
        if await _batch_busy(txn, (row.attributes or {}).get(STATE) or {}):
            return Outcome("IN_PROGRESS", row.physical_id, row.attributes)
        state = _load(row)
        members = await _members(txn, state)
        if state.get("action") == "DELETE":
            return await self._check_delete(txn, res, row, state, members)
        running = [members[k] for k in state.get("running", []) if k in members]
        return await self._settle(txn, res, row.properties or {}, state, running, row.physical_id)

    async def _check_delete(
        self, txn: Txn, res: Res, row: ResourceRow, state: dict[str, Any], members: dict[str, DeploymentRow]
    ) -> Outcome:
        _expire(members.values())
        waiting = [k for k, d in members.items() if d.status == "IN_PROGRESS"]
        failed = [k for k, d in members.items() if d.status == "FAILED" and d.action == "DELETE"]
        if waiting:
            return Outcome("IN_PROGRESS", row.physical_id, row.attributes)
        if failed:
            state["failed"] = members[failed[0]].id
            attrs = {**row.attributes, STATE: state}
            return Outcome("FAILED", row.physical_id, attrs, _failure(failed[0], members[failed[0]]))
        for key, dep in members.items():
            await forget_deployment(txn, dep)
            state["members"].pop(key, None)
        row.attributes = {STATE: state}
        return done(row.physical_id, **row.attributes)

    async def _settle(
        self,
        txn: Txn,
        res: Res,
        props: Mapping[str, Any],
        state: dict[str, Any],
        running: list[DeploymentRow],
        physical_id: str | None,
    ) -> Outcome:
        """The group's outcome once the running batch is looked at; starts the next batch."""
        _expire(running)
        for dep in running:
            if dep.status == "FAILED":
                state["failed"] = dep.id
                attrs = await _aggregate(txn, state)
                return Outcome("FAILED", physical_id, attrs, _failure(dep.resource_name, dep))
        if any(dep.status == "IN_PROGRESS" for dep in running):
            return Outcome("IN_PROGRESS", physical_id, await _aggregate(txn, state))
        return await self._step(txn, res, props, state, running, physical_id)

    async def _step(
        self,
        txn: Txn,
        res: Res,
        props: Mapping[str, Any],
        state: dict[str, Any],
        finished: list[DeploymentRow],
        physical_id: str | None,
    ) -> Outcome:
        """Start the next batch (after the pause), or retire removed members, or finish."""
        now = time.time()
        if state["queue"]:
            pause = float(state.get("batch", {}).get("pause_time") or 0)
            if state.get("running") and pause > 0 and state.get("pause_until") is None:
                last = max((d.completed_at or now) for d in finished) if finished else now
                state["pause_until"] = last + pause
            if state.get("pause_until") and now < state["pause_until"]:
                return Outcome(
                    "IN_PROGRESS", physical_id, await _aggregate(txn, state), wake_at=state["pause_until"]
                )
            return await self._start_batch(txn, res, props, state, physical_id)
        if state.get("retiring"):
            return await self._retire(txn, res, props, state, physical_id)
        state.update(running=[], pause_until=None)
        return done(physical_id, **await _aggregate(txn, state))

    async def _start_batch(
        self, txn: Txn, res: Res, props: Mapping[str, Any], state: dict[str, Any], physical_id: str | None
    ) -> Outcome:
        size = int(state.get("batch", {}).get("max_batch_size") or 0) or len(state["queue"])
        batch, state["queue"] = state["queue"][:size], state["queue"][size:]
        members = await _members(txn, state)
        servers = _servers(props, res)
        running = []
        for op, key in batch:
            mprops = _member_props(props, key, servers)
            if op == "update" and key in members:
                dep = members[key]
                # same server (else the op is "create"): the new props stand in for the old
                if not await self._member.revise(txn, res, dep, mprops, mprops):
                    dep = await self._member.start(txn, res, mprops, key)
                    state["retiring"][f"{key}@{members[key].id}"] = members[key].id
            else:
                dep = await self._member.start(txn, res, mprops, key)
            state["members"][key] = dep.id
            running.append(dep)
            txn.event(
                res.stack.id,
                res.name,
                dep.action if dep.status == "IN_PROGRESS" else state["action"],
                dep.status,
                f"member {key}: {dep.status_reason}",
                traversal=res.stack.traversal,
                deployment_id=dep.id,
                generation=dep.generation,
            )
        state.update(running=[k for _, k in batch], pause_until=None)
        return await self._settle(txn, res, props, state, running, physical_id)

    async def _retire(
        self, txn: Txn, res: Res, props: Mapping[str, Any], state: dict[str, Any], physical_id: str | None
    ) -> Outcome:
        """Members that left the map (or were replaced): DELETE runs if listed, then they go."""
        waiting: dict[str, str] = {}
        for label, dep_id in sorted(state["retiring"].items()):
            dep = await txn.get(DeploymentRow, dep_id)
            if dep is None:
                continue
            key = label.split("@", 1)[0]
            if dep.action != "DELETE":
                await self._member.retire(txn, res, dep, _own_props(dep, props))
            _expire([dep])
            if dep.action == "DELETE" and dep.status == "IN_PROGRESS":
                waiting[label] = dep_id
            elif dep.action == "DELETE" and dep.status == "FAILED":
                state["failed"] = dep.id
                return Outcome("FAILED", physical_id, await _aggregate(txn, state), _failure(key, dep))
            else:
                await forget_deployment(txn, dep)
                if state["members"].get(key) == dep_id:
                    state["members"].pop(key)
        state["retiring"], state["running"] = waiting, []
        if waiting:
            return Outcome("IN_PROGRESS", physical_id, await _aggregate(txn, state))
        return done(physical_id, **await _aggregate(txn, state))

    async def _replaces(
        self,
        txn: Txn,
        res: Res,
        old: Mapping[str, Any],
        props: Mapping[str, Any],
        members: Mapping[str, DeploymentRow],
    ) -> bool:
        """The whole group is replaced (blue/green) on a new name, transport or replace_on_change value."""
        if props.get("signal_transport") != old.get("signal_transport"):
            return True
        servers = _servers(props, res)
        for key, dep in members.items():
            source = await self._member.source(txn, res, _member_props(props, key, servers))
            values = dict(props.get("input_values") or {})
            if source.name != dep.name or deploy.replace_on_change_differs(dep, source, values):
                return True
        return False


def _load(row: ResourceRow) -> dict[str, Any]:
    """The group's plan, copied: it is changed and stored anew, never edited in place."""
    return copy.deepcopy(row.attributes.get(STATE)) or _state()


def failed_member(row: ResourceRow) -> str | None:
    """The id of the member deployment that failed the group, if one did."""
    failed = (row.attributes or {}).get(STATE, {}).get("failed")
    return str(failed) if failed else None


def _state(**given: Any) -> dict[str, Any]:
    state: dict[str, Any] = {
        "action": "CREATE",
        "members": {},
        "queue": [],
        "running": [],
        "retiring": {},
        "pause_until": None,
        "batch": {},
    }
    state.update(given)
    return state


def _servers(props: Mapping[str, Any], res: Res) -> dict[str, str]:
    servers = props.get("servers") or {}
    if not isinstance(servers, Mapping):
        raise BadRequestError(
            "servers: expected a map of name -> server", where=f"{res.where}.properties.servers"
        )
    return {str(k): str(v) for k, v in servers.items()}


def _shared(props: Mapping[str, Any]) -> dict[str, Any]:
    """What every member gets of the group's properties: all but ``servers``."""
    return {k: v for k, v in props.items() if k != "servers"}


def _member_props(props: Mapping[str, Any], key: str, servers: Mapping[str, str]) -> dict[str, Any]:
    """Member *key*'s properties; *servers* is ``_servers(props, res)``, read once per group
    step (per member, it made a step over a group of 5,000 members quadratic)."""
    return {**_shared(props), "server": servers.get(key)}


def _own_props(dep: DeploymentRow, props: Mapping[str, Any]) -> dict[str, Any]:
    """A member's own config and inputs with the group's other *props*, for actions on it alone."""
    return {
        **_shared(props),
        "server": dep.server_id,
        "config": dep.config_id,
        "input_values": dep.input_values,
    }


def _policy(res: Res, name: str) -> dict[str, Any]:
    """The group's ``update_policy.<name>`` as written (Heat's defaults: batches of 1, no pause)."""
    policy = res.update_policy.get(name)
    if policy is None:
        return {}
    where = f"{res.where}.update_policy.{name}"
    try:
        size, pause = int(policy.get("max_batch_size", 1)), float(policy.get("pause_time", 0))
    except (TypeError, ValueError):
        raise BadRequestError("max_batch_size and pause_time must be numbers", where=where) from None
    if size < 1 or pause < 0:
        raise BadRequestError("max_batch_size must be at least 1 and pause_time not negative", where=where)
    return {"max_batch_size": size, "pause_time": pause}


async def _members(txn: Txn, state: Mapping[str, Any]) -> dict[str, DeploymentRow]:
    ids = dict(state.get("members") or {})
    if not ids:
        return {}
    rows = await txn.session.scalars(select(DeploymentRow).where(DeploymentRow.id.in_(list(ids.values()))))
    by_id = {r.id: r for r in rows}
    return {k: by_id[i] for k, i in ids.items() if i in by_id}


#: Member ids per counting query (bounds the IN list).
BUSY_CHUNK = 5000


async def _batch_busy(txn: Txn, state: Mapping[str, Any]) -> bool:
    """Whether the running batch's members all still run: some IN_PROGRESS, none FAILED, none past its deadline."""
    if state.get("action") == "DELETE":
        return False
    members = state.get("members") or {}
    ids = [members[k] for k in state.get("running") or [] if k in members]
    running = failed = 0
    deadline: float | None = None
    now = time.time()
    busy = DeploymentRow.status == "IN_PROGRESS"
    for start in range(0, len(ids), BUSY_CHUNK):
        counted = await txn.session.execute(
            select(
                func.sum(case((busy, 1), else_=0)),
                func.sum(case((DeploymentRow.status == "FAILED", 1), else_=0)),
                func.min(case((busy, func.coalesce(DeploymentRow.started_at, now) + DeploymentRow.timeout))),
            ).where(DeploymentRow.id.in_(ids[start : start + BUSY_CHUNK]))
        )
        chunk_running, chunk_failed, chunk_deadline = counted.one()
        running, failed = running + (chunk_running or 0), failed + (chunk_failed or 0)
        if chunk_deadline is not None:
            deadline = chunk_deadline if deadline is None else min(deadline, chunk_deadline)
    return running > 0 and failed == 0 and (deadline is None or deadline > now)


async def _aggregate(txn: Txn, state: dict[str, Any]) -> dict[str, Any]:
    """Heat's group attributes: deploy_stdouts/stderrs/status_codes and per-output maps."""
    members = await _members(txn, state)
    out: dict[str, Any] = {"deploy_stdouts": {}, "deploy_stderrs": {}, "deploy_status_codes": {}}
    names: set[str] = set()
    for dep in members.values():
        names |= {o["name"] for o in (dep.item or {}).get("outputs", [])} | set(dep.outputs or {})
    for key, dep in sorted(members.items()):
        attrs = deploy.attributes(dep)
        out["deploy_stdouts"][key] = attrs["deploy_stdout"]
        out["deploy_stderrs"][key] = attrs["deploy_stderr"]
        out["deploy_status_codes"][key] = attrs["deploy_status_code"]
        for name in names:
            out.setdefault(name, {})[key] = (dep.outputs or {}).get(name)
    out[STATE] = state
    return out


def _expire(deps: Any) -> None:
    """Fail members past their deadline (the engine times out only deployments with rows)."""
    now = time.time()
    for dep in deps:
        if dep.status == "IN_PROGRESS" and (dep.started_at or now) + dep.timeout <= now:
            dep.status, dep.status_reason = "FAILED", f"timed out after {dep.timeout:g} s"
            dep.completed_at = dep.updated_at = now


def _failure(key: str, dep: DeploymentRow) -> str:
    return f"member {key} on server {dep.server_id}: {dep.status_reason}"
