"""Revision 0014 on SQLite and PostgreSQL: a stack's previous definition moves to columns an update copies in SQL."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.orm.exc import StaleDataError

from control import keys
from control.store import crypt, previous, schema
from control.store.db import open_database
from control.store.orm import StackRow

NOW = 1_700_000_000.0
OLD = {"heat_template_version": "2018-08-31", "resources": {"a": {"type": "OS::Heat::None"}}}
NEW = {"heat_template_version": "2018-08-31", "resources": {"b": {"type": "OS::Heat::None"}}}
LEGACY = {"template": OLD, "files": {"f": "x"}, "environment": {}, "params_given": {"p": "old"}}


def _at_0013_updating(conn: sa.Connection, key: bytes) -> None:
    """Revisions up to 0013, then a stack whose update (accepted by that code) is running."""
    command.upgrade(schema.alembic_config(connection=conn), "0013")
    stacks = sa.Table("stacks", sa.MetaData(), autoload_with=conn)
    sealed = {
        "template": NEW, "files": {}, "environment": {}, "params_given": {"p": "new"}, "parameters": {},
        "facade": {}, "outputs": {}, "previous": LEGACY,
    }  # fmt: skip
    conn.execute(
        stacks.insert(),
        {"id": "s1", "name": "web", "project": "default", "action": "UPDATE", "status": "IN_PROGRESS",
         "status_reason": "", "hidden": [], "warnings": [], "version": 2, "traversal": 2, "rollback": True,
         "created_at": NOW, "updated_at": NOW, "row_version": 3, "parent_resource": "", "nested_depth": 0,
         "tags": [], "force_delete": False, **{k: crypt.encrypt(key, v) for k, v in sealed.items()}},
    )  # fmt: skip


async def _upgraded(url: str, key: bytes) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_at_0013_updating, key)
    finally:
        await engine.dispose()
    found, _ = await schema.upgrade(url)
    assert ("0013", schema.head()) == (found.current, found.head)


async def _stored(session: Any, column: str) -> Any:
    """The column's value as stored (the encrypted envelope), not decrypted."""
    return (await session.execute(sa.text(f"SELECT {column} FROM stacks WHERE id = 's1'"))).scalar()


async def _check(url: str, key: bytes) -> None:
    engine, sessions = await open_database(url, key)
    try:
        async with sessions() as session:  # the update accepted before 0014: its previous is read
            assert await previous.held(session, "s1")
            assert LEGACY == await previous.read(session, "s1")
            stack = await session.get(StackRow, "s1")
            assert stack is not None
            previous.clear(stack)  # the update settles
            await session.commit()
        async with sessions() as session:
            assert (False, None) == (await previous.held(session, "s1"), await previous.read(session, "s1"))
            stack = await session.get(StackRow, "s1")
            assert stack is not None
            await previous.keep_current(session, stack)  # the next update
            await session.commit()
        async with sessions() as session:
            want = {"template": NEW, "files": {}, "environment": {}, "params_given": {"p": "new"}}
            assert want == await previous.read(session, "s1")
            # Copied as stored: the same ciphertext, neither decrypted nor encrypted again.
            assert await _stored(session, "template") == await _stored(session, "previous_template")
            stale = await session.get(StackRow, "s1")
            assert stale is not None
            await session.execute(sa.text("UPDATE stacks SET row_version = row_version + 1"))
            with pytest.raises(StaleDataError):
                await previous.keep_current(session, stale)
    finally:
        await engine.dispose()


def test_an_update_running_across_0014_keeps_its_previous_and_the_next_copies_it_in_sql(
    empty_db_url: str, tmp_path: Path
) -> None:
    """0013 -> 0014: a running update's previous definition (one encrypted object) still reads back; the
    next update copies the stack's stored columns as they are, and refuses a row changed since it was read."""
    key = keys.load_or_create(tmp_path / "keys").data_key
    asyncio.run(_upgraded(empty_db_url, key))
    asyncio.run(_check(empty_db_url, key))
