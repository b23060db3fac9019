"""Software configs made outside any stack (Heat's software_configs API).

Configs a stack made are listed and shown here too, but go only with their stack. A
deployment's derived config is shown by its id as well, as Heat stores derived
configs as configs.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from control.documents.seal import secret_strings
from control.errors import BadRequestError, ConflictError, NotFoundError
from control.principal import DEFAULT_PROJECT
from control.runtime import Runtime
from control.services.stacks import MASK, mask
from control.store.orm import ConfigRow, DeploymentRow


def _text(body: Mapping[str, Any], key: str, default: str) -> str:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise BadRequestError(f"{key}: expected text, got {value!r}", where=key)
    return value


def _items(body: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    """A config's inputs or outputs: a list of objects, each with a text ``name``."""
    value = body.get(key) or []
    if not isinstance(value, list):
        raise BadRequestError(f"{key}: expected a list of {{name, ...}} objects", where=key)
    for i, item in enumerate(value):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item["name"]:
            raise BadRequestError(f"{key}[{i}]: expected an object with a name", where=f"{key}[{i}]")
    return [dict(i) for i in value]


async def create_config(
    rt: Runtime, body: Mapping[str, Any], project: str = DEFAULT_PROJECT
) -> dict[str, Any]:
    """A new immutable config: ``{name, group, config, inputs, outputs, options}``."""
    options = body.get("options") or {}
    if not isinstance(options, Mapping):
        raise BadRequestError("options: expected an object", where="options")
    row = ConfigRow(
        id=str(uuid.uuid4()),
        project=project,
        stack_id=None,
        name=_text(body, "name", ""),
        group=_text(body, "group", "") or "Heat::Ungrouped",
        body={
            "config": body.get("config") if body.get("config") is not None else "",
            "inputs": _items(body, "inputs"),
            "outputs": _items(body, "outputs"),
            "options": dict(options),
        },
        created_at=time.time(),
    )
    async with rt.sessions() as session:
        session.add(row)
        await session.commit()
    return config_view(row, set())


def config_view(row: ConfigRow, secrets: set[str]) -> dict[str, Any]:
    found = {"id": row.id, "name": row.name, "group": row.group, "creation_time": row.created_at}
    body = mask(dict(row.body), secrets)
    return {**found, **{k: body.get(k) for k in ("config", "inputs", "outputs", "options")}}


async def list_configs(
    session: AsyncSession, limit: int | None, marker: str | None, project: str | None = None
) -> list[dict[str, Any]]:
    """Configs (of *project*; None: every project), oldest first (no bodies: they are not decrypted for a listing)."""
    stmt = select(ConfigRow.id, ConfigRow.name, ConfigRow.group, ConfigRow.created_at).order_by(
        ConfigRow.created_at, ConfigRow.id
    )
    if project is not None:
        stmt = stmt.where(ConfigRow.project == project)
    rows = [
        {"id": i, "name": n, "group": g, "creation_time": c} for i, n, g, c in await session.execute(stmt)
    ]
    if marker is not None:
        ids = [r["id"] for r in rows]
        if marker not in ids:
            raise BadRequestError(f"marker: no software config {marker!r}", where="marker")
        rows = rows[ids.index(marker) + 1 :]
    return rows if limit is None else rows[:limit]


async def show_config(session: AsyncSession, config_id: str) -> dict[str, Any]:
    """A config, or a deployment's derived config by its id (as Heat stores derived configs as configs)."""
    row = await session.get(ConfigRow, config_id)
    if row is not None:
        return config_view(row, await secret_strings(session, row.stack_id))
    dep = await session.scalar(select(DeploymentRow).where(DeploymentRow.item_id == config_id))
    if dep is None or not dep.item:
        raise NotFoundError(f"Software config with id {config_id} not found", where="config")
    item = dict(dep.item)
    item["inputs"] = [{**i, "value": MASK} if i.get("secret") else i for i in item.get("inputs") or []]
    found = mask(item, await secret_strings(session, dep.stack_id))
    keys = ("id", "name", "group", "config", "inputs", "outputs", "options", "creation_time")
    return {k: found.get(k) for k in keys}


async def delete_config(rt: Runtime, config_id: str) -> None:
    async with rt.sessions() as session:
        row = await session.get(ConfigRow, config_id)
        if row is None:
            raise NotFoundError(f"Software config with id {config_id} not found", where="config")
        if row.stack_id is not None:
            raise ConflictError(
                f"software config {config_id} belongs to a stack: it goes with its stack", where="config"
            )
        used = await session.scalar(
            select(DeploymentRow.id).where(DeploymentRow.config_id == config_id).limit(1)
        )
        if used is not None:
            raise ConflictError(f"software config {config_id} is used by deployment {used}", where="config")
        await session.delete(row)
        await session.commit()
