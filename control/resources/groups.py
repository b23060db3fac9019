"""OS::Heat::SoftwareDeploymentGroup and OS::Heat::StructuredDeploymentGroup (Heat §1.7).

A group is one deployment per entry of its ``servers`` map, named by the key (Heat's
nested-stack resource name, so ``deploy_resource_name`` is the key). Members have no
resource rows: the group keeps its plan under ``attributes[STATE]`` (``group_members``)
and the engine asks ``check`` on every step while the group is IN_PROGRESS. Members act in batches:
``batch_create`` on create, ``rolling_update`` on update (``max_batch_size`` members at
a time, ``pause_time`` seconds between batches); without the policy all act at once.
Members whose key left the map are deleted after every other member is done.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from control.errors import BadRequestError
from control.resources import canary, deploy
from control.resources.base import REPLACE, Outcome, Res, done, warn
from control.resources.group_members import (
    STATE,
    aggregate,
    batch_busy,
    expire,
    failure_reason,
    load_members,
    load_plan,
    member_props,
    new_plan,
    own_props,
    read_servers,
    shared_props,
)
from control.resources.software import SoftwareDeployment, forced_skip, forget_deployment
from control.store.orm import DeploymentRow, ResourceRow
from control.txn import Txn

GROUP_TYPES = frozenset({"OS::Heat::SoftwareDeploymentGroup", "OS::Heat::StructuredDeploymentGroup"})


class DeploymentGroup:
    """One member deployment per server; ``structured`` members substitute ``get_input``."""

    def __init__(self, member: SoftwareDeployment) -> None:
        self._member = member

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        self._member.note_transport(txn, res, props)
        keys = sorted(read_servers(props, res))
        state = new_plan(action="CREATE", queue=[["create", k] for k in keys])
        state["batch"] = _policy(res, "batch_create")
        return await self._step(txn, res, props, state, [], str(uuid.uuid4()))

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        old, state = row.properties or {}, load_plan(row)
        members = await load_members(txn, state)
        if await self._replaced_because(txn, res, old, props, members) is not None:
            return REPLACE
        servers = read_servers(props, res)
        # A rollback returns only the members that ran the failed change; the others are left alone.
        settled = at_target(members, props) if res.stack.action == "ROLLBACK" else frozenset()
        queue, leaving = member_queue(members, read_servers(old, res), servers, old, props, settled)
        retiring = dict(state.get("retiring") or {})
        for key in leaving:  # a member moved to another server leaves under a key of its own
            retiring[f"{key}@{members[key].id}" if key in servers else key] = members[key].id
        state.update(
            action="UPDATE", queue=queue, retiring=retiring, running=[], pause_until=None, failed=None
        )
        state["batch"] = _policy(res, "rolling_update")
        state["canary"] = canary.policy(res, len(queue))
        return await self._step(txn, res, props, state, [], row.physical_id or str(uuid.uuid4()))

    async def replacement(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> str | None:
        members = await load_members(txn, load_plan(row))
        return await self._replaced_because(txn, res, row.properties or {}, props, members)

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        state = load_plan(row)
        members = await load_members(txn, state)
        running = []
        for key, dep in sorted(members.items()):
            if res.stack.force_delete and "DELETE" in dep.actions:
                warn(txn, res, f"{key}: {await forced_skip(txn, dep)}", "DELETE")
            elif await self._member.retire(txn, res, dep, own_props(dep, row.properties or {})):
                running.append(key)
                continue
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
        state = load_plan(row)
        members = await load_members(txn, state)
        for dep in members.values():
            await self._member.run(txn, res, dep, own_props(dep, row.properties or {}), action)
        state.update(action=action, queue=[], running=sorted(members), pause_until=None, canary=None)
        return await self._settle(
            txn, res, row.properties or {}, state, list(members.values()), row.physical_id
        )

    async def reapply(self, txn: Txn, res: Res, row: ResourceRow, deps: list[DeploymentRow]) -> None:
        """Run drifted members again (``stack converge``); the group follows them like a batch.

        Batches a failure left in the queue follow afterwards, so the group ends as its
        template asks.
        """
        state = load_plan(row)
        for dep in deps:
            await self._member.reapply(txn, res, dep, own_props(dep, row.properties or {}))
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
        state.update(
            running=sorted(d.resource_name for d in deps), pause_until=None, failed=None, canary=None
        )
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
        if await batch_busy(txn, (row.attributes or {}).get(STATE) or {}):
            return Outcome("IN_PROGRESS", row.physical_id, row.attributes)
        state = load_plan(row)
        members = await load_members(txn, state)
        if state.get("action") == "DELETE":
            return await self._check_delete(txn, res, row, state, members)
        running = [members[k] for k in state.get("running", []) if k in members]
        return await self._settle(txn, res, row.properties or {}, state, running, row.physical_id)

    async def _check_delete(
        self, txn: Txn, res: Res, row: ResourceRow, state: dict[str, Any], members: dict[str, DeploymentRow]
    ) -> Outcome:
        expire(members.values())
        waiting = [k for k, d in members.items() if d.status == "IN_PROGRESS"]
        failed = [k for k, d in members.items() if d.status == "FAILED" and d.action == "DELETE"]
        if waiting:
            return Outcome("IN_PROGRESS", row.physical_id, row.attributes)
        if failed:
            state["failed"] = members[failed[0]].id
            attrs = {**row.attributes, STATE: state}
            return Outcome("FAILED", row.physical_id, attrs, failure_reason(failed[0], members[failed[0]]))
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
        expire(running)
        test = state.get("canary")
        if test and not test.get("passed") and test.get("members") == state.get("running"):
            return await self._judge_canary(txn, res, props, state, running, physical_id)
        for dep in running:
            if dep.status == "FAILED":
                state["failed"] = dep.id
                attrs = await aggregate(txn, state)
                return Outcome("FAILED", physical_id, attrs, failure_reason(dep.resource_name, dep))
        if any(dep.status == "IN_PROGRESS" for dep in running):
            return Outcome("IN_PROGRESS", physical_id, await aggregate(txn, state))
        return await self._step(txn, res, props, state, running, physical_id)

    async def _judge_canary(
        self,
        txn: Txn,
        res: Res,
        props: Mapping[str, Any],
        state: dict[str, Any],
        running: list[DeploymentRow],
        physical_id: str | None,
    ) -> Outcome:
        """Wait for every canary member; then fail the group, or pause and go on with the rollout."""
        if any(dep.status == "IN_PROGRESS" for dep in running):
            return Outcome("IN_PROGRESS", physical_id, await aggregate(txn, state))
        test = state["canary"]
        why = canary.judge(txn, res, test, [(d.resource_name, d.status, d.status_reason) for d in running])
        if why is not None:
            failed = [d for d in running if d.status == "FAILED"]
            state["failed"] = failed[0].id if failed else None
            return Outcome("FAILED", physical_id, await aggregate(txn, state), why)
        if test["pause"] > 0 and state["queue"]:
            state["pause_until"] = time.time() + test["pause"]
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
                    "IN_PROGRESS", physical_id, await aggregate(txn, state), wake_at=state["pause_until"]
                )
            return await self._start_batch(txn, res, props, state, physical_id)
        if state.get("retiring"):
            return await self._retire(txn, res, props, state, physical_id)
        state.update(running=[], pause_until=None)
        return done(physical_id, **await aggregate(txn, state))

    async def _start_batch(
        self, txn: Txn, res: Res, props: Mapping[str, Any], state: dict[str, Any], physical_id: str | None
    ) -> Outcome:
        size = int(state.get("batch", {}).get("max_batch_size") or 0) or len(state["queue"])
        first = state.get("canary")
        if first and not first.get("members"):
            size = first["size"]
        batch, state["queue"] = state["queue"][:size], state["queue"][size:]
        if first and not first.get("members"):
            first["members"] = [k for _, k in batch]
        members = await load_members(txn, state)
        servers = read_servers(props, res)
        running = []
        for op, key in batch:
            mprops = member_props(props, key, servers)
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
                await self._member.retire(txn, res, dep, own_props(dep, props))
            expire([dep])
            if dep.action == "DELETE" and dep.status == "IN_PROGRESS":
                waiting[label] = dep_id
            elif dep.action == "DELETE" and dep.status == "FAILED":
                state["failed"] = dep.id
                return Outcome("FAILED", physical_id, await aggregate(txn, state), failure_reason(key, dep))
            else:
                await forget_deployment(txn, dep)
                if state["members"].get(key) == dep_id:
                    state["members"].pop(key)
        state["retiring"], state["running"] = waiting, []
        if waiting:
            return Outcome("IN_PROGRESS", physical_id, await aggregate(txn, state))
        return done(physical_id, **await aggregate(txn, state))

    async def _replaced_because(
        self,
        txn: Txn,
        res: Res,
        old: Mapping[str, Any],
        props: Mapping[str, Any],
        members: Mapping[str, DeploymentRow],
    ) -> str | None:
        """Why the whole group is replaced (blue/green): a new name, transport or replace_on_change value."""
        if props.get("signal_transport") != old.get("signal_transport"):
            return f"signal_transport {old.get('signal_transport')} -> {props.get('signal_transport')}"
        servers = read_servers(props, res)
        for key, dep in members.items():
            source = await self._member.source(txn, res, member_props(props, key, servers))
            values = dict(props.get("input_values") or {})
            if source.name != dep.name:
                return f"member {key}: name {dep.name} -> {source.name}"
            changed = deploy.replace_on_change_differs(dep, source, values)
            if changed:
                return f"member {key}: replace_on_change input {changed} changed"
        return None


def member_queue(
    members: Mapping[str, Any],
    old_servers: Mapping[str, str],
    servers: Mapping[str, str],
    old: Mapping[str, Any],
    props: Mapping[str, Any],
    settled: frozenset[str] = frozenset(),
) -> tuple[list[list[str]], list[str]]:
    """What an update does to each member: the ``[op, key]`` queue, and the members that leave.

    A member on a new server is created anew (its old deployment leaves); members run
    UPDATE only when the group's shared properties changed, and not when *settled* (they
    have what is asked already).
    """
    queue, leaving = [], []
    changed = shared_props(props) != shared_props(old)
    for key in sorted(servers):
        if key in members and servers[key] == old_servers.get(key):
            if changed and key not in settled:
                queue.append(["update", key])  # unchanged members do not run again
        else:
            queue.append(["create", key])
            if key in members:
                leaving.append(key)
    leaving += sorted(set(members) - set(servers))
    return queue, leaving


def at_target(members: Mapping[str, DeploymentRow], props: Mapping[str, Any]) -> frozenset[str]:
    """The members COMPLETE with the config and input values *props* give every member."""
    config, values = props.get("config") or None, dict(props.get("input_values") or {})
    return frozenset(
        key
        for key, dep in members.items()
        if dep.status == "COMPLETE" and dep.config_id == config and dep.input_values == values
    )


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
