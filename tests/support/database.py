"""A fresh SQLite database with the control plane's schema, as the unit tests open it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from control import keys
from control.settings import async_url
from control.store.db import Sessions, open_database
from control.store.orm import StackRow


@dataclass(frozen=True)
class Database:
    url: str  # the plain SQLAlchemy URL, as `Settings.database_url` takes it
    keys: keys.Keys  # the data dir's keys; `keys.data_key` encrypts the database
    engine: AsyncEngine
    sessions: Sessions


@asynccontextmanager
async def sqlite_database(data_dir: Path) -> AsyncIterator[Database]:
    """Open (creating the schema) `anneal.db` in *data_dir* with that dir's keys; dispose of it after."""
    url = f"sqlite:///{data_dir / 'anneal.db'}"
    secrets = keys.load_or_create(data_dir)
    engine, sessions = await open_database(async_url(url), secrets.data_key)
    try:
        yield Database(url, secrets, engine, sessions)
    finally:
        await engine.dispose()


def bare_stack(stack_id: str, **columns: Any) -> StackRow:
    """A stack row with only what the schema requires (its name is its id, a CREATE in progress of
    an empty template), *columns* set over that: for tests of the store alone."""
    now = time.time()
    given: dict[str, Any] = {
        "id": stack_id,
        "name": stack_id,
        "action": "CREATE",
        "status": "IN_PROGRESS",
        "template": {},
        "created_at": now,
        "updated_at": now,
    }
    return StackRow(**{**given, **columns})
