"""A deployment group's bookkeeping: its plan, its members' properties and rows, their attributes.

The group keeps its plan under ``attributes[STATE]``: the action, the member deployment
ids by key, the queue of ``[op, key]`` still to start, the running batch, the members
retiring, the pause and the batch policy. Members have no resource rows of their own.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import case, func, select

from control.errors import BadRequestError
from control.resources import deploy
from control.resources.base import Res
from control.store.orm import DeploymentRow, ResourceRow
from control.txn import Txn

STATE = "anneal:group"


def load_plan(row: ResourceRow) -> dict[str, Any]:
    """The group's plan, copied: it is changed and stored anew, never edited in place."""
    return copy.deepcopy(row.attributes.get(STATE)) or new_plan()


def failed_member(row: ResourceRow) -> str | None:
    """The id of the member deployment that failed the group, if one did."""
    failed = (row.attributes or {}).get(STATE, {}).get("failed")
    return str(failed) if failed else None


def new_plan(**given: Any) -> dict[str, Any]:
    """A plan with nothing to do yet, but for the fields *given*."""
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


def read_servers(props: Mapping[str, Any], res: Res) -> dict[str, str]:
    """The group's ``servers`` map, member key -> server id."""
    servers = props.get("servers") or {}
    if not isinstance(servers, Mapping):
        raise BadRequestError(
            "servers: expected a map of name -> server", where=f"{res.where}.properties.servers"
        )
    return {str(k): str(v) for k, v in servers.items()}


def shared_props(props: Mapping[str, Any]) -> dict[str, Any]:
    """What every member gets of the group's properties: all but ``servers``."""
    return {k: v for k, v in props.items() if k != "servers"}


def member_props(props: Mapping[str, Any], key: str, servers: Mapping[str, str]) -> dict[str, Any]:
    """Member *key*'s properties; *servers* is ``read_servers(props, res)``, read once per group
    step (per member, it made a step over a group of 5,000 members quadratic)."""
    return {**shared_props(props), "server": servers.get(key)}


def own_props(dep: DeploymentRow, props: Mapping[str, Any]) -> dict[str, Any]:
    """A member's own config and inputs with the group's other *props*, for actions on it alone."""
    return {
        **shared_props(props),
        "server": dep.server_id,
        "config": dep.config_id,
        "input_values": dep.input_values,
    }


async def load_members(txn: Txn, state: Mapping[str, Any]) -> dict[str, DeploymentRow]:
    """The plan's member deployment rows by key (those still stored)."""
    ids = dict(state.get("members") or {})
    if not ids:
        return {}
    rows = await txn.session.scalars(select(DeploymentRow).where(DeploymentRow.id.in_(list(ids.values()))))
    by_id = {r.id: r for r in rows}
    return {k: by_id[i] for k, i in ids.items() if i in by_id}


#: Member ids per counting query (bounds the IN list).
BUSY_CHUNK = 5000


async def batch_busy(txn: Txn, state: Mapping[str, Any]) -> bool:
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


async def aggregate(txn: Txn, state: dict[str, Any]) -> dict[str, Any]:
    """Heat's group attributes: deploy_stdouts/stderrs/status_codes (and the singular names) and per-output maps."""
    members = await load_members(txn, state)
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
    # Heat answers any other attribute name with a map per member, the singular names included.
    for plural in ("deploy_stdouts", "deploy_stderrs", "deploy_status_codes"):
        out[plural[:-1]] = dict(out[plural])
    out[STATE] = state
    return out


def expire(deps: Any) -> None:
    """Fail members past their deadline (the engine times out only deployments with rows)."""
    now = time.time()
    for dep in deps:
        if dep.status == "IN_PROGRESS" and (dep.started_at or now) + dep.timeout <= now:
            dep.status, dep.status_reason = "FAILED", f"timed out after {dep.timeout:g} s"
            dep.completed_at = dep.updated_at = now


def failure_reason(key: str, dep: DeploymentRow) -> str:
    """The group's status reason when member *key* failed it."""
    return f"member {key} on server {dep.server_id}: {dep.status_reason}"
