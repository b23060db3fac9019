"""The plan of an update: what it would create, replace, re-run and delete, per server, and which
inputs change, without writing anything (`anneal stack update --dry-run`, Heat's update preview).

The engine's own code decides: each resource is resolved by the engine's Actor and judged by
`resources/changes.py` and its handler's ``replacement``, inside a transaction that is never
committed. A resource the update creates or replaces is not known yet: what others read of it
is shown as ``<name.attribute: known after the update>``, so a dependent that reads it (the
frontend of a blue/green backend) is listed as re-run with that input.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from control import hot
from control.engine import stackdef
from control.engine.act import Actor, error_reason
from control.errors import ControlError
from control.hot import taint
from control.principal import Within
from control.resources import DEPLOYMENT_TYPES, Res, changes, deploy
from control.resources.group_members import load_members, load_plan, read_servers
from control.resources.groups import GROUP_TYPES, member_queue
from control.resources.software import DEFAULT_ACTIONS, SoftwareDeployment, effective_actions
from control.runtime import Runtime
from control.services.stack_request import check_options, parse_request, validated_request
from control.services.stack_resources import current_resources
from control.services.stacks import merged_request
from control.store.orm import DeploymentRow, ResourceRow, StackRow
from control.txn import Txn

#: What expressions read of a resource the update makes anew (Pending, Made), naming it.
PENDING = re.compile(r"<([^<>.:\s]+)[^<>]*: known after the update>")
FindStack = Callable[[AsyncSession], Awaitable[StackRow]]


@dataclass
class Entry:
    """One resource in the plan."""

    name: str
    type: str
    change: changes.Change
    row: ResourceRow | None = None
    server: str | None = None
    runs: list[str] = field(default_factory=list)
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    members: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Plan:
    stack: StackRow
    parameters: dict[str, dict[str, Any]]
    entries: list[Entry]
    warnings: list[str]


class Pending(Mapping[str, Any]):
    """The attributes of a resource the update makes anew: each one known only after it runs."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getitem__(self, key: str) -> str:
        return f"<{self.name}.{key}: known after the update>"

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


@dataclass(frozen=True)
class Made:
    """A resource the update creates or replaces, as expressions read it (stackdef.ResourceView)."""

    type: str
    physical_id: str
    attributes: Mapping[str, Any]


async def plan_update(rt: Runtime, body: Mapping[str, Any], find: FindStack) -> Plan:
    """The plan of the update *body* asks of the stack *find* loads; nothing is written."""
    given = parse_request(body, rt.settings.max_template_bytes, template_optional=bool(body.get("existing")))
    check_options(body)
    async with rt.sessions() as session:
        stack = await find(session)
        req = merged_request(stack, body, given)
        nesting = hot.Nesting(stack.nested_depth, rt.settings.max_nested_depth)
        defn, warnings = await validated_request(
            rt.settings, req, stack_name=stack.name, stack_id=stack.id, nesting=nesting
        )
        rows = {r.name: r for r in await current_resources(session, stack.id)}
        params = _parameters(stack, defn)
        # Detached, so what the plan sets on it (the new files get_file reads) is never flushed.
        session.expunge(stack)
        stack.files = dict(req.files)
        txn = Txn(session, rt)
        entries = await _entries(Actor(txn, stack, defn), rows)
        # Never committed: closing the session rolls its transaction back (the rows stay readable).
    return Plan(stack, params, entries, warnings)


async def _entries(actor: Actor, rows: Mapping[str, ResourceRow]) -> list[Entry]:
    """Every resource of the new definition in the engine's order, then those the update deletes."""
    current: dict[str, stackdef.ResourceView] = dict(rows)
    entries = []
    for name in actor.defn.order():
        row = rows.get(name)
        held = row is not None and row.action == "INIT"  # a breakpoint holds its creation
        entry = await _judge(actor, name, None if held else row, current)
        if entry.change.kind in ("create", "replace"):
            current[name] = Made(entry.type, f"<{name}: known after the update>", Pending(name))
        entries.append(entry)
    for name, row in rows.items():
        if name not in actor.defn.template.resources:
            entries.append(await _deleted(actor.txn, row))
    return entries


async def _judge(
    actor: Actor, name: str, row: ResourceRow | None, current: Mapping[str, stackdef.ResourceView]
) -> Entry:
    type_name = actor.defn.template.resources[name].type
    try:
        res, props = await actor.resolve(name, current)
        change = await changes.change(actor.txn, res, row, props)
    except (ControlError, hot.TemplateError) as e:
        # The engine would fail this resource in the update; the plan says so and goes on.
        why = str(e) if isinstance(e, hot.TemplateError) else error_reason(e)
        return Entry(name, type_name, changes.Change("fail", why), row)
    entry = Entry(name, type_name, _noting_pending(change, props), row)
    if type_name in DEPLOYMENT_TYPES or type_name in GROUP_TYPES:
        await _on_servers(actor.txn, res, entry, props)
    return entry


def _noting_pending(change: changes.Change, props: Any) -> changes.Change:
    """Say when a change comes from reading a resource the update makes anew."""
    pending = sorted(set(PENDING.findall(str(props))))
    if not pending or change.kind in ("create", "unchanged"):
        return change
    reads = f"reads {', '.join(pending)}, made anew by the update"
    return changes.Change(change.kind, f"{change.reason}; {reads}" if change.reason else reads)


async def _on_servers(txn: Txn, res: Res, entry: Entry, props: Mapping[str, Any]) -> None:
    """What runs where: the server, the actions that run on it, the inputs that change, each member."""
    old = (entry.row.properties if entry.row is not None else None) or {}
    entry.inputs = input_changes(old.get("input_values") or {}, props.get("input_values") or {})
    kind = entry.change.kind
    actions = await _actions(txn, res, props)
    old_actions = await _old_actions(txn, entry.row)
    runs = {
        "create": ["CREATE"],
        "replace": ["CREATE (new)", "DELETE (old)"],
        "update": ["UPDATE"],
    }.get(kind, [])
    entry.runs = [r for r in runs if r.split()[0] in (old_actions if "old" in r else actions)]
    if res.type in GROUP_TYPES:
        entry.members = await _members(txn, res, entry, props)
    else:
        entry.server = await server_label(txn, props.get("server"), res.stack.project)


async def _actions(txn: Txn, res: Res, props: Mapping[str, Any]) -> list[str]:
    """The actions the deployment lists (a component's configs decide, as the engine's start does)."""
    handler = SoftwareDeployment()
    try:
        return effective_actions(props, await handler.source(txn, res, props))
    except ControlError:  # its config is made anew by the update: its own actions are not known yet
        return list(props.get("actions") or DEFAULT_ACTIONS)


async def _old_actions(txn: Txn, row: ResourceRow | None) -> list[str]:
    dep = await txn.get(DeploymentRow, row.physical_id or "") if row is not None else None
    return list(dep.actions) if dep is not None else []


async def _members(txn: Txn, res: Res, entry: Entry, props: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each member's verdict: the group's member_queue for an update, all of them otherwise."""
    servers = read_servers(props, res)
    if entry.change.kind == "unchanged":
        return []
    if entry.change.kind in ("create", "replace") or entry.row is None:
        ops = [["create", key] for key in sorted(servers)]
        return [
            {"member": k, "server": await server_label(txn, servers[k], res.stack.project), "change": op}
            for op, k in ops
        ]
    members = await load_members(txn, load_plan(entry.row))
    old = entry.row.properties or {}
    queue, leaving = member_queue(members, read_servers(old, res), servers, old, props)
    found = [
        {"member": k, "server": await server_label(txn, servers[k], res.stack.project), "change": op}
        for op, k in queue
    ]
    for key in leaving:
        found.append(
            {
                "member": key,
                "server": await server_label(txn, members[key].server_id, res.stack.project),
                "change": "delete",
            }
        )
    return found


async def _deleted(txn: Txn, row: ResourceRow) -> Entry:
    entry = Entry(row.name, row.type, changes.Change("delete", "not in the new template"), row)
    if row.type in DEPLOYMENT_TYPES:
        dep = await txn.get(DeploymentRow, row.physical_id or "")
        entry.server = await server_label(txn, dep.server_id, dep.project) if dep is not None else None
        entry.runs = ["DELETE"] if dep is not None and "DELETE" in dep.actions else []
    return entry


async def server_label(txn: Txn, ref: Any, project: str) -> str | None:
    """A server's name for the plan (a server the update makes anew keeps its placeholder)."""
    if not isinstance(ref, str) or not ref:
        return None
    server = await deploy.visible_server(txn, ref, Within(project))
    return server.name if server is not None else ref


def input_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The input values that change, old and new (secrets masked)."""
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return {k: {"old": taint.masked(old.get(k)), "new": taint.masked(new.get(k))} for k in keys}


def _parameters(stack: StackRow, defn: stackdef.Definition) -> dict[str, dict[str, Any]]:
    """The stack parameters whose value changes (hidden ones masked)."""
    old, new = stack.parameters or {}, stackdef.plain(dict(defn.params.values))
    hidden = set(stack.hidden) | set(defn.params.hidden)
    found = {}
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            shown = (taint.MASK, taint.MASK) if key in hidden else (old.get(key), new.get(key))
            found[key] = {"old": shown[0], "new": shown[1]}
    return found


def plan_view(plan: Plan) -> dict[str, Any]:
    """The plan as the API answers it."""
    return {
        "stack": plan.stack.name,
        "parameters": plan.parameters,
        "warnings": plan.warnings,
        "resources": [
            {
                "name": e.name,
                "type": e.type,
                "change": e.change.kind,
                "reason": e.change.reason,
                "server": e.server,
                "runs": e.runs,
                "inputs": e.inputs,
                "members": e.members,
            }
            for e in plan.entries
        ],
    }
