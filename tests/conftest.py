"""What every tier shares: the `slow` mark by folder, and a fresh SQLite database (the harness is tests/support)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.database import Database, sqlite_database

#: The tiers that start real processes (control planes, agents, tools): marked `slow` here, in one place.
SLOW_TIERS = ("integration", "tools")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test under tests/integration and tests/tools `slow` (`-m "not slow"` runs the unit tier)."""
    here = Path(__file__).parent
    slow = {here / tier for tier in SLOW_TIERS}
    for item in items:
        if slow.intersection(item.path.parents):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    """A fresh SQLite database with the schema in *tmp_path* (which also holds its keys), disposed of after."""
    async with sqlite_database(tmp_path) as db:
        yield db
