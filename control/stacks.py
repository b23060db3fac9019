"""Stack use cases: create, update, delete, and what operators ask about them."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import select

from control import hot, stackdef
from control.errors import BadRequestError, ConflictError, NotFoundError
from control.runtime import Runtime
from control.store.orm import ResourceRow, StackRow
from control.txn import Txn
from control.validate import check_definition

_STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,254}$")
MASK = "******"


def parse_request(body: Mapping[str, Any]) -> tuple[Any, dict[str, str], hot.Environment, dict[str, Any]]:
    """Template source, files, merged environment and parameters from a create/update body."""
    template = body.get("template")
    if isinstance(template, str):
        template = hot.load_yaml(template, "template")
    if not isinstance(template, Mapping):
        raise BadRequestError("template: expected a HOT template (text or object)", where="template")
    files = body.get("files") or {}
    if not isinstance(files, Mapping) or not all(isinstance(v, str) for v in files.values()):
        raise BadRequestError("files: expected an object of path -> text", where="files")
    envs = body.get("environments") or []
    if not isinstance(envs, list) or not all(isinstance(e, str) for e in envs):
        raise BadRequestError("environments: expected a list of environment texts", where="environments")
    merged = hot.merge_environments(
        [hot.parse_environment(text, f"environments[{i}]") for i, text in enumerate(envs)]
    )
    params = body.get("parameters") or {}
    if not isinstance(params, Mapping):
        raise BadRequestError("parameters: expected an object", where="parameters")
    return stackdef.plain(template), dict(files), merged, dict(params)


async def create_stack(rt: Runtime, kick: Callable[[str], None], body: Mapping[str, Any]) -> dict[str, Any]:
    name = body.get("name")
    if not isinstance(name, str) or not _STACK_NAME.match(name):
        raise BadRequestError(
            "name: a stack name starts with a letter and has only letters, digits, '_', '-', '.'",
            where="name",
        )
    template, files, env, params = parse_request(body)
    stack_id = str(uuid.uuid4())
    defn = stackdef.build(template, files, env, params, stack_name=name, stack_id=stack_id)
    check_definition(defn)
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
        _store_definition(stack, template, files, env, params, defn)
        session.add(stack)
        txn.event(stack_id, "", "CREATE", "IN_PROGRESS", "Stack CREATE started", traversal=1)
        txn.kicks.add(stack_id)
        await txn.commit(kick)
        return stack_view(stack)


async def update_stack(
    rt: Runtime, kick: Callable[[str], None], name: str, body: Mapping[str, Any]
) -> dict[str, Any]:
    template, files, env, params = parse_request(body)
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await get_stack(session, name)
        if_match = body.get("if_match")
        if if_match is not None and str(if_match) != str(stack.version):
            raise ConflictError(
                f"stack {name} is at version {stack.version}, not {if_match}", where="if_match"
            )
        if stack.status == "IN_PROGRESS":
            raise ConflictError(
                f"stack {name} is {stack.action}_IN_PROGRESS; wait for it to finish", where="name"
            )
        if stack.action == "DELETE":
            raise ConflictError(f"stack {name} is being deleted", where="name")
        if stack.action == "SUSPEND":  # Heat's rule: a suspended stack is resumed before it changes
            raise ConflictError(f"stack {name} is suspended; resume it before updating", where="name")
        if body.get("existing"):
            params = {**stack.params_given, **params}
        defn = stackdef.build(template, files, env, params, stack_name=stack.name, stack_id=stack.id)
        check_definition(defn)
        _store_definition(stack, template, files, env, params, defn)
        stack.version += 1
        stack.traversal += 1
        stack.action, stack.status, stack.status_reason = "UPDATE", "IN_PROGRESS", "Stack UPDATE started"
        stack.updated_at = time.time()
        keep = set(defn.order())
        for row in await session.scalars(select(ResourceRow).where(ResourceRow.stack_id == stack.id)):
            if row.name not in keep:
                row.current = False
        txn.event(stack.id, "", "UPDATE", "IN_PROGRESS", "Stack UPDATE started", traversal=stack.traversal)
        txn.kicks.add(stack.id)
        await txn.commit(kick)
        return stack_view(stack)


async def delete_stack(rt: Runtime, kick: Callable[[str], None], name: str) -> dict[str, Any]:
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await get_stack(session, name)
        if not (stack.action == "DELETE" and stack.status == "IN_PROGRESS"):
            stack.traversal += 1
            stack.action, stack.status, stack.status_reason = "DELETE", "IN_PROGRESS", "Stack DELETE started"
            stack.updated_at = time.time()
            for row in await session.scalars(select(ResourceRow).where(ResourceRow.stack_id == stack.id)):
                row.current = False
            txn.event(
                stack.id, "", "DELETE", "IN_PROGRESS", "Stack DELETE started", traversal=stack.traversal
            )
        txn.kicks.add(stack.id)
        await txn.commit(kick)
        return stack_view(stack)


def _store_definition(
    stack: StackRow,
    template: Any,
    files: dict[str, str],
    env: hot.Environment,
    params: dict[str, Any],
    defn: stackdef.Definition,
) -> None:
    stack.template = template
    stack.files = files
    stack.environment = stackdef.environment_to_json(env)
    stack.params_given = params
    stack.parameters = stackdef.plain(dict(defn.params.values))
    stack.hidden = sorted(defn.params.hidden)
    stack.warnings = list(defn.template.warnings) + list(defn.params.warnings)


async def get_stack(session: Any, ref: str) -> StackRow:
    stack = await session.scalar(select(StackRow).where(StackRow.name == ref))
    if stack is None:
        stack = await session.get(StackRow, ref)
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
        "parameters": masked_parameters(stack),
        "warnings": list(stack.warnings),
        "created_at": stack.created_at,
        "updated_at": stack.updated_at,
    }


def masked_parameters(stack: StackRow) -> dict[str, Any]:
    hidden = set(stack.hidden)
    return {k: (MASK if k in hidden else v) for k, v in stack.parameters.items()}


def secret_values(stack: StackRow | None) -> set[str]:
    """String values of hidden parameters, masked wherever they show up in output."""
    if stack is None:
        return set()
    return {str(stack.parameters[k]) for k in stack.hidden if stack.parameters.get(k) not in (None, "")}


def mask(value: Any, secrets: set[str]) -> Any:
    """Replace every occurrence of a secret string inside *value*."""
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in sorted(secrets, key=len, reverse=True):
            value = value.replace(secret, MASK)
        return value
    if isinstance(value, Mapping):
        return {k: mask(v, secrets) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [mask(v, secrets) for v in value]
    return value
