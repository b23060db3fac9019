"""Abandon and adopt (Heat's `stack abandon` / `stack adopt`): a stack handed over without re-running anything.

Abandon answers Heat's abandon data and removes the stack, running nothing: its
servers, configs and deployments stay as they are, on their servers, detached from any
stack (Heat leaves a stack's physical resources the same way). Adopt makes a stack from
that data and re-attaches them: every resource is ADOPT_COMPLETE at once, nothing is
published or run, and a later update or delete acts on them as on any stack's.
Adoption is within one control plane: the agents trust its key already.

Secrets never leave in clear: a hidden parameter's value (given, or in the environment's
parameters) and every secret value of a resource's properties and attributes are sealed
with the control plane's data key (``crypt.seal``), and adopt opens them again. Data
sealed by another control plane is refused, naming where, unless the request gives that
parameter's value again.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select, update

from control.engine import stackdef
from control.errors import BadRequestError, ConflictError
from control.hot import taint
from control.principal import DEFAULT_PROJECT
from control.resources import DEPLOYMENT_TYPES
from control.resources.nested import store_definition
from control.resources.validate import check_definition
from control.runtime import Runtime
from control.services.stack_request import parse_request, rollback_wanted, tags_given, timeout_given
from control.services.stacks import check_stack_name, get_stack, stack_view
from control.store import crypt
from control.store.orm import ConfigRow, DeploymentRow, EventRow, ResourceRow, ServerRow, StackRow
from control.txn import Txn

#: Where Anneal keeps, in each resource's abandon data, what adopting it needs back.
KEPT = "anneal"


async def abandon_stack(rt: Runtime, name: str) -> dict[str, Any]:
    """Heat's abandon data for stack *name*; the stack is gone, its servers and deployments untouched."""
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await get_stack(session, name)
        if stack.status == "IN_PROGRESS":
            raise ConflictError(
                f"stack {name} is {stack.action}_IN_PROGRESS; wait for it to finish", where="name"
            )
        nested = await session.scalar(select(StackRow.id).where(StackRow.parent_id == stack.id).limit(1))
        if stack.parent_id is not None or nested is not None:
            raise ConflictError(
                f"stack {name} is nested or has nested stacks: abandon takes a stack without nesting",
                where="name",
            )
        rows = list(await session.scalars(select(ResourceRow).where(ResourceRow.stack_id == stack.id)))
        owned = set(await session.scalars(select(ServerRow.id).where(ServerRow.owner_stack_id == stack.id)))
        data = _abandon_data(stack, [r for r in rows if r.current], owned, rt.keys.data_key)
        data[KEPT] = {
            "deployments": sorted(
                await session.scalars(select(DeploymentRow.id).where(DeploymentRow.stack_id == stack.id))
            ),
            "configs": sorted(
                await session.scalars(select(ConfigRow.id).where(ConfigRow.stack_id == stack.id))
            ),
        }
        for table in (DeploymentRow, ConfigRow):
            await session.execute(update(table).where(table.stack_id == stack.id).values(stack_id=None))
        await session.execute(
            update(ServerRow).where(ServerRow.owner_stack_id == stack.id).values(owner_stack_id=None)
        )
        reason = "Stack ABANDON completed: nothing ran; its servers and deployments stay"
        txn.event(stack.id, "", "ABANDON", "COMPLETE", reason, traversal=stack.traversal)
        await txn.write_events()
        await session.execute(
            update(EventRow).where(EventRow.stack_id == stack.id).values(stack_name=stack.name)
        )
        for row in rows:
            await session.delete(row)
        await session.delete(stack)
        await txn.commit()
        return data


def _abandon_data(stack: StackRow, rows: list[ResourceRow], owned: set[str], key: bytes) -> dict[str, Any]:
    """Heat's abandon data, its secrets sealed with *key*; each resource's ``resource_data`` keeps
    what adopt needs under ``anneal``."""
    hidden = set(stack.hidden or [])
    environment = dict(stack.environment)
    for section in ("parameters", "parameter_defaults"):
        environment[section] = _sealed_parameters(dict(environment.get(section) or {}), hidden, key)
    resources = {
        r.name: {
            "name": r.name,
            "resource_id": r.physical_id,
            "type": r.type,
            "action": r.action,
            "status": r.status,
            "metadata": {},
            "resource_data": {
                KEPT: {
                    "properties": _sealed(r.properties, key),
                    "attributes": _sealed(dict(r.attributes), key),
                    "requires": list(r.requires),
                    "owned_server": r.physical_id in owned,
                }
            },
        }
        for r in rows
    }
    return {
        "name": stack.name,
        "id": stack.id,
        "action": stack.action,
        "status": stack.status,
        "template": stack.template,
        "files": dict(stack.files),
        "environment": environment,
        "parameters": _sealed_parameters(dict(stack.params_given), hidden, key),
        "tags": list(stack.tags or []),
        "timeout_mins": stack.timeout_mins,
        "disable_rollback": not stack.rollback,
        "resources": resources,
    }


def _sealed(value: Any, key: bytes) -> Any:
    """*value* with each Secret in it sealed."""
    if isinstance(value, taint.Secret):
        return crypt.seal(key, value)
    if isinstance(value, Mapping):
        return {k: _sealed(v, key) for k, v in value.items()}
    if isinstance(value, list):
        return [_sealed(v, key) for v in value]
    return value


def _sealed_parameters(values: dict[str, Any], hidden: set[str], key: bytes) -> dict[str, Any]:
    """Parameter values, the hidden ones sealed whole (as given: adopt gives them back as given)."""
    return {
        k: crypt.seal(key, taint.reveal(v)) if k in hidden else _sealed(v, key) for k, v in values.items()
    }


def _opened(value: Any, key: bytes, where: str) -> Any:
    """*value* with each sealed value in it opened; another control plane's is refused, naming *where*."""
    if crypt.is_sealed(value):
        try:
            return crypt.unseal(key, value)
        except crypt.DataKeyError as e:
            raise BadRequestError(
                f"{where}: a sealed secret this control plane cannot open ({e}): abandon data is adopted "
                "where it was abandoned; a hidden parameter's value can be given again in parameters",
                where=where,
            ) from None
    if isinstance(value, Mapping):
        return {k: _opened(v, key, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_opened(v, key, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _opened_data(data: dict[str, Any], given: Mapping[str, Any], key: bytes) -> dict[str, Any]:
    """The abandon data with its secrets opened; a parameter the request gives again stays shut."""
    where = "adopt_stack_data"
    params = data.get("parameters")
    if isinstance(params, Mapping):
        data["parameters"] = {
            k: v if k in given else _opened(v, key, f"{where}.parameters.{k}") for k, v in params.items()
        }
    for section in ("environment", "resources"):
        data[section] = _opened(data.get(section), key, f"{where}.{section}")
    return data


def _data(body: Mapping[str, Any]) -> dict[str, Any]:
    raw = body.get("adopt_stack_data")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as e:
            raise BadRequestError(f"adopt_stack_data: not JSON: {e}", where="adopt_stack_data") from e
    if not isinstance(raw, Mapping):
        raise BadRequestError(
            "adopt_stack_data: expected the abandon data (an object)", where="adopt_stack_data"
        )
    for key in ("template", "resources"):
        if not isinstance(raw.get(key), Mapping):
            raise BadRequestError(
                f"adopt_stack_data.{key}: expected an object", where=f"adopt_stack_data.{key}"
            )
    return dict(raw)


def _kept(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    """What abandon kept for resource *name*; data not made by Anneal's abandon is refused, naming it."""
    where = f"adopt_stack_data.resources.{name}"
    entry = data["resources"].get(name)
    if not isinstance(entry, Mapping):
        raise BadRequestError(f"{where}: the template's resource has no abandon data", where=where)
    kept = (
        (entry.get("resource_data") or {}).get(KEPT)
        if isinstance(entry.get("resource_data"), Mapping)
        else None
    )
    if not isinstance(kept, Mapping):
        raise BadRequestError(
            f"{where}: not abandoned by Anneal (no resource_data.{KEPT}): only Anneal's abandon data is adopted",
            where=where,
        )
    return {**kept, "resource_id": entry.get("resource_id"), "type": entry.get("type")}


def _request(body: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """A create body from the abandon data, with what the adopt request gives over it."""
    envs = [json.dumps(data.get("environment") or {}), *(body.get("environments") or [])]
    return {
        "template": data["template"],
        "files": {**(data.get("files") or {}), **(body.get("files") or {})},
        "environments": envs,
        "parameters": {**(data.get("parameters") or {}), **(body.get("parameters") or {})},
    }


async def adopt_stack(rt: Runtime, body: Mapping[str, Any], project: str = DEFAULT_PROJECT) -> dict[str, Any]:
    """A stack *name* from Anneal's abandon data: ADOPT_COMPLETE at once, its deployments re-attached, nothing run."""
    name = check_stack_name(body.get("name"))
    given = body.get("parameters")
    data = _opened_data(_data(body), given if isinstance(given, Mapping) else {}, rt.keys.data_key)
    req = parse_request(_request(body, data), rt.settings.max_template_bytes)
    stack_id = str(uuid.uuid4())
    defn = stackdef.build(
        req.template, req.files, req.environment, req.parameters, stack_name=name, stack_id=stack_id
    )
    warnings = check_definition(defn.template)
    kept = {n: _kept(data, n) for n in defn.order()}
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        if await session.scalar(select(StackRow.id).where(StackRow.name == name)) is not None:
            raise ConflictError(f"stack {name!r} already exists", where="name")
        now = time.time()
        reason = "Stack ADOPT completed successfully"
        stack = StackRow(
            id=stack_id, project=project, name=name, action="ADOPT", status="COMPLETE", status_reason=reason,
            created_at=now, updated_at=now, version=1, traversal=1,
            tags=tags_given(body) or list(data.get("tags") or []),
            timeout_mins=timeout_given(body) or timeout_given(data),
        )  # fmt: skip
        store_definition(stack, req.template, req.files, req.environment, req.parameters, defn, warnings)
        stack.rollback = rollback_wanted(body if "disable_rollback" in body else data)
        session.add(stack)
        await _attach(txn, stack_id, data, kept)
        txn.event(stack_id, "", "ADOPT", "IN_PROGRESS", "Stack ADOPT started", traversal=1)
        for res_name, k in kept.items():
            session.add(
                ResourceRow(
                    stack_id=stack_id, name=res_name, type=k["type"], action="ADOPT", status="COMPLETE",
                    status_reason="adopted", physical_id=k["resource_id"], properties=k.get("properties"),
                    attributes=dict(k.get("attributes") or {}), requires=list(k.get("requires") or []),
                    traversal=1, current=True, created_at=now, updated_at=now,
                )
            )  # fmt: skip
            txn.event(stack_id, res_name, "ADOPT", "COMPLETE", "adopted: nothing ran", traversal=1)
        txn.event(stack_id, "", "ADOPT", "COMPLETE", reason, traversal=1)
        await txn.commit()
        return stack_view(stack)


async def _attach(txn: Txn, stack_id: str, data: Mapping[str, Any], kept: Mapping[str, Any]) -> None:
    """Re-attach the abandoned stack's deployments, configs and servers; each must be there, in no stack."""
    kept_ids = data.get(KEPT)
    ids: Mapping[str, Any] = kept_ids if isinstance(kept_ids, Mapping) else {}
    rows: list[tuple[str, DeploymentRow | ConfigRow | None]] = []
    for ident in ids.get("deployments") or []:
        rows.append((f"deployment {ident}", await txn.session.get(DeploymentRow, str(ident))))
    for ident in ids.get("configs") or []:
        rows.append((f"config {ident}", await txn.session.get(ConfigRow, str(ident))))
    for what, row in rows:
        if row is None or row.stack_id is not None:
            state = "not found" if row is None else "belongs to another stack"
            raise ConflictError(f"adopt_stack_data: {what} {state}", where=f"adopt_stack_data.{KEPT}")
        row.stack_id = stack_id
    for res_name, k in kept.items():
        if k.get("owned_server"):
            server = await txn.session.get(ServerRow, str(k["resource_id"]))
            if server is None:
                raise ConflictError(
                    f"adopt_stack_data.resources.{res_name}: server {k['resource_id']} not found",
                    where=f"adopt_stack_data.resources.{res_name}",
                )
            server.owner_stack_id = server.owner_stack_id or stack_id
        if k["type"] in DEPLOYMENT_TYPES:
            dep = await txn.session.get(DeploymentRow, str(k["resource_id"]))
            if dep is not None:
                dep.resource_name = res_name


async def export_stack(rt: Runtime, name: str) -> dict[str, Any]:
    """Heat's export: the abandon data of stack *name* as it is now; the stack stays and nothing runs."""
    async with rt.sessions() as session:
        stack = await get_stack(session, name)
        nested = await session.scalar(select(StackRow.id).where(StackRow.parent_id == stack.id).limit(1))
        if stack.parent_id is not None or nested is not None:
            raise ConflictError(
                f"stack {name} is nested or has nested stacks: export, as abandon, takes a stack without nesting",
                where="name",
            )
        rows = await session.scalars(
            select(ResourceRow).where(ResourceRow.stack_id == stack.id, ResourceRow.current.is_(True))
        )
        owned = set(await session.scalars(select(ServerRow.id).where(ServerRow.owner_stack_id == stack.id)))
        data = _abandon_data(stack, list(rows), owned, rt.keys.data_key)
        data[KEPT] = {
            key: sorted(await session.scalars(select(table.id).where(table.stack_id == stack.id)))
            for key, table in (("deployments", DeploymentRow), ("configs", ConfigRow))
        }
        return data
