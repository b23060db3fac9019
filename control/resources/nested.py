"""Nested stacks: the child stack rows that template resources and groups make.

A nested stack is a stack like any other (its own row, traversal, work row, events),
stepped by the same engine, with ``parent_id`` and ``parent_resource`` naming the
resource that made it. The resource starts the child's create, update, delete, suspend
or resume and stays IN_PROGRESS; when the child settles its step wakes the parent
(``engine/settle.finish``) and the resource's ``check`` reads the child's state and
outputs. Writing a stack's definition and retiring its resources is shared with the
operator's requests (``services/stacks.py``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import defer

from control import hot
from control.errors import ControlError
from control.resources import deploy
from control.resources.base import Outcome, Res, done
from control.resources.retiring import RETIRE_CHUNK, retire_later
from control.resources.validate import check_definition
from control.store.orm import ResourceRow, StackRow
from control.txn import Txn

#: Where a resource that makes a nested stack keeps the digest of what it last gave it.
SOURCE = "anneal:source"


def short_id() -> str:
    """A short random name part, as Heat's nested stack and scaling group member names have: 12
    characters of base32 (a-z, 2-7), from one call for random bytes, not one per character."""
    return base64.b32encode(secrets.token_bytes(10)).decode().lower()[:12]


class Dumped(str):
    """A part of ``digest`` already in its JSON form (``dumped``): the members of a group share one."""


def dumped(value: Any) -> Dumped:
    """*value* in the JSON form ``digest`` gives each of its parts."""
    return Dumped(json.dumps(value, sort_keys=True, default=str, separators=(",", ":")))


def digest(*parts: Any) -> str:
    """A stable digest of JSON-able *parts*: equal definitions give equal digests.

    The JSON of the tuple of parts, each in its ``dumped`` form (given ready as a ``Dumped``
    or dumped here): the same text, so the same digest, however the parts come.
    """
    text = "[" + ",".join(p if isinstance(p, Dumped) else dumped(p) for p in parts) + "]"
    return hashlib.sha256(text.encode()).hexdigest()


def store_definition(
    stack: StackRow,
    template: Any,
    files: Mapping[str, Any],
    env: hot.Environment,
    params: Mapping[str, Any],
    defn: hot.Definition,
    warnings: Iterable[str] = (),
) -> None:
    """Write a stack's template, files, environment and parameters as *defn* resolved them;
    *warnings*: the definition check's (check_definition)."""
    stack.template = template
    stack.files = dict(files)
    stack.environment = hot.environment_to_json(env)
    stack.params_given = dict(params)
    stack.parameters = hot.plain(dict(defn.params.values))
    stack.hidden = sorted(defn.params.hidden)
    stack.warnings = [*env.warnings, *defn.template.warnings, *defn.params.warnings, *warnings]
    stack.outline = hot.outline(defn)


def warning_events(txn: Txn, stack: StackRow) -> None:
    """One WARNING event per warning of the definition, on the resource its path names."""
    for warning in stack.warnings:
        path = str(warning).partition(":")[0]
        resource = path.split(".")[1] if path.startswith("resources.") and path.count(".") >= 1 else ""
        txn.event(stack.id, resource, stack.action, "WARNING", str(warning), traversal=stack.traversal)


def _build(
    txn: Txn, res: Res, stack_id: str, name: str, depth: int, parts: Mapping[str, Any]
) -> tuple[hot.Definition, list[str]]:
    """The child's definition, checked as a stack's is (a problem fails the parent's resource)."""
    nesting = hot.Nesting(depth, txn.runtime.settings.max_nested_depth)
    if depth > nesting.max_depth:
        raise hot.TemplateError(
            res.where, f"would nest stacks {depth} deep, more than the limit of {nesting.max_depth}"
        )
    try:
        template, warnings = _parsed(txn, parts, nesting)
        defn = hot.bind(template, parts["environment"], parts["params"], stack_name=name, stack_id=stack_id)
    except hot.TemplateError as e:
        raise hot.TemplateError(f"{res.where}", f"nested stack: {e}") from e
    return defn, warnings


def _parsed(txn: Txn, parts: Mapping[str, Any], nesting: hot.Nesting) -> tuple[hot.Template, list[str]]:
    """The child's template parsed and checked, once per transaction for equal parts: the members
    of a group share theirs (a frozen Template), and differ only in their parameters."""
    env = hot.environment_to_json(parts["environment"])
    key = digest(template_part(parts), parts["files"], env, nesting.depth, nesting.max_depth)
    memo: dict[str, tuple[hot.Template, list[str]]] = txn.kept.setdefault(_PARSED, {})
    if key not in memo:
        files, environment = parts["files"], parts["environment"]
        template = hot.parse_template(
            parts["template"], files=files, environment=environment, nesting=nesting
        )
        memo[key] = (template, check_definition(template))
    return memo[key]


_PARSED = "parsed"
#: The key of a nested stack's parts (``TemplateResource.parts``) that holds its template ``dumped``.
TEMPLATE_TEXT = "template_text"


def template_part(parts: Mapping[str, Any]) -> Any:
    """The template of *parts* for ``digest``: its JSON text when the parts carry it."""
    return parts.get(TEMPLATE_TEXT) or parts["template"]


async def start_child(txn: Txn, res: Res, parts: Mapping[str, Any]) -> StackRow:
    """Create the nested stack of *res*: *parts* has its template, files, environment and params."""
    parent = res.stack
    child_id, now = str(uuid.uuid4()), time.time()
    name = f"{parent.name}-{res.name}-{short_id()}"[-255:]
    defn, warnings = _build(txn, res, child_id, name, parent.nested_depth + 1, parts)
    child = StackRow(
        id=child_id,
        project=parent.project,
        name=name,
        action="CREATE",
        status="IN_PROGRESS",
        status_reason="Stack CREATE started",
        created_at=now,
        updated_at=now,
        version=1,
        traversal=1,
        rollback=False,  # the parent's rollback takes it back, as Heat does
        timeout_mins=parent.timeout_mins,  # Heat's default: the parent's (OS::Heat::Stack sets its own)
        parent_id=parent.id,
        parent_resource=res.name,
        nested_depth=parent.nested_depth + 1,
        facade=dict(res.nest.facade) if res.nest else {},
        outputs={},
        previous=None,
    )
    parts_of = (parts["template"], parts["files"], parts["environment"], parts["params"])
    store_definition(child, *parts_of, defn, warnings)
    _built(txn, child, defn)
    deploy.start_deadline(txn.runtime.settings, child, now)
    txn.add(child)
    reason = f"Stack CREATE started (nested: resource {res.name} of stack {parent.name})"
    txn.event(child_id, "", "CREATE", "IN_PROGRESS", reason, traversal=1)
    warning_events(txn, child)
    txn.kicks.add(child_id)
    return child


async def update_child(txn: Txn, res: Res, child: StackRow, parts: Mapping[str, Any]) -> None:
    """Give the nested stack a new definition: it walks again, changing only what differs."""
    defn, warnings = _build(txn, res, child.id, child.name, child.nested_depth, parts)
    parts_of = (parts["template"], parts["files"], parts["environment"], parts["params"])
    store_definition(child, *parts_of, defn, warnings)
    if res.nest is not None:  # a group's next batch keeps what the child had
        child.facade = dict(res.nest.facade)
    child.timeout_mins = res.stack.timeout_mins
    _restart(txn, child, "UPDATE")
    _built(txn, child, defn)
    warning_events(txn, child)
    retire_later(txn, child.id, set(defn.order()))


def _built(txn: Txn, child: StackRow, defn: hot.Definition) -> None:
    txn.kept.setdefault(_BUILT, {})[child.id] = (child.version, defn)


def built(txn: Txn) -> dict[str, tuple[int, hot.Definition]]:
    """The definitions (by stack id: version, definition) written to nested stacks since the last
    call, as the engine would parse them from the rows (``stackdef.Definitions.adopt``, after each
    commit). Kept across a sliced step's commits: a group's nested stack commits its walk every few
    ms, and each member started before the last of them parsed its template again at its first step."""
    found: dict[str, tuple[int, hot.Definition]] = txn.kept.pop(_BUILT, {})
    return found


_BUILT = "built"


async def delete_child(txn: Txn, child: StackRow) -> None:
    """Start deleting the nested stack (DELETE configs run); it wakes its parent once gone."""
    parent = await txn.session.get(StackRow, child.parent_id) if child.parent_id else None
    if parent is not None and parent.force_delete:  # `stack delete --force` reaches every level
        child.force_delete = True
    if child.action == "DELETE" and child.status == "IN_PROGRESS":
        return
    _restart(txn, child, "DELETE")
    retire_later(txn, child.id, None)


def change_child(txn: Txn, child: StackRow, action: str) -> None:
    """Start the nested stack's SUSPEND or RESUME."""
    _restart(txn, child, action)


def _restart(txn: Txn, child: StackRow, action: str) -> None:
    if action == "UPDATE":
        child.version += 1
    child.traversal += 1
    child.action, child.status, child.status_reason = action, "IN_PROGRESS", f"Stack {action} started"
    child.updated_at = time.time()
    deploy.start_deadline(txn.runtime.settings, child, child.updated_at)  # each action has its own
    txn.event(child.id, "", action, "IN_PROGRESS", child.status_reason, traversal=child.traversal)
    txn.kicks.add(child.id)


async def get_child(txn: Txn, physical_id: str | None) -> StackRow | None:
    """The nested stack's row, to change it (read ahead by ``read_children``, or now)."""
    if not physical_id:
        return None
    ahead = txn.kept.get((StackRow, physical_id), _UNREAD)
    if ahead is not _UNREAD:
        return ahead  # type: ignore[no-any-return]
    return await txn.get(StackRow, physical_id)


@dataclass(frozen=True)
class ChildState:
    """What a parent's step reads of its nested stack while it waits: no definition decoded."""

    id: str
    name: str
    action: str
    status: str
    status_reason: str


_STATE_COLUMNS = (StackRow.id, StackRow.name, StackRow.action, StackRow.status, StackRow.status_reason)


def running(txn: Txn, physical_id: str | None) -> bool:
    """True when ``read_states`` read this nested stack ahead and it was IN_PROGRESS."""
    found = txn.ahead.get((ChildState, physical_id))
    return isinstance(found, ChildState) and found.status == "IN_PROGRESS"


async def child_state(txn: Txn, physical_id: str | None) -> ChildState | None:
    if not physical_id:
        return None
    ahead = txn.ahead.pop((ChildState, physical_id), _UNREAD)
    if ahead is not _UNREAD:
        return ahead  # type: ignore[no-any-return]
    found = (await txn.session.execute(select(*_STATE_COLUMNS).where(StackRow.id == physical_id))).first()
    return ChildState(*found) if found is not None else None


_UNREAD = object()


async def read_states(txn: Txn, physical_ids: Iterable[str]) -> None:
    """Read the states of these nested stacks ahead, in one query per RETIRE_CHUNK of them,
    and the outputs of those COMPLETE in one more.

    A group's nested stack asks every member still running on each of its steps: one
    query each made a step of a group of N nested members O(N) statements. Each
    ``child_state`` (``child_outputs``) then takes its value once; an id that is no stack reads None,
    and ``get_child`` then finds it gone without a query.
    """
    ids = sorted(set(physical_ids))
    for start in range(0, len(ids), RETIRE_CHUNK):
        chunk = ids[start : start + RETIRE_CHUNK]
        found = {
            r[0]: ChildState(*r)
            for r in await txn.session.execute(select(*_STATE_COLUMNS).where(StackRow.id.in_(chunk)))
        }
        txn.ahead.update({(ChildState, i): found.get(i) for i in chunk})
        # A stack gone stays gone (ids are never reused): its resource's delete finds so without a query.
        txn.kept.update({(StackRow, i): None for i in chunk if i not in found})
        complete = [i for i, state in found.items() if state.status == "COMPLETE"]
        if complete:
            outputs = await txn.session.execute(
                select(StackRow.id, StackRow.outputs).where(StackRow.id.in_(complete))
            )
            txn.ahead.update({(_OUTPUTS, i): dict(out or {}) for i, out in outputs})


_OUTPUTS = "outputs"
#: What a step reads of the nested stacks of its template resources (``read_children``): not
#: their definitions, which their handlers only write.
_CHILD_WITHOUT = [
    defer(getattr(StackRow, name), raiseload=True)
    for name in ("template", "files", "environment", "params_given", "parameters", "previous", "outputs")
]


async def read_children(txn: Txn, physical_ids: Iterable[str]) -> None:
    """Read the nested stacks of template resources ahead, in one query per RETIRE_CHUNK, without
    their definitions: an update or delete of N members then finds each (``get_child``), or that
    it is gone, without a query. Kept for the whole step (``Txn.kept``): its walk commits every few
    ms, and a member then read its nested stack alone, with its definition, decrypted. A row
    changed meanwhile by another step fails this one's write of it (its row_version), as ever."""
    ids = sorted(set(physical_ids))
    for start in range(0, len(ids), RETIRE_CHUNK):
        chunk = ids[start : start + RETIRE_CHUNK]
        query = select(StackRow).where(StackRow.id.in_(chunk)).options(*_CHILD_WITHOUT)
        found = {s.id: s for s in await txn.session.scalars(query)}
        txn.kept.update({(StackRow, i): found.get(i) for i in chunk})


async def child_outputs(txn: Txn, stack_id: str) -> dict[str, Any]:
    """The nested stack's outputs as of its last COMPLETE."""
    ahead = txn.ahead.pop((_OUTPUTS, stack_id), None)
    if ahead is not None:
        return dict(ahead)
    return dict(await txn.session.scalar(select(StackRow.outputs).where(StackRow.id == stack_id)) or {})


def gone(row: ResourceRow) -> ControlError:
    """The error of a resource whose nested stack is missing (deleted behind its back)."""
    return ControlError(
        f"the nested stack {row.physical_id} of {row.name} no longer exists", where=f"resources.{row.name}"
    )


def child_outcome(row: ResourceRow, child: ChildState | None, attributes: Mapping[str, Any]) -> Outcome:
    """The resource's outcome from its nested stack's state; *attributes* once it is COMPLETE."""
    if child is None:
        if row.action == "DELETE":
            return Outcome("COMPLETE", None, {})
        return Outcome("FAILED", row.physical_id, row.attributes, "its nested stack no longer exists")
    if child.status == "IN_PROGRESS":
        return Outcome("IN_PROGRESS", row.physical_id, row.attributes)
    if child.status == "FAILED":
        reason = f"nested stack {child.name}: {child.status_reason}"
        return Outcome("FAILED", row.physical_id, row.attributes, reason)
    return Outcome("COMPLETE", child.id, attributes)


async def lifecycle(txn: Txn, row: ResourceRow, action: str) -> Outcome:
    """SUSPEND or RESUME the nested stack of *row*; done at once when it has none."""
    child = await get_child(txn, row.physical_id)
    if child is None:
        return done(row.physical_id, **row.attributes)
    change_child(txn, child, action)
    return Outcome("IN_PROGRESS", child.id, row.attributes)
