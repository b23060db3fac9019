"""Stack use cases: create, update, delete, cancel, suspend/resume, and what operators ask about them."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.exc import StaleDataError

from agent import wire_files
from control import hot
from control.engine import stackdef
from control.engine.settle import settle
from control.errors import BadRequestError, ConflictError, NotFoundError
from control.hot import taint
from control.resources.nested import retire, store_definition, warning_events
from control.resources.validate import check_definition
from control.runtime import Runtime
from control.store.orm import DeploymentRow, StackRow
from control.txn import Txn

UPDATE_RETRIES = 5
_STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,254}$")
MASK = taint.MASK
#: Loader options for a stack row read for its identity and state only: nothing of its
#: definition (at 50,000 deployments the template alone is 12 MB) is read or decoded.
STATE_ONLY = stackdef.without("files", *stackdef.DEFINITION_COLUMNS)


def parse_request(
    body: Mapping[str, Any], max_bytes: int
) -> tuple[Any, dict[str, Any], hot.Environment, dict[str, Any]]:
    """Template source, files, merged environment and parameters from a create/update body.

    The template's text and each environment's are capped at *max_bytes*.
    """
    files = body.get("files") or {}
    if not isinstance(files, Mapping):
        raise BadRequestError("files: expected an object of path -> text", where="files")
    for ref, value in files.items():
        _check_file(value, f"files.{ref}", directory=True)
    envs = body.get("environments") or []
    if not isinstance(envs, list) or not all(isinstance(e, str) for e in envs):
        raise BadRequestError("environments: expected a list of environment texts", where="environments")
    params = body.get("parameters") or {}
    if not isinstance(params, Mapping):
        raise BadRequestError("parameters: expected an object", where="parameters")
    template, merged = hot.load_sources(body.get("template"), envs, max_bytes)
    return template, dict(files), merged, dict(params)


def _check_file(value: Any, where: str, *, directory: bool) -> None:
    """A ``files`` entry: text, a binary envelope, or (at the top) a directory of those."""
    if isinstance(value, str) or wire_files.opened(value) is not None:
        return
    inner = value.get(wire_files.DIRECTORY_KEY) if isinstance(value, Mapping) and len(value) == 1 else None
    if directory and isinstance(inner, Mapping):
        for name, entry in inner.items():
            _check_file(entry, f"{where}.{name}", directory=False)
        return
    raise BadRequestError(
        f"{where}: expected text, {{{wire_files.BINARY_KEY!r}: base64}}"
        + (f" or {{{wire_files.DIRECTORY_KEY!r}: {{path: file}}}}" if directory else ""),
        where=where,
    )


async def create_stack(rt: Runtime, kick: Callable[[str], None], body: Mapping[str, Any]) -> dict[str, Any]:
    name = body.get("name")
    if not isinstance(name, str) or not _STACK_NAME.match(name):
        raise BadRequestError(
            "name: a stack name starts with a letter and has only letters, digits, '_', '-', '.'",
            where="name",
        )
    template, files, env, params = parse_request(body, rt.settings.max_template_bytes)
    stack_id = str(uuid.uuid4())
    defn = stackdef.build(template, files, env, params, stack_name=name, stack_id=stack_id, nesting=_top(rt))
    warnings = check_definition(defn.template)
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        if await session.scalar(select(StackRow.id).where(StackRow.name == name)) is not None:
            raise ConflictError(f"stack {name!r} already exists", where="name")
        now = time.time()
        stack = StackRow(
            id=stack_id,
            name=name,
            action="CREATE",
            status="IN_PROGRESS",
            status_reason="Stack CREATE started",
            created_at=now,
            updated_at=now,
            version=1,
            traversal=1,
        )
        store_definition(stack, template, files, env, params, defn, warnings)
        stack.rollback = _rollback_wanted(body)
        session.add(stack)
        txn.event(stack_id, "", "CREATE", "IN_PROGRESS", "Stack CREATE started", traversal=1)
        warning_events(txn, stack)
        txn.kicks.add(stack_id)
        await txn.commit(kick)
        return stack_view(stack)


async def update_stack(
    rt: Runtime, kick: Callable[[str], None], name: str, body: Mapping[str, Any]
) -> dict[str, Any]:
    """Accept a new definition at once, superseding a running update.

    Two writers racing on one stack row (two updates, or an update and an engine
    step): its row_version column lets only one commit. The loser reads the stack
    again and retries; with ``if_match`` the re-read version decides, so an update
    that lost to another update answers 409 (the stack changed meanwhile).
    """
    template, files, env, params = parse_request(body, rt.settings.max_template_bytes)
    for attempt in range(UPDATE_RETRIES):
        try:
            return await _update_once(rt, kick, name, body, template, files, env, params)
        except StaleDataError:
            if attempt == UPDATE_RETRIES - 1:
                raise
    raise AssertionError("unreachable")


async def _update_once(
    rt: Runtime,
    kick: Callable[[str], None],
    name: str,
    body: Mapping[str, Any],
    template: Any,
    files: dict[str, Any],
    env: hot.Environment,
    params: dict[str, Any],
) -> dict[str, Any]:
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await get_stack(session, name)
        _not_nested(stack)
        if_match = body.get("if_match")
        if if_match is not None and str(if_match) != str(stack.version):
            raise ConflictError(
                f"stack {name} is at version {stack.version}, not {if_match}", where="if_match"
            )
        if stack.action == "DELETE":
            raise ConflictError(f"stack {name} is being deleted", where="name")
        if stack.action == "SUSPEND":  # Heat's rule: a suspended stack is resumed before it changes
            raise ConflictError(f"stack {name} is suspended; resume it before updating", where="name")
        if body.get("existing"):
            params = {**stack.params_given, **params}
        defn = stackdef.build(
            template, files, env, params, stack_name=stack.name, stack_id=stack.id, nesting=_top(rt)
        )
        warnings = check_definition(defn.template)
        # An update accepted while another runs supersedes it: the new traversal starts now;
        # what runs on servers finishes, and a rollback still returns to the last settled state.
        if not (stack.status == "IN_PROGRESS" and stack.previous is not None):
            stack.previous = (
                None if stack.action == "CREATE" and stack.status == "IN_PROGRESS" else _definition(stack)
            )
        stack.rollback = _rollback_wanted(body)
        store_definition(stack, template, files, env, params, defn, warnings)
        stack.version += 1
        stack.traversal += 1
        stack.action, stack.status, stack.status_reason = "UPDATE", "IN_PROGRESS", "Stack UPDATE started"
        stack.updated_at = time.time()
        await retire(session, stack.id, set(defn.order()))
        txn.event(stack.id, "", "UPDATE", "IN_PROGRESS", "Stack UPDATE started", traversal=stack.traversal)
        warning_events(txn, stack)
        txn.kicks.add(stack.id)
        await txn.commit(kick)
        return stack_view(stack)


async def delete_stack(rt: Runtime, kick: Callable[[str], None], name: str) -> dict[str, Any]:
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await get_stack(session, name, *STATE_ONLY)
        _not_nested(stack)
        if not (stack.action == "DELETE" and stack.status == "IN_PROGRESS"):
            stack.traversal += 1
            stack.action, stack.status, stack.status_reason = "DELETE", "IN_PROGRESS", "Stack DELETE started"
            stack.updated_at = time.time()
            await retire(session, stack.id, None)
            txn.event(
                stack.id, "", "DELETE", "IN_PROGRESS", "Stack DELETE started", traversal=stack.traversal
            )
        txn.kicks.add(stack.id)
        await txn.commit(kick)
        return stack_view(stack)


async def cancel_stack(rt: Runtime, kick: Callable[[str], None], name: str) -> dict[str, Any]:
    """Fail every deployment in progress as cancelled and stop the stack's traversal.

    The cancelled generations are marked ``stop`` in their servers' documents: an
    agent running one stops its hook (SIGTERM, then SIGKILL), one not yet started
    never starts it. Nested stacks in progress below it are cancelled with it.
    """
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await get_stack(session, name)
        if stack.status != "IN_PROGRESS":
            raise ConflictError(
                f"stack {name} is {stack.action}_{stack.status}: nothing to cancel", where="name"
            )
        todo = [stack]
        while todo:
            current = todo.pop()
            await _cancel(txn, current)
            todo += await session.scalars(
                select(StackRow).where(StackRow.parent_id == current.id, StackRow.status == "IN_PROGRESS")
            )
        await txn.commit(kick)
        return stack_view(stack)


async def _cancel(txn: Txn, stack: StackRow) -> None:
    now = time.time()
    deps = await txn.session.scalars(
        select(DeploymentRow).where(DeploymentRow.stack_id == stack.id, DeploymentRow.status == "IN_PROGRESS")
    )
    for dep in deps:
        dep.status, dep.status_reason = (
            "FAILED",
            f"cancelled by `anneal stack cancel` (generation {dep.generation})",
        )
        dep.completed_at = dep.updated_at = now
        txn.publish.add(dep.server_id)
        await settle(txn, dep)
    stack.status, stack.status_reason, stack.updated_at = "FAILED", f"Stack {stack.action} cancelled", now
    txn.event(stack.id, "", stack.action, "FAILED", stack.status_reason, traversal=stack.traversal)
    txn.kicks.add(stack.id)
    if stack.parent_id is not None:
        txn.kicks.add(stack.parent_id)


async def change_stack(rt: Runtime, kick: Callable[[str], None], name: str, action: str) -> dict[str, Any]:
    """Start suspending or resuming a stack; refused while it is busy or in the wrong state."""
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await get_stack(session, name)
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


def _rollback_wanted(body: Mapping[str, Any]) -> bool:
    """`rollback: true`, or Heat's `disable_rollback: false`."""
    if "disable_rollback" in body:
        value = body["disable_rollback"]
        if not isinstance(value, bool):
            raise BadRequestError("disable_rollback: expected true or false", where="disable_rollback")
        return not value
    value = body.get("rollback", False)
    if not isinstance(value, bool):
        raise BadRequestError("rollback: expected true or false", where="rollback")
    return value


def _definition(stack: StackRow) -> dict[str, Any]:
    return {
        "template": stack.template,
        "files": dict(stack.files),
        "environment": dict(stack.environment),
        "params_given": dict(stack.params_given),
    }


async def get_stack(session: AsyncSession, ref: str, *options: Any) -> StackRow:
    """The stack named or with id *ref*, loaded with *options* (SQLAlchemy loader options)."""
    stack = await session.scalar(select(StackRow).where(StackRow.name == ref).options(*options))
    if stack is None:
        stack = await session.get(StackRow, ref, options=options)
    if stack is None:
        raise NotFoundError(f"stack {ref!r} not found", where="stack")
    assert isinstance(stack, StackRow)
    return stack


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
        "parameters": masked_parameters(stack),
        "warnings": list(stack.warnings),
        "created_at": stack.created_at,
        "updated_at": stack.updated_at,
        "parent": stack.parent_id,
        "parent_resource": stack.parent_resource or None,
        "nested_depth": stack.nested_depth,
    }


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
