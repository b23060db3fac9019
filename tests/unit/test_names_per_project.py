"""Where a stack name a caller gives resolves (control/store/names.py): its project's, or for an admin the one
named, else the only project that has it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from control.errors import ConflictError
from control.principal import EVERYWHERE, IDS_ONLY, Within
from control.settings import async_url
from control.store import names
from control.store.db import Sessions, open_database
from control.store.orm import StackRow
from tests.support.database import bare_stack


@pytest.fixture
async def sessions(tmp_path: Path) -> AsyncIterator[Sessions]:
    """A new database with stack `web` in alpha and beta, and `db` in beta only."""
    engine, made = await open_database(async_url(f"sqlite:///{tmp_path / 'a.db'}"), os.urandom(32))
    async with made() as session:
        for stack_id, project, name in (("a1", "alpha", "web"), ("b1", "beta", "web"), ("b2", "beta", "db")):
            session.add(bare_stack(stack_id, project=project, name=name, status="COMPLETE"))
        await session.commit()
    yield made
    await engine.dispose()


async def _found(sessions: Sessions, ref: str, within: Within) -> str | None:
    async with sessions() as session:
        row = await names.by_ref(session, StackRow, ref, within)
        return None if row is None else row.id


async def test_a_members_names_and_ids_reach_its_own_project_only(sessions: Sessions) -> None:
    """alpha's `web` is a1; beta's `db` and beta's id are not found from alpha."""
    alpha = Within("alpha")
    found = [await _found(sessions, ref, alpha) for ref in ("web", "db", "b1", "a1")]
    assert ["a1", None, None, "a1"] == found


async def test_an_admins_name_resolves_where_it_points_or_where_it_is_unique(sessions: Sessions) -> None:
    """The named project first; a name only beta has is beta's from anywhere; every id is reachable."""
    found = [
        await _found(sessions, "web", Within("beta", admin=True)),
        await _found(sessions, "db", Within("alpha", admin=True)),
        await _found(sessions, "db", EVERYWHERE),
        await _found(sessions, "b1", Within("alpha", admin=True)),
    ]
    assert ["b1", "b2", "b2", "b1"] == found


async def test_an_admins_name_in_several_projects_is_a_conflict_naming_them(sessions: Sessions) -> None:
    """`web` with no project named (or one without it) is refused, naming alpha and beta."""
    for within in (EVERYWHERE, Within("gamma", admin=True)):
        with pytest.raises(ConflictError, match=r"stack name 'web' is in several projects \(alpha, beta\)"):
            await _found(sessions, "web", within)


async def test_a_signed_urls_lookup_resolves_ids_and_no_names(sessions: Sessions) -> None:
    """IDS_ONLY: `db` (unique) is not found by name, b2 is by its id."""
    assert [None, "b2"] == [await _found(sessions, ref, IDS_ONLY) for ref in ("db", "b2")]
