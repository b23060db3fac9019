"""A big step's light records (control/engine/light.py) and its servers read in chunks, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from control import keys
from control.engine import light, slices
from control.hot import taint
from control.store.db import Sessions, open_database
from control.store.orm import ResourceRow
from control.txn import Txn
from tests.support.database import bare_stack

ATTRIBUTES = {"deploy_stdout": "ok", "token": taint.Secret("s3cr3t"), "members": {"0": ["a", 1]}}


@contextlib.asynccontextmanager
async def _with_stack(url: str, key: bytes) -> AsyncIterator[tuple[AsyncEngine, Sessions]]:
    """The database at *url* opened with *key*, holding stack "s"; disposed of after."""
    engine, sessions = await open_database(url, key)
    try:
        async with sessions() as session:
            session.add(bare_stack("s"))
            await session.commit()
        yield engine, sessions
    finally:
        await engine.dispose()


async def _read(url: str, key: bytes) -> None:
    async with _with_stack(url, key) as (engine, sessions):
        async with sessions() as session:
            for name, attrs in (("enc", ATTRIBUTES), ("empty", {})):
                session.add(
                    ResourceRow(
                        stack_id="s",
                        name=name,
                        type="OS::Heat::None",
                        attributes=attrs,
                        created_at=0,
                        updated_at=0,
                    )
                )
            await session.commit()
        async with engine.begin() as conn:  # as a version before encryption wrote it: plain JSON
            await conn.execute(
                ResourceRow.__table__.insert(),  # type: ignore[attr-defined]
                {"stack_id": "s", "name": "plain", "type": "OS::Heat::None", "action": "CREATE",
                 "status": "COMPLETE", "status_reason": "", "attributes": None, "requires": [], "traversal": 0,
                 "current": True, "created_at": 0, "updated_at": 0, "row_version": 1},
            )  # fmt: skip
            await conn.exec_driver_sql(
                "UPDATE resources SET attributes = '" + json.dumps({"old": True}) + "' WHERE name = 'plain'"
            )
        async with sessions() as session:
            lights = {light.name: light for light in await light.lights(session, ResourceRow.stack_id == "s")}
            full = {r.name: r.attributes for r in await session.scalars(select(ResourceRow))}
    held = lights["enc"].stored
    assert lights["enc"].opener is not None and isinstance(held, str) and "s3cr3t" not in held
    assert {name: light.attributes for name, light in lights.items()} == full
    assert (full["plain"], full["empty"]) == ({"old": True}, {})
    assert isinstance(lights["enc"].attributes["token"], taint.Secret) and lights["enc"].opener is None
    lights["enc"].attributes = {"new": 1}  # what a step writes back to its record of a row it settled
    assert lights["enc"].attributes == {"new": 1}


def test_a_light_record_keeps_a_resource_s_attributes_encrypted_until_read(
    empty_db_url: str, tmp_path: Path
) -> None:
    """A big step holds each resource's attributes as their stored text and opens them only when read:
    the same value as the full row's, a Secret still a Secret, a value from before encryption too."""
    asyncio.run(_read(empty_db_url, keys.load_or_create(tmp_path / "keys").data_key))


async def _preload(url: str, key: bytes) -> int:
    async with _with_stack(url, key) as (_, sessions), sessions() as session:
        servers = [
            light.Light(i, f"srv{i}", "OS::Heat::DeployedServer", "COMPLETE", 1, True, f"id-{i}", [], {})
            for i in range(SERVERS)
        ]
        return len(await slices.preload(Txn(session, None), ["s"], [*servers], sliced=False))  # type: ignore[arg-type]


#: More servers than PostgreSQL's 32,767 parameters of one statement (a million's stack has 200,000).
SERVERS = 40_000


def test_a_step_preloads_the_servers_of_a_big_stack_in_chunks(empty_db_url: str, tmp_path: Path) -> None:
    """A step over a stack of 40,000 servers reads them (none exist here) without one IN list of them
    all: on PostgreSQL that list failed the million's update (InterfaceError, over 32,767 arguments).
    (A sliced step reads only each slice's servers, through the same chunked read.)"""
    assert 0 == asyncio.run(_preload(empty_db_url, keys.load_or_create(tmp_path / "keys").data_key))
