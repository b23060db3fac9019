"""Stack use cases: create, update, delete, cancel, suspend/resume, and what operators ask about them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import InvalidRequestError
from sqlalchemy.ext.asyncio import AsyncSession

from control import hot
from control.documents.render import iso
from control.engine import stackdef, timeouts
from control.engine.rollback import start_rollback
from control.engine.settle import finish
from control.errors import BadRequestError, ConflictError, NotFoundError
from control.hot import taint
from control.hot.names import name_problem
from control.principal import DEFAULT_PROJECT, Within
from control.resources import deploy
from control.resources.nested import store_definition, warning_events
from control.resources.retiring import retire
from control.runtime import Runtime
from control.services import force_delete
from control.services.converge_interval import schedule
from control.services.stack_request import (
    StackRequest,
    check_options,
    cleared_parameters,
    parse_request,
    rollback_wanted,
    tags_given,
    timeout_given,
    validated_request,
)
from control.store import names, previous
from control.store.orm import ResourceRow, StackRow
from control.txn import Txn, retried_on_race

MASK = taint.MASK
#: Loader options for a stack row read for its identity and state only: nothing of its
#: definition (at 50,000 deployments the template alone is 12 MB) is read or decoded.
STATE_ONLY = stackdef.without("files", *stackdef.DEFINITION_COLUMNS)


def check_stack_name(name: Any) -> str:
    """*name* if it is a valid stack name (control/hot/names.py), else 400 naming the rule."""
    problem = name_problem(name, "stack")
    if problem is not None or not isinstance(name, str):
        raise BadRequestError(f"name: {problem}", where="name")
    return name


async def create_stack(
    rt: Runtime,
    kick: Callable[[str], None],
    body: Mapping[str, Any],
    project: str = DEFAULT_PROJECT,
    defs: stackdef.Definitions | None = None,
) -> dict[str, Any]:
    """A new stack of *project*, created by the engine from its first step; *defs*: this process's
    definitions, which keep the one built here for the engine's steps."""
    name = check_stack_name(body.get("name"))
    req = parse_request(body, rt.settings.max_template_bytes)
    tags, timeout_mins, rollback = tags_given(body) or [], timeout_given(body), rollback_wanted(body)
    stack_id = str(uuid.uuid4())
    defn, warnings = await validated_request(
        rt.settings, req, stack_name=name, stack_id=stack_id, nesting=_top(rt)
    )
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        if await names.taken(session, StackRow, name, project):
            raise ConflictError(f"stack {name!r} already exists", where="name")
        now = time.time()
        stack = StackRow(
            id=stack_id,
            project=project,
            name=name,
            action="CREATE",
            status="IN_PROGRESS",
            status_reason="Stack CREATE started",
            created_at=now,
            updated_at=now,
            version=1,
            traversal=1,
            tags=tags,
            timeout_mins=timeout_mins,
        )
        deploy.start_deadline(rt.settings, stack, now)
        store_definition(stack, req.template, req.files, req.environment, req.parameters, defn, warnings)
        schedule(stack, now)
        stack.rollback = rollback
        session.add(stack)
        txn.event(stack_id, "", "CREATE", "IN_PROGRESS", "Stack CREATE started", traversal=1)
        warning_events(txn, stack)
        txn.kicks.add(stack_id)
        await txn.commit(kick)
        if defs is not None:
            defs.keep(stack_id, stack.version, defn)
        return stack_view(stack)


async def update_stack(
    rt: Runtime,
    kick: Callable[[str], None],
    name: str,
    body: Mapping[str, Any],
    *,
    within: Within,
    keep_rollback: bool = False,
    defs: stackdef.Definitions | None = None,
) -> dict[str, Any]:
    """Accept a new definition at once, superseding a running update.

    With ``existing`` (Heat's PATCH) the stack's parameters, files and environment are
    kept and the body's are merged over them; without a template the stack keeps its own.
    Tags and timeout_mins not given are kept; so is the rollback choice with
    *keep_rollback* (Heat's rule; Anneal's own API asks for rollback per request).
    Two writers racing on one stack row (two updates, or an update and an engine
    step): its row_version column lets only one commit. The loser reads the stack
    again and retries; with ``if_match`` the re-read version decides, so an update
    that lost to another update answers 409 (the stack changed meanwhile).
    """
    existing = bool(body.get("existing"))
    req = parse_request(body, rt.settings.max_template_bytes, template_optional=existing)
    check_options(body)  # refused before anything is read
    return await _update_once(rt, kick, name, body, req, keep_rollback, within, defs)


def merged_request(stack: StackRow, body: Mapping[str, Any], req: StackRequest) -> StackRequest:
    """An update's request over the stack's own definition: Heat's PATCH (``existing``)."""
    if not body.get("existing"):
        return req
    params = {**stack.params_given, **req.parameters}
    for cleared in cleared_parameters(body):
        params.pop(cleared, None)
    return StackRequest(
        template=stack.template if req.template is None else req.template,
        files={**stack.files, **req.files},
        environment=hot.merge_environments(
            [stackdef.environment_from_json(stack.environment), req.environment]
        ),
        parameters=params,
    )


@retried_on_race
async def _update_once(
    rt: Runtime,
    kick: Callable[[str], None],
    name: str,
    body: Mapping[str, Any],
    given: StackRequest,
    keep_rollback: bool,
    within: Within,
    defs: stackdef.Definitions | None,
) -> dict[str, Any]:
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        # None of its old definition is read (the previous one is copied in SQL), except for a PATCH.
        stack = await get_stack(session, name, *STATE_ONLY, within=within)
        if_match = body.get("if_match")
        if if_match is not None and str(if_match) != str(stack.version):
            raise ConflictError(
                f"stack {name} is at version {stack.version}, not {if_match}", where="if_match"
            )
        if stack.action == "DELETE":
            raise ConflictError(f"stack {name} is being deleted", where="name")
        if stack.action == "SUSPEND":  # Heat's rule: a suspended stack is resumed before it changes
            raise ConflictError(f"stack {name} is suspended; resume it before updating", where="name")
        _not_nested(stack)
        if body.get("existing"):  # Heat's PATCH merges over the stack's own definition
            await load_columns(session, stack, ["template", "files", "environment", "params_given"])
        req = merged_request(stack, body, given)
        defn, warnings = await validated_request(
            rt.settings, req, stack_name=stack.name, stack_id=stack.id, nesting=_top(rt)
        )
        await previous.before_update(session, stack)
        if not keep_rollback or "disable_rollback" in body or "rollback" in body:
            stack.rollback = rollback_wanted(body)
        tags = tags_given(body)
        stack.tags = stack.tags if tags is None else tags
        stack.timeout_mins = timeout_given(body) or stack.timeout_mins
        store_definition(stack, req.template, req.files, req.environment, req.parameters, defn, warnings)
        schedule(stack, time.time())
        stack.version += 1
        stack.traversal += 1
        stack.action, stack.status, stack.status_reason = "UPDATE", "IN_PROGRESS", "Stack UPDATE started"
        stack.updated_at = time.time()
        deploy.start_deadline(rt.settings, stack, stack.updated_at)
        await retire(session, stack.id, set(defn.order()))
        txn.event(stack.id, "", "UPDATE", "IN_PROGRESS", "Stack UPDATE started", traversal=stack.traversal)
        warning_events(txn, stack)
        txn.kicks.add(stack.id)
        await txn.commit(kick)
        if defs is not None:
            defs.keep(stack.id, stack.version, defn)
        return stack_view(stack)


@retried_on_race
async def delete_stack(
    rt: Runtime, kick: Callable[[str], None], name: str, force: bool = False, *, within: Within
) -> dict[str, Any]:
    """Start deleting a stack; with *force* its DELETE configs are skipped, even those running."""
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await get_stack(session, name, *STATE_ONLY, within=within)
        _not_nested(stack)
        if force:
            stack.force_delete = True
            await force_delete.skip_running(txn, stack)
        if not (stack.action == "DELETE" and stack.status == "IN_PROGRESS"):
            stack.traversal += 1
            stack.action, stack.status, stack.status_reason = "DELETE", "IN_PROGRESS", "Stack DELETE started"
            stack.updated_at = time.time()
            deploy.start_deadline(rt.settings, stack, stack.updated_at)
            await retire(session, stack.id, None)
            txn.event(
                stack.id, "", "DELETE", "IN_PROGRESS", "Stack DELETE started", traversal=stack.traversal
            )
        txn.kicks.add(stack.id)
        await txn.commit(kick)
        return stack_view(stack)


@retried_on_race
async def cancel_stack(
    rt: Runtime,
    kick: Callable[[str], None],
    name: str,
    *,
    only: Sequence[str] = (),
    rollback: bool = False,
    within: Within,
) -> dict[str, Any]:
    """Fail every deployment in progress as cancelled and stop the stack's traversal.

    The cancelled generations are marked ``stop`` in their servers' documents: an
    agent running one stops its hook (SIGTERM, then SIGKILL), one not yet started
    never starts it. *only* limits the actions that may be cancelled (Heat's
    cancel_update: UPDATE); with *rollback* the stack then returns to its previous
    definition, as Heat's cancel_update does.
    """
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await get_stack(session, name, within=within)
        if stack.status != "IN_PROGRESS" or (only and stack.action not in only):
            raise ConflictError(
                f"stack {name} is {stack.action}_{stack.status}: "
                + (f"only {' or '.join(only)} in progress can be cancelled" if only else "nothing to cancel"),
                where="name",
            )
        todo = [stack]
        while todo:
            current = todo.pop()
            await _cancel(txn, current)
            todo += await session.scalars(
                select(StackRow).where(StackRow.parent_id == current.id, StackRow.status == "IN_PROGRESS")
            )
        if rollback:
            rows = await session.scalars(
                select(ResourceRow).where(ResourceRow.stack_id == stack.id, ResourceRow.current.is_(True))
            )
            await start_rollback(txn, stack, list(rows), stack.status_reason)
        txn.kicks.add(stack.id)
        await txn.commit(kick)
        return stack_view(stack)


async def _cancel(txn: Txn, stack: StackRow) -> None:
    await timeouts.stop_running(
        txn, stack, lambda dep: f"cancelled by `anneal stack cancel` (generation {dep.generation})"
    )
    finish(txn, stack, "FAILED", f"Stack {stack.action} cancelled")
    txn.kicks.add(stack.id)


@retried_on_race
async def change_stack(
    rt: Runtime, kick: Callable[[str], None], name: str, action: str, *, within: Within
) -> dict[str, Any]:
    """Start suspending or resuming a stack; refused while it is busy or in the wrong state."""
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await get_stack(session, name, within=within)
        _not_nested(stack)
        state = f"{stack.action}_{stack.status}"
        if stack.status == "IN_PROGRESS":
            raise ConflictError(f"stack {name} is {state}; wait for it to finish", where="name")
        if stack.action == "DELETE":
            raise ConflictError(f"stack {name} is being deleted", where="name")
        if action == "RESUME" and stack.action != "SUSPEND":
            raise ConflictError(f"stack {name} is {state}; only a suspended stack resumes", where="name")
        if action == "SUSPEND" and state == "SUSPEND_COMPLETE":
            raise ConflictError(f"stack {name} is already suspended", where="name")
        stack.traversal += 1
        stack.action, stack.status = action, "IN_PROGRESS"
        stack.status_reason = f"Stack {action} started"
        stack.updated_at = time.time()
        deploy.start_deadline(rt.settings, stack, stack.updated_at)
        txn.event(stack.id, "", action, "IN_PROGRESS", stack.status_reason, traversal=stack.traversal)
        txn.kicks.add(stack.id)
        await txn.commit(kick)
        return stack_view(stack)


def _top(rt: Runtime) -> hot.Nesting:
    """A top-level stack's place: depth 0, nesting capped by the operator's setting."""
    return hot.Nesting(0, rt.settings.max_nested_depth)


def _not_nested(stack: StackRow) -> None:
    """A nested stack changes with its parent, as in Heat: refuse changing it directly."""
    if stack.parent_id is not None:
        raise ConflictError(
            f"stack {stack.name} is nested (resource {stack.parent_resource} of stack {stack.parent_id}): "
            "change the parent stack",
            where="name",
        )


async def get_stack(session: AsyncSession, ref: str, *options: Any, within: Within) -> StackRow:
    """The stack named (where *within* resolves names) or with id *ref*, loaded with *options*."""
    return await names.find(session, StackRow, ref, within, *options)


async def load_columns(session: AsyncSession, stack: StackRow, columns: list[str]) -> None:
    """Load *columns* of a stack read without them; 404 when it was deleted since (on SQLite two
    reads of one request are not one snapshot)."""
    try:
        await session.refresh(stack, columns)
    except InvalidRequestError:
        raise NotFoundError(f"stack {stack.name!r} not found (deleted meanwhile)", where="stack") from None


def stack_view(stack: StackRow) -> dict[str, Any]:
    return {
        "id": stack.id,
        "name": stack.name,
        "status": f"{stack.action}_{stack.status}",
        "action": stack.action,
        "status_reason": stack.status_reason,
        "version": stack.version,
        "traversal": stack.traversal,
        "rollback": stack.rollback,
        "parent": stack.parent_id,
        "parent_resource": stack.parent_resource or None,
        "nested_depth": stack.nested_depth,
        "tags": list(stack.tags or []),
        "timeout_mins": stack.timeout_mins,
        "deadline": _deadline(stack),
        "parameters": masked_parameters(stack),
        "warnings": list(stack.warnings),
        "created_at": stack.created_at,
        "updated_at": stack.updated_at,
    }


def _deadline(stack: StackRow) -> str | None:
    """When the stack's running action fails "Timed out" (ISO 8601, UTC); None when none runs."""
    deadline = timeouts.deadline_of(stack)
    return None if deadline is None else iso(deadline)


def masked_parameters(stack: StackRow) -> dict[str, Any]:
    hidden = set(stack.hidden)
    return {k: (MASK if k in hidden else v) for k, v in stack.parameters.items()}


def mask(value: Any, secrets: Collection[str]) -> Any:
    """*value* with every Secret, and every occurrence of one of *secrets* in its text, masked."""
    value = taint.masked(value)
    if not secrets:
        return value
    if isinstance(value, str):
        return taint.mask_text(value, secrets)
    if isinstance(value, Mapping):
        return {k: mask(v, secrets) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [mask(v, secrets) for v in value]
    return value
